"""What to do about an error: one sentence per cause, shared by every view (HTML, widget, text, chat)."""

from __future__ import annotations

import os

from ..core.redact import exception_chain

__all__ = ["error_hint"]


def _key_env(client_type: str | None) -> str | None:
    """The variable mmsp reads a client type's key from."""
    from mmsp.credentials import CLIENT_CREDENTIALS

    credentials = CLIENT_CREDENTIALS.get(client_type or "")
    return credentials.api_key_env if credentials else None


def error_hint(exc: BaseException | None, api_key_env: str | None = None, client_type: str | None = None) -> str:
    """One sentence on what to do about an error."""
    if exc is None:
        return ""
    name = type(exc).__name__
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    text = str(exc).lower()
    set_key = "in the environment (or name another variable with --api-key-env NAME), then run the cell again."
    if name == "ApiKeyRequiredError":
        env = getattr(exc, "api_key_env", None) or api_key_env or "the provider's API key variable"
        if getattr(exc, "base_url", None) and os.environ.get(env):
            # mmsp keeps a provider's key from being sent to another endpoint unless told to
            return (f"{env} is set, but mmsp does not send it to a custom --base-url: "
                    f"add --api-key-env {env} (or the variable holding that server's key).")
        return f"Set {env} {set_key}"
    if status == 401 or name == "AuthenticationError":
        env = api_key_env or _key_env(client_type) or "the API key variable"
        return f"The server refused the key: check {env}."
    if status is None and ("api_key" in text or "api key" in text or "authentication method" in text):
        # a provider SDK that found no key raises before sending anything
        env = api_key_env or _key_env(client_type) or "the provider's API key variable"
        return f"No API key: set {env} {set_key}"
    if status == 429 or name == "RateLimitError":
        return "Rate limited: wait a moment and run the cell again."
    if name == "IncompleteStreamError":
        return "The stream was cut short before its stop event; the request is worth retrying."
    if name == "ToolCallArgumentParseError":
        return "The model produced tool arguments that are not a JSON object; retry or rephrase."
    if name == "ProtocolError":
        return "The stream broke the UniEvent grammar: a bug in the client or the server, not in your prompt."
    if name in ("CancelledError", "KeyboardInterrupt"):
        return ""
    chain = exception_chain(exc)  # what a provider SDK's error wraps says how it failed
    names = {type(e).__name__ for e in chain}
    said = " ".join(str(e).lower() for e in chain)
    if names & {"RemoteProtocolError", "ReadError", "ReadTimeout"} or "closed" in said or "incomplete chunked" in said:
        return "The connection dropped before the stream ended; the request is worth retrying."
    if name in ("ConnectError", "APIConnectionError", "ConnectTimeout"):
        return "Could not connect: check the network, --base-url if you set one, and that the server is reachable."
    return "Run %mmsp error for the full detail."
