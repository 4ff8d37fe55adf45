"""The running wire proxies of a session, one per upstream (``Session.wire_proxies``).

A proxy is started the first time a turn goes through it and serves every later turn to the same
upstream; :meth:`WireProxies.close` stops them all (``Session.close()``, ``%unload_ext``). The
proxy itself (Starlette, uvicorn, httpx) is loaded only when the first one starts.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .proxy import WireProxy

__all__ = ["WireProxies"]


class WireProxies:
    """A session's running wire proxies, one per upstream, started on first use (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proxies: dict[str, WireProxy] = {}

    def get(self, upstream: str) -> WireProxy:
        """The running proxy in front of ``upstream``, started now if there is none (blocks while it starts).

        Raises:
            DemoServerError: ``upstream`` is not an http(s) URL, or the proxy cannot start.
        """
        from .proxy import WireProxy

        with self._lock:
            proxy = self._proxies.get(upstream)
            if proxy is None or not proxy.running:
                proxy = WireProxy(upstream).start()
                self._proxies[upstream] = proxy
            return proxy

    def running(self) -> list[WireProxy]:
        """The proxies serving now."""
        with self._lock:
            return [proxy for proxy in self._proxies.values() if proxy.running]

    def close(self) -> None:
        """Stop every proxy (their open streams end at once); a later :meth:`get` starts a new one."""
        with self._lock:
            proxies = list(self._proxies.values())
            self._proxies.clear()
        for proxy in proxies:
            proxy.stop()
