"""Keep API keys out of everything shown or saved: errors, outputs, widget state, traces, reprs."""

from __future__ import annotations

import os
import re

__all__ = ["redact", "redact_exception", "exception_chain", "register_secret_env"]

_EXTRA_ENVS: set[str] = set()
# shapes of common provider keys, masked even when the key is not in this process's environment
_KEY_PATTERNS = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{6,}|sk-[A-Za-z0-9_\-]{16,}|AIza[0-9A-Za-z_\-]{20,}|xai-[A-Za-z0-9]{16,}|"
    r"(?i:bearer)\s+[A-Za-z0-9_\-\.=]{16,})"
)


def register_secret_env(name: str) -> None:
    """Also redact the value of this environment variable (``--api-key-env NAME``)."""
    _EXTRA_ENVS.add(name)


def _secret_values() -> list[str]:
    from mmsp.credentials import CLIENT_CREDENTIALS

    names = {cred.api_key_env for cred in CLIENT_CREDENTIALS.values()} | _EXTRA_ENVS
    names |= {name for name in os.environ if name.endswith(("_API_KEY", "_TOKEN", "_SECRET"))}
    values = [os.environ.get(name, "") for name in names]
    return sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every known key value and every key-shaped string replaced by ``[redacted]``."""
    if not text:
        return text
    for value in _secret_values():
        if value in text:
            text = text.replace(value, "[redacted]")
    return _KEY_PATTERNS.sub("[redacted]", text)


def _redacted(value: object, depth: int = 0) -> object:
    if isinstance(value, str):
        return redact(value)
    if depth < 4 and isinstance(value, dict):
        return {k: _redacted(v, depth + 1) for k, v in value.items()}
    if depth < 4 and isinstance(value, (list, tuple)):
        return type(value)(_redacted(v, depth + 1) for v in value) if type(value) in (list, tuple) else value
    return value


def redact_exception(exc: BaseException | None) -> BaseException | None:
    """Redact ``exc`` in place, with its cause and context: its args and its str/dict/list attributes.

    An upstream error may quote the request (a 401 that echoes the key it got): the exception a turn
    keeps, shows, and re-raises under ``--strict`` then says ``[redacted]`` where the key was.
    """
    for link in exception_chain(exc):
        try:
            link.args = tuple(_redacted(arg) for arg in link.args)
            for name, value in list(vars(link).items()):
                if isinstance(value, (str, dict, list, tuple)):
                    setattr(link, name, _redacted(value))
        except Exception:  # an exception type that refuses new attributes keeps them; str() is redacted where shown
            pass
    return exc


def exception_chain(exc: BaseException | None, limit: int = 8) -> list[BaseException]:
    """``exc`` and what it wraps (its cause, else its context), outermost first, without a cycle."""
    chain: list[BaseException] = []
    while exc is not None and len(chain) < limit and all(exc is not seen for seen in chain):
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain
