"""Keep API keys out of everything shown or saved: errors, outputs, widget state, traces, reprs."""

from __future__ import annotations

import os
import re

__all__ = ["redact", "register_secret_env"]

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
