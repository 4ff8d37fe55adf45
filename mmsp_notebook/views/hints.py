"""What to do about an error: one sentence per cause, shared by every view (HTML, widget, text, chat).

An error is known by mmsp's name for it: over MMSP's wire every failure arrives as an
``UpstreamError`` whose ``error_type`` names what the server's client raised
(``ToolCallArgumentParseError``, ``IncompleteStreamError``...), and it gets the hint that failure
gets from a provider's client directly.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from typing import Any

from ..core.endings import error_type, frame_cut_off, tool_arguments_ending
from ..core.redact import exception_chain

__all__ = ["error_hint"]

_SET_KEY = "in the environment (or name another variable with --api-key-env NAME), then run the cell again."

_ARGUMENTS = {
    "length": ("The output hit the token limit in the middle of a tool call's arguments, so they are cut off: "
               "raise --max-tokens and run the cell again."),
    "lost": ("The stream ended in the middle of a tool call's arguments, with no finish reason (the connection "
             "was lost): the request is worth retrying."),
    "cut": ("A tool call's arguments were cut off before they were complete: by the token limit (raise "
            "--max-tokens) or a lost connection (retry)."),
    "malformed": ("The model produced tool arguments that are not a JSON object (malformed, not cut off): "
                  "rephrase the request or retry."),
}


def _key_env(client_type: str | None) -> str | None:
    """The variable mmsp reads a client type's key from."""
    from mmsp.credentials import CLIENT_CREDENTIALS

    credentials = CLIENT_CREDENTIALS.get(client_type or "")
    return credentials.api_key_env if credentials else None


def _error_object(exc: BaseException) -> dict[str, Any]:
    """The error object a server sent, as the client keeps it (an MMSP server's ``error``, an SDK's ``body``)."""
    for name in ("error", "body"):
        value = getattr(exc, name, None)
        if isinstance(value, dict):
            inner = value.get("error")
            return inner if isinstance(inner, dict) else value
    return {}


def _demo_fault(exc: BaseException) -> str:
    """The hint of a fault the demo server injected on purpose (its error object names it), or ``""``."""
    fault = _error_object(exc).get("demo_fault")
    if not isinstance(fault, str) or not fault:
        return ""
    said = {"401": "The server refused the key: this is the demo's injected +401 fault (the demo checks no key)",
            "429": "Rate limited: this is the demo's injected +429 fault (the demo has no rate limit)"}
    lead = said.get(fault) or f"This is the demo's injected +{fault} fault"
    return f"{lead}; a model name without +{fault} is answered."


def _empty_answer(exc: BaseException) -> str:
    """The hint of a response with nothing but thinking: a refusal when the provider's reason was not one mmsp names."""
    finish = getattr(exc, "finish_reason", None)
    if finish is None:
        finish = _error_object(exc).get("finish_reason")
    if finish == "unknown":
        # mmsp maps a finish reason it does not know to "unknown": Anthropic's "refusal" is one
        return ("The model refused: it stopped with no answer, for a reason mmsp reports as unknown (a provider's "
                "refusal arrives so; --wire shows the provider's own stop reason). Rephrase the request.")
    return ("The model ended its answer with no content but thinking (a refusal or a content filter can do "
            "this): rephrase the request or retry.")


@functools.cache
def _known_models() -> tuple[str, ...]:
    """The model ids a model name is compared with: the demo's and those mmsp lists."""
    from mmsp import list_supported_models

    return ("demo", "demo-embed", *sorted({m["model"] for m in list_supported_models()}))


def _unknown_model(exc: BaseException) -> str:
    """The hint of a model no client is known for: the nearest known name, where the others are listed."""
    model = getattr(exc, "model", None)
    if getattr(exc, "client_type", None) is not None or not isinstance(model, str):
        return "Name one of the client types above with --client-type."
    near = difflib.get_close_matches(model, _known_models(), n=1, cutoff=0.75)
    lead = f"Did you mean {near[0]!r}? " if near and near[0] != model else ""
    return (f"{lead}%mmsp models lists the models and aliases known here; for a model mmsp does not list, name "
            "its client, e.g. --client-type openai-chat --base-url URL for any OpenAI-compatible server.")


def error_hint(exc: BaseException | None, api_key_env: str | None = None, client_type: str | None = None) -> str:
    """One sentence on what to do about an error."""
    if exc is None:
        return ""
    name = error_type(exc)
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    text = str(exc).lower()
    fault = _demo_fault(exc)
    if fault:
        return fault
    if name == "LoopBlockedError":
        return str(getattr(exc, "hint", "") or "")
    if name == "IdleTimeoutError" and status is not None:
        return f"Refused with HTTP {status}: wait a moment and run the cell again (--timeout bounds the SDK's retries)."
    if name == "IdleTimeoutError":
        return "The server went silent: retry, or allow it longer with --timeout SECONDS (none for no limit)."
    if name == "ApiKeyRequiredError":
        env = getattr(exc, "api_key_env", None) or _error_object(exc).get("api_key_env")
        if name != type(exc).__name__:  # an MMSP server reported it: the key is missing there
            return f"The MMSP server has no API key for this model's provider: set {env or 'its key'} where the server runs."
        env = env or api_key_env or "the provider's API key variable"
        if getattr(exc, "base_url", None) and os.environ.get(env):
            # mmsp keeps a provider's key from being sent to another endpoint unless told to
            return (f"{env} is set, but mmsp does not send it to a custom --base-url: "
                    f"add --api-key-env {env} (or the variable holding that server's key).")
        return f"Set {env} {_SET_KEY}"
    # (a key refused inside a stream that began with HTTP 200 has no status: the server's error object says it)
    refused_in_stream = status is None and bool(_error_object(exc)) and ("api_key" in text or "api key" in text)
    if status == 401 or name == "AuthenticationError" or refused_in_stream:
        env = api_key_env or _key_env(client_type) or "the API key variable"
        return f"The server refused the key: check {env}."
    if status is None and ("api_key" in text or "api key" in text or "authentication method" in text):
        # a provider SDK that found no key raises before sending anything
        env = api_key_env or _key_env(client_type) or "the provider's API key variable"
        return f"No API key: set {env} {_SET_KEY}"
    if "the wire proxy could not reach the upstream" in text:  # (--wire: the proxy answers 502 for the upstream)
        return ("Could not connect (the wire proxy could not reach it): check the network, --base-url if you set "
                "one, and that the server is reachable.")
    if status == 429 or name == "RateLimitError":
        return "Rate limited: wait a moment and run the cell again."
    if name == "NotAnEventStreamError":
        return "Check --base-url (the API's endpoint, which streams events) and --client-type."
    if name == "IncompleteStreamError":
        return "The stream was cut short before its stop event; the request is worth retrying."
    ending = tool_arguments_ending(exc)
    if ending is not None:
        return _ARGUMENTS[ending]
    if name == "EmptyResponseError":
        return _empty_answer(exc)
    if name == "StreamProtocolError":
        return ("mmsp's client broke its own streaming protocol on this provider's stream: a bug in mmsp, not in "
                "your prompt; retry, and report it (%mmsp error shows the detail) if it repeats.")
    if name == "ProtocolError":
        return "The stream broke the UniEvent grammar: a bug in the client or the server, not in your prompt."
    if name == "RoutingError":
        return _unknown_model(exc)
    if name in ("CancelledError", "KeyboardInterrupt"):
        return ""
    chain = exception_chain(exc)  # what a provider SDK's error wraps says how it failed
    names = {type(e).__name__ for e in chain}
    said = " ".join(str(e).lower() for e in chain)
    if frame_cut_off(exc):
        return ("The stream was cut off inside a frame (its JSON stops mid-way) before its stop event; the "
                "request is worth retrying (--wire shows what arrived).")
    if names & {"JSONDecodeError"}:
        return ("The server sent a frame that is not JSON, so it does not speak this client's protocol: check "
                "--client-type and --base-url (--wire shows what it sent).")
    if names & {"RemoteProtocolError", "ReadError", "ReadTimeout"} or re.search(r"\bclosed\b", said) \
            or "incomplete chunked" in said:
        return "The connection dropped before the stream ended; the request is worth retrying."
    if any(type(e).__module__ == "binascii" for e in chain):  # mmsp decodes an inline_data frame's base64
        return ("The server sent an image or audio whose base64 is damaged (cut short or not base64), so it could "
                "not be decoded: a fault of the server, not of your prompt; retry (--wire shows the frame).")
    if name in ("ConnectError", "APIConnectionError", "ConnectTimeout"):
        return "Could not connect: check the network, --base-url if you set one, and that the server is reachable."
    return "Run %mmsp error for the full detail."
