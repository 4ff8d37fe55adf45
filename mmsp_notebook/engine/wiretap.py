"""Sending a turn through a recording wire proxy, and capturing its wire when it ends.

``launch(..., wire=True)`` builds the conversation's client with :func:`wire_client`: its base URL
is a tap of the session's :class:`~mmsp_notebook.wire.proxy.WireProxy` in front of the real
endpoint (for demo models without a base URL, in front of the session's local model server). The
session keeps one proxy per upstream (``Session.wire_proxies``, a
:class:`~mmsp_notebook.wire.proxies.WireProxies`), started on first use and stopped with the
session (``Session.close()``, ``stop_demo()``, ``%unload_ext``). Each conversation has a
tap of its own, so several conversations can share a proxy and each find its requests.

When the turn has ended, still inside the launch coroutine (so before the turn's future
resolves), :func:`capture_wire` pairs the proxy's records of the turn with its steps' events
(:func:`~mmsp_notebook.wire.capture.build_wire`) and sets ``turn.wire``: a front door that shows
the wire finds it there.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import OptionError
from ..core.turn import Turn
from ..wire.capture import Wire, build_wire
from .session import Conversation, Lease, Session, api_key_from_env, import_client_class, is_demo_model, key_digest

if TYPE_CHECKING:
    from ..wire.proxy import WireProxy

__all__ = ["WireTap", "wire_client", "capture_wire", "tap_name"]

_ROOT_TYPES = ("ant-messages", "anthropic-official")


@dataclass(frozen=True)
class WireTap:
    """Where one turn's requests go: the lease of its client, the proxy and tap it goes through, and
    when the turn began (``time.monotonic()``; the proxy's records of the turn begin after it)."""

    lease: Lease
    proxy: WireProxy
    tap: str
    since: float

    @property
    def client(self) -> Any:
        return self.lease.client


def tap_name(conversation: str) -> str:
    """The tap of a conversation: its name made URL-safe, and a hash of the name so two never share one."""
    digest = hashlib.sha1(conversation.encode("utf-8")).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.~-]+", "_", conversation)[:40] + "-" + digest


async def wire_client(sess: Session, conv: Conversation, model: str, client_type: str | None, base_url: str | None,
                      api_key_env: str | None) -> WireTap:
    """A client for this endpoint through the session's wire proxy, on the conversation's tap (on the worker loop).

    Demo models without a base URL go through a proxy in front of the session's local model
    server; any other endpoint through a proxy in front of ``base_url`` (else the client type's
    default endpoint). The key is resolved as the client would resolve it for the upstream (mmsp's
    ``resolve_credentials``) and handed to the client, which sends it to the proxy, which forwards
    it and forgets it. The client is the session's shared one for the tap's URL
    (:class:`~mmsp_notebook.engine.session.ClientPool`); the history is the conversation's, as
    for any turn. Release ``tap.lease`` when the turn ends.

    Raises:
        OptionError: The endpoint of ``model`` cannot be told without a client type and a base URL.
    """
    import mmsp
    from mmsp.credentials import CLIENT_CREDENTIALS, routed_client_type
    from mmsp.utils import resolve_credentials

    if is_demo_model(model) and not base_url:
        kind = client_type or "mmsp"
        upstream = (await asyncio.to_thread(sess.demo_server)).base_url
        api_key = None if kind == "mmsp" else "demo-key"
    else:
        kind = routed_client_type(model, client_type) or client_type or ""
        if kind not in CLIENT_CREDENTIALS:
            raise OptionError(f"--wire: cannot tell which endpoint {model!r} goes to; give --client-type and --base-url")
        api_key, resolved = resolve_credentials("WireProxy", kind, api_key_from_env(api_key_env), base_url)
        upstream = resolved or CLIENT_CREDENTIALS[kind].default_base_url
    proxy = await asyncio.to_thread(sess.wire_proxies.get, upstream)
    tap = tap_name(conv.name)
    # (a Messages client appends /v1/messages: the demo server's /v1 is dropped; never with a query,
    # which the client's path goes after, as it does without the proxy)
    root = kind in _ROOT_TYPES and proxy.upstream_path.endswith("/v1") and "?" not in proxy.upstream
    url = proxy.tap_url(tap, root=root)
    key = ("wire", model, client_type or kind, url, api_key_env, key_digest(api_key))
    if key not in sess.clients:  # (a provider's SDK is imported off the loop: see Session.lease_client)
        await asyncio.to_thread(import_client_class, model, client_type or kind, url)
    lease = await sess.clients.lease(
        key, lambda: mmsp.AutoLLMClient(model=model, api_key=api_key, base_url=url, client_type=client_type or kind))
    return WireTap(lease, proxy, tap, time.monotonic())


async def capture_wire(turn: Turn, tap: WireTap, settle: float = 1.0) -> Wire:
    """Pair the proxy's records of a finished turn with its steps' events; sets and returns ``turn.wire``.

    The client may have read the last byte before the proxy marked its record ended: the records
    of the turn are given up to ``settle`` seconds to end first.
    """
    deadline = time.monotonic() + settle
    while True:
        records = [r for r in tap.proxy.records(tap.tap) if r.started >= tap.since]
        if all(r.outcome != "streaming" for r in records) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.01)
    # (off the worker loop: a long answer's frames take a while to cut, redact and pair, and the
    # kernel's other streams go on meanwhile)
    wire = await asyncio.to_thread(build_wire, turn, records)
    turn.wire = wire
    return wire
