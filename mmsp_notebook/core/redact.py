"""Keep API keys out of everything shown or saved: errors, outputs, widget state, traces, captures, reprs.

The rule
    *Configured keys* are the values of mmsp's key variables (``OPENAI_API_KEY``...), of every
    variable named ``*_API_KEY``, ``*_TOKEN`` or ``*_SECRET``, and of each variable named with
    ``--api-key-env`` (at least 6 characters). A configured key is redacted wherever it appears in
    what this project shows or writes, whole or cut: a prefix of it of at least
    :data:`MIN_PREFIX` characters that ends the text or is followed by a character no key has
    (a 401 body cut at 200 characters in the middle of ``Bearer sk-...``) is redacted too.

    * Errors and messages (a turn's error, the banner, ``%mmsp error``, the sidecar's error, a
      listener's warning): :func:`redact` — configured keys, and any string shaped like a
      provider key (``sk-...``, ``AIza...``, ``Bearer ...``), configured or not.
    * Content the project renders or writes — the views (text, HTML, widget state), the trace the
      engine saves, the wire captures (``turn.save_wire``, the proxy's ``save_transcript`` and
      ``--save-dir``): configured keys wherever they appear, in text, thinking, tool arguments
      and tool results (:func:`redact_secrets`, :func:`redact_data`); raw captured bytes also key
      shapes (:func:`redact_bytes`, the one redaction of every capture file).
    * Python values are the data as received: ``turn.text``, ``.thinking``, ``.tool_calls``,
      ``.message``, ``.events`` and a conversation's history (what its next turn sends) are what
      the model sent, unchanged, as any client library returns them; printing one is the
      program's own output.
    * Traces: the engine saves every trace itself through mmsp's Tracer, handing it the history
      with configured keys redacted (the clients are given the config without ``trace_id``, so
      mmsp writes no other copy). What mmsp's Tracer does with what it is handed is mmsp's.
"""

from __future__ import annotations

import bisect
import functools
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["held_secrets", "redact", "redact_secrets", "redact_fragment", "redact_data", "redact_value", "redact_bytes", "redact_exception", "exception_chain",
           "redact_url_secrets", "redact_parts",
           "register_secret_env", "secret_values", "cut_from_frame", "redact_streamed", "GrowingRedaction", "split_point",
           "MIN_PREFIX", "REDACTED", "STREAMED_KEEP"]

REDACTED = "[redacted]"
#: The shortest prefix of a configured key that is redacted where a cut left it.
MIN_PREFIX = 6

_EXTRA_ENVS: set[str] = set()
# shapes of common provider keys, masked even when the key is not in this process's environment
_KEY_PATTERNS = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]{6,}|sk-[A-Za-z0-9_\-]{16,}|AIza[0-9A-Za-z_\-]{20,}|xai-[A-Za-z0-9]{16,}|"
    r"(?i:bearer)\s+[A-Za-z0-9_\-\.=]{16,})"
)
# the characters a key is made of: a prefix followed by one of them is another token, not a cut
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def register_secret_env(name: str) -> None:
    """Also redact the value of this environment variable (``--api-key-env NAME``)."""
    _EXTRA_ENVS.add(name)


_held = threading.local()  # .secrets: the keys fixed for a block of work on this thread (see held_secrets)


@contextmanager
def held_secrets() -> Iterator[None]:
    """Within the block, :func:`secret_values` on this thread returns the keys as they were when it
    began, read once: a loader that redacts thousands of error messages reads the environment once
    per load, not once per message. Other threads read it as before."""
    if getattr(_held, "secrets", None) is not None:  # (nested: the outer block's keys)
        yield
        return
    _held.secrets = secret_values()
    try:
        yield
    finally:
        _held.secrets = None


def secret_values() -> list[str]:
    """The configured keys (see the module docstring), longest first."""
    held = getattr(_held, "secrets", None)
    if held is not None:
        return held
    from mmsp.credentials import CLIENT_CREDENTIALS

    names = {cred.api_key_env for cred in CLIENT_CREDENTIALS.values()} | _EXTRA_ENVS
    names |= {name for name in os.environ if name.endswith(("_API_KEY", "_TOKEN", "_SECRET"))}
    values = [os.environ.get(name, "") for name in names]
    return sorted({v for v in values if len(v) >= MIN_PREFIX}, key=len, reverse=True)


#: ASCII letters to lower case, nothing else (the length of a text never changes)
_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def _any_case(secret: str) -> bool:
    """Whether a key is matched in any case: one that looks like a generated key (12 characters or
    more, letters and digits), not a word someone set as a key (``ollama``), which prose holds."""
    return len(secret) >= 12 and any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)


@functools.lru_cache(maxsize=64)
def _key_form(secret: str) -> tuple[bool, str]:
    """Whether a key is matched in any case, and the key as matched (lower case then): worked out
    once per key, not once per string redacted (an events table redacts each row)."""
    any_case = _any_case(secret)
    return any_case, secret.translate(_ASCII_LOWER) if any_case else secret


@functools.lru_cache(maxsize=64)
def _head_pattern(head: str) -> re.Pattern[str]:
    """The first characters of a key, found in any case of their ASCII letters (only theirs: re.ASCII)."""
    return re.compile(re.escape(head), re.IGNORECASE | re.ASCII)


def _spans(text: str, secret: str) -> list[tuple[int, int]]:
    """Where ``secret`` is in ``text``, whole or as a prefix left by a cut (at least
    :data:`MIN_PREFIX` characters, ending the text or followed by a character no key has); a
    generated-looking key in any case of its ASCII letters (a model that echoes it capitalized
    still shows it): ``(start, end)`` each.

    Linear in the text and cheap on a long one: the key's head is found by ``str.find`` (in the
    text, or in its lower case when it is ASCII) or, in non-ASCII text, by a case-blind pattern,
    and only the characters after a hit are lowered; the text is never translated whole."""
    any_case, key = _key_form(secret)
    head, size = key[:MIN_PREFIX], len(key)
    low: str | None = text if not any_case else text.lower() if text.isascii() else None
    pattern = _head_pattern(head) if low is None else None

    def find(start: int) -> int:
        if low is not None:
            return low.find(head, start)
        found = pattern.search(text, start) if pattern is not None else None
        return found.start() if found else -1

    spans: list[tuple[int, int]] = []
    n = len(text)
    at = find(0)
    while at >= 0:
        window = low[at:at + size] if low is not None else text[at:at + size].translate(_ASCII_LOWER)
        k = MIN_PREFIX
        while k < len(window) and window[k] == key[k]:
            k += 1
        if k == size or at + k == n or text[at + k] not in _KEY_CHARS:
            spans.append((at, at + k))
            at = find(at + k)
        else:  # another token that begins like the key
            at = find(at + 1)
    return spans


@functools.lru_cache(maxsize=16)
def _heads(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """What a text must hold for :func:`_spans` to find one of ``secrets`` in it: the first
    :data:`MIN_PREFIX` characters of each, in any case of their ASCII letters for a generated-looking
    key (as :func:`_spans` matches it). One search of a text replaces a pass per key."""
    alts = [(f"(?i:{re.escape(k[:MIN_PREFIX])})" if _any_case(k) else re.escape(k[:MIN_PREFIX])) for k in secrets]
    return re.compile("|".join(alts) or r"(?!)", re.ASCII)  # (ASCII: case folds as _ASCII_LOWER does)


def _may_hold(text: str, secrets: list[str]) -> bool:
    """Whether ``text`` may hold one of ``secrets`` (whole or cut): False only when it holds none."""
    return bool(secrets) and _heads(tuple(secrets)).search(text) is not None


def _without(text: str, secret: str) -> str:
    """``text`` with ``secret`` and each prefix of it left by a cut replaced by :data:`REDACTED`."""
    spans = _spans(text, secret)
    if not spans:
        return text
    out: list[str] = []
    start = 0
    for a, b in spans:
        out += [text[start:a], REDACTED]
        start = b
    out.append(text[start:])
    return "".join(out)


def redact_fragment(before: str, fragment: str, secrets: list[str] | None = None) -> str:
    """A streamed fragment (a delta's text) as shown: configured keys redacted where they overlap
    it in the text streamed so far (``before`` + ``fragment``), so that a key split across
    deltas shows in none of them (a prefix shorter than :data:`MIN_PREFIX` at the end of the
    earlier one excepted, as anywhere). ``secrets``: :func:`secret_values`, when the caller has them."""
    secrets = secret_values() if secrets is None else secrets
    if not secrets or not fragment:
        return fragment
    context = before[max(0, len(before) - (len(secrets[0]) - 1)):]  # (longest key first)
    text = context + fragment
    if not _may_hold(text, secrets):  # (the common case, one search: a long answer has tens of thousands)
        return fragment
    off = len(context)
    cover = sorted((max(a, off) - off, b - off) for secret in secrets for a, b in _spans(text, secret) if b > off)
    if not cover:
        return fragment
    out: list[str] = []
    start = 0
    for a, b in cover:
        if b <= start:
            continue
        if a > start or not out:
            out += [fragment[start:a], REDACTED]
        start = max(start, b)
    out.append(fragment[start:])
    return "".join(out)


#: characters of each delta field kept as the context :func:`redact_fragment` looks back into
STREAMED_KEEP = 1024


def redact_streamed(streamed: dict[str, str], key: str, value: str, secrets: list[str] | None = None) -> str:
    """A delta's string ``value`` (its field ``key``) of a run of events shown in order, configured
    keys redacted where they overlap it (:func:`redact_fragment`); ``streamed`` (a dict the caller
    keeps: the run's text so far, by field) moves on past it."""
    before = streamed.get(key, "")
    streamed[key] = (before + value)[-STREAMED_KEEP:]
    return redact_fragment(before, value, secrets)


def cut_from_frame(raw: str, changed: list[tuple[str, str]]) -> str | None:
    """A raw SSE frame's text with each delta string it carried written as redacted: ``changed``
    holds ``(original, shown)`` pairs (:func:`redact_fragment` took a piece of a key split across
    deltas out of ``original``), each replaced where the frame's JSON writes it as a string.
    ``None`` when a piece taken out is in the frame written otherwise: the frame must not be shown
    or saved."""
    for original, shown in changed:
        for ascii_only in (False, True):  # the delta's JSON string, quotes included, as the frame writes it
            written = json.dumps(original, ensure_ascii=ascii_only)
            if written in raw:
                raw = raw.replace(written, json.dumps(shown, ensure_ascii=ascii_only))
                break
        else:  # not written so: safe when no piece of the key it held is in the frame (redacted when captured)
            if any(piece in raw or json.dumps(piece)[1:-1] in raw for piece in _taken_out(original, shown)):
                return None
    return raw


def _taken_out(original: str, shown: str) -> list[str]:
    """The pieces of ``original`` that ``shown`` has as ``[redacted]`` (what the redaction took out)."""
    parts = shown.split(REDACTED)
    pieces, at = [], 0
    for k, part in enumerate(parts):
        start = original.find(part, at) if part else (len(original) if k == len(parts) - 1 else at)
        if k:
            pieces.append(original[at:start])
        at = start + len(part)
    return [p for p in pieces if p]


def _redact_known(text: str, secrets: list[str]) -> str:
    if not _may_hold(text, secrets):
        return text
    for secret in secrets:
        text = _without(text, secret)
    return text


def redact_secrets(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every configured key, whole or cut (see the module docstring), replaced by ``[redacted]``.

    For content (a model's text, thinking, tool arguments): only configured keys, so text that
    merely looks like a key is left as written. ``secrets``: :func:`secret_values`, when the
    caller has them.
    """
    if not text:
        return text
    return _redact_known(text, secret_values() if secrets is None else secrets)


def _key_chars(secrets: list[str]) -> str:
    """Every character a configured key may be matched with (:func:`_spans`): its own, and for a key
    matched in any case the other case of its ASCII letters."""
    chars: set[str] = set()
    for secret in secrets:
        chars.update(secret)
        if _any_case(secret):
            chars.update(c.swapcase() for c in secret if c.isascii() and c.isalpha())
    return "".join(sorted(chars))


@functools.lru_cache(maxsize=16)
def _settling(secrets: tuple[str, ...]) -> tuple[frozenset[str], re.Pattern[str]]:
    """The characters a configured key may be matched with (:func:`_key_chars`), and a pattern of
    the last character of a text that is none of them."""
    chars = _key_chars(list(secrets))
    escaped = "".join(re.escape(c) for c in chars)
    return frozenset(chars), re.compile(f"[^{escaped}][{escaped}]*+\\Z", re.DOTALL)


def _settle_point(text: str, start: int, secrets: list[str]) -> int:
    """Where ``text`` is settled (:class:`GrowingRedaction`): just past its last character from
    ``start`` on that is in no configured key, else ``start``. A text mostly ends a few characters
    past one, looked for backwards; a long run of key characters is searched by the pattern."""
    chars, pattern = _settling(tuple(secrets))
    n = len(text)
    near = max(start, n - 64)
    for j in range(n - 1, near - 1, -1):
        if text[j] not in chars:
            return j + 1
    found = pattern.search(text, start, near) if near > start else None
    return found.start() + 1 if found else start


@functools.lru_cache(maxsize=16)
def _splitting(secrets: tuple[str, ...]) -> re.Pattern[str]:
    """A character :func:`split_point` splits after: in no configured key (:func:`_key_chars`), no control character."""
    escaped = "".join(re.escape(c) for c in _key_chars(list(secrets)))
    return re.compile(f"[^{escaped}\\x00-\\x1f]")


def split_point(text: str, start: int, secrets: list[str]) -> int:
    """The first point from ``start`` on (an index, just past a character) where ``text`` splits for
    redaction, ``-1`` when there is none: past a character that is in no configured key (as
    :class:`GrowingRedaction` settles) and is no control character, so that JSON writes it as itself
    (a quote or a backslash after a backslash). No key, whole or cut, can span it, in the text nor
    in its JSON string: :func:`redact_secrets` of either is that of the part before the point
    followed by that of the rest. One search, from ``start`` on, as far as the first such character."""
    found = _splitting(tuple(secrets)).search(text, max(0, start - 1))
    return found.end() if found else -1


class GrowingRedaction:
    """:func:`redact_secrets` of a text that only grows (an area of a streaming turn, read again at
    each repaint), redacting only what came since the last settled point instead of the whole text.

    The text is settled up to the last character that is in no configured key (a space, a
    punctuation mark, any non-ASCII character, a letter no key has): no key, whole or cut, can span
    such a character, and whether a key's prefix just before it is a cut (followed by a character no
    key has) is decided by it, so the redaction of the text is the redaction of the part up to it
    followed by that of the rest, whatever comes after (at every step of :func:`redact_secrets`, one
    key after the other). Each call redacts the rest: what came since, and the few characters before
    it back to that point, so a key split across deltas is masked, and a key's prefix at the very
    end of the text is treated as :func:`redact_secrets` treats it (it is part of the rest until the
    text goes on past it). A call returns what :func:`redact_secrets` returns for the whole text;
    :attr:`settled` says how much of it no text that follows can change.

    The text given must begin with the text given at the last call; other keys configured since
    start it over.
    """

    def __init__(self) -> None:
        self._secrets: list[str] | None = None
        self._raw = 0  # characters of the text settled
        self._shown = ""  # their redaction

    @property
    def settled(self) -> int:
        """Characters at the start of the last call's result that stay as they are however the text
        goes on: the redaction of its settled part (all of it when no key is configured). What
        follows them may still become a key, or stop being one (a key's first characters at the end
        of the text are redacted as a cut key until the text goes on otherwise)."""
        return len(self._shown)

    def __call__(self, text: str, secrets: list[str] | None = None) -> str:
        secrets = secret_values() if secrets is None else secrets
        if not secrets:
            self._secrets, self._raw, self._shown = [], len(text), text
            return text
        if secrets != self._secrets or len(text) < self._raw:
            self._secrets = list(secrets)
            self._raw, self._shown = 0, ""
        start = self._raw
        cut = _settle_point(text, start, secrets)
        if cut > start:
            self._shown += _redact_known(text[start:cut], secrets)
            self._raw = start = cut
        if start == len(text):
            return self._shown
        return self._shown + _redact_known(text[start:], secrets)


#: the password of a URL's user info (``https://user:password@host``)
#: a URL's password, up to the last @ (a password may hold @ or /) before another ``://``: each
#: match scans no further than the next URL, so redacting is linear in the text
_URL_PASSWORD = re.compile(r"(://[^/\s:@'\"]*:)(?:(?!://)[^\s'\"])+@")
#: the value of a URL's query parameter named like a credential (``?key=...``, ``&api_key=...``)
_QUERY_NAMES = r"key|api[_-]?key|apikey|access[_-]?token|token|secret|password|auth|sig|signature|x-goog-api-key"
_URL_QUERY_SECRET = re.compile(
    rf"([?&](?:{_QUERY_NAMES})=)"
    r"[^&#\s\"'\\]*", re.IGNORECASE)  # (not past a backslash: a JSON string's escape stays whole)


def redact_url_secrets(text: str) -> str:
    """``text`` with the password of every URL's user info (``https://user:password@host``) and the
    value of every query parameter named like a credential (``?key=...``) replaced by ``[redacted]``."""
    return _URL_PASSWORD.sub(rf"\1{REDACTED}@", _URL_QUERY_SECRET.sub(rf"\1{REDACTED}", text))


def redact(text: str) -> str:
    """``text`` with every configured key (whole or cut), every key-shaped string, the password of
    every URL (``https://user:password@host``) and every credential in a URL's query (``?key=...``)
    replaced by ``[redacted]``."""
    if not text:
        return text
    return redact_url_secrets(_KEY_PATTERNS.sub(REDACTED, _redact_known(text, secret_values())))


def redact_bytes(data: bytes) -> bytes:
    """Raw bytes (a captured stream) redacted as :func:`redact` redacts text; ``data`` itself when clean.

    Bytes that are not UTF-8 pass through unchanged (decoded with ``surrogateescape``).
    """
    secrets = tuple(secret_values())
    if _screened(data, secrets):  # (the common case: a frame of a long answer)
        return data
    return _redact_bytes(data, secrets)


def _redact_bytes(data: bytes, secrets: tuple[str, ...]) -> bytes:
    text = data.decode("utf-8", errors="surrogateescape")
    escaped = _escaped(secrets)
    clean = redact(_redact_known(text, escaped) if escaped else text)
    return data if clean == text else clean.encode("utf-8", errors="surrogateescape")


def redact_parts(parts: list[bytes]) -> list[bytes]:
    """Each of ``parts`` (the frames of a captured stream) as :func:`redact_bytes` gives it, the same
    object when clean. The parts are searched together, in one pass over their bytes per trigger
    (:func:`_triggers`: what a part must hold for :func:`redact_bytes` to change it), and only the
    parts a trigger is found in are redacted one by one: a stream of tens of thousands of frames costs
    a few searches, not a redaction per frame."""
    secrets = tuple(secret_values())
    triggers = _triggers(secrets)
    if triggers is None:
        return [_redact_bytes(part, secrets) for part in parts]
    ends: list[int] = []
    total = 0
    for part in parts:
        total += len(part)
        ends.append(total)
    low = b"".join(parts).lower()  # (ASCII letters only, as a key in any case is matched: lengths kept)
    marked: set[int] = set()
    for trigger in triggers:
        at = low.find(trigger)
        while at >= 0:  # each part the trigger overlaps
            first = bisect.bisect_right(ends, at)
            last = bisect.bisect_left(ends, at + len(trigger), lo=first)
            marked.update(range(first, min(last, len(parts) - 1) + 1))
            at = low.find(trigger, at + 1)
    return [_redact_bytes(part, secrets) if i in marked else part for i, part in enumerate(parts)]


#: the characters other than ASCII letters that Python's case-insensitive matching of text takes for
#: one (dotted and dotless i, long s, Kelvin sign): bytes holding one may hold a key shape or a
#: credential's name that :func:`redact` matches in any case
_FOLDED_LETTERS = ("\u0130", "\u0131", "\u017f", "\u212a")
#: what bytes hold where :func:`redact` finds a key shape (``sk-``, ``AIza``, ``xai-``, ``Bearer``),
#: a URL's user info (``://``) or a credential in a URL's query (every name it takes ends so), lower case
_SHAPE_TRIGGERS = (b"sk-", b"aiza", b"xai-", b"bearer", b"://", b"key=", b"token=", b"secret=", b"password=",
                   b"auth=", b"sig=", b"signature=", *(c.encode("utf-8") for c in _FOLDED_LETTERS))


@functools.lru_cache(maxsize=16)
def _escaped(secrets: tuple[str, ...]) -> list[str]:
    """A capture is JSON: a key with a quote, a backslash or non-ASCII is also written escaped there."""
    forms = {form for secret in secrets
             for form in (json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1])
             if form != secret and len(form) >= MIN_PREFIX}
    return sorted(forms, key=len, reverse=True)


@functools.lru_cache(maxsize=16)
def _triggers(secrets: tuple[str, ...]) -> tuple[bytes, ...] | None:
    """What bytes, their ASCII letters in lower case, must hold for :func:`redact_bytes` to change
    them: the head of a configured key or of its JSON-escaped form, or a :data:`_SHAPE_TRIGGERS`.
    ``None`` when a key cannot be written as UTF-8 (then every part is redacted)."""
    try:
        heads = {k[:MIN_PREFIX].encode("utf-8", "surrogateescape").lower() for k in (*secrets, *_escaped(secrets))}
    except UnicodeEncodeError:
        return None
    return tuple(sorted(heads | set(_SHAPE_TRIGGERS)))


def _screened(data: bytes, secrets: tuple[str, ...]) -> bool:
    """Whether ``data`` holds none of :func:`_triggers` (nothing :func:`redact_bytes` would change)."""
    triggers = _triggers(secrets)
    if triggers is None:
        return False
    low = data.lower()
    return not any(trigger in low for trigger in triggers)


def redact_data(value: Any, secrets: list[str] | None = None) -> Any:
    """A JSON-like value (messages, a history) with configured keys redacted in every string in it.

    Strings in dicts and lists, at any depth, go through :func:`redact_secrets`; dict keys, bytes
    and numbers are kept. Returns ``value`` itself when nothing in it changed (and at once when no
    key is configured), else a copy of the parts that changed.
    """
    secrets = secret_values() if secrets is None else secrets
    if not secrets:
        return value
    return _walk(value, secrets)


def redact_value(value: Any) -> Any:
    """A JSON-like value shown (settings, aliases, endpoints; a tool's name, a finish reason) with
    every string in it through :func:`redact` (configured keys, key shapes, URL passwords); a
    value of another type as it is."""
    return _redacted(value)


def _walk(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return _redact_known(value, secrets)
    if isinstance(value, dict):
        out = {k: _walk(v, secrets) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, list):
        items = [_walk(v, secrets) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


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
