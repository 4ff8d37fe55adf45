"""What the turns frame needs of each message of a trace, from parsed dicts or straight from the
file's bytes.

``load_turns`` needs, of every message, its role and ``created_at``, of an assistant message
its finish reason, its usage buckets and counts of its content items (items, text, thinking, tool
calls, images, audio, characters of text and of thinking), and, when it made tool calls, of the
user message that answers them the number of results that report an error (:func:`~mmsp_notebook.core.store.tool_error`). :func:`summarize` computes them from a
parsed history (dicts, as :func:`mmsp_notebook.core.store.read_trace` returns it);
:func:`decode_trace` computes the same from a file's bytes with msgspec, decoding only those
fields: other fields (tool arguments, signatures, base64 payloads, data URLs) are skipped
unparsed, and of the content items of user messages (prompts, tool results, images) only the
type and the first bytes of a tool result's text are looked at. Skipping is what makes a load
cheaper than parsing the file; the base64 text of long image data URLs (``image_url`` values) is
not even scanned: it is cut out of the bytes before decoding, when a data URL starts within the
first 16 KB of the file (see :func:`_without_payloads`). Text and thinking are decoded (their
length in characters is a column), which is as costly as the standard parse: counting code points
from the raw bytes instead (UTF-8 validation, continuation bytes, escapes) was measured no faster
with what Python and NumPy offer.

A file msgspec cannot take as a trace (not JSON, NaN, a BOM, a lone surrogate, bytes that are not
UTF-8 where a field is decoded, a history that is not a list of objects, a usage that is not an
object or a usage bucket that is not an int64 >= 0 or null, a finish reason that is not a string or
null, a config's model or thinking level that is not a string, temperature that is not a number
or max_tokens that is not an int64, a role other than mmsp's ``user`` and ``assistant``...) makes :func:`decode_trace` return
None, and the loader falls back to the standard read policy and :func:`summarize`, which coerces
such values. The two give the same values for every file
(``tests/test_traces_fuzz.py`` compares them on every fuzzed file). Without msgspec installed the
standard path is taken for every file.

The summary of a trace is one tuple per assistant message: ``(index in the history, created_at
of the message just before when it is a user's (else None), created_at, finish_reason, cached,
prompt, thoughts, response, n_items, n_text, n_thinking, n_tool_calls, n_images, n_audio,
text_chars, thinking_chars, n_tool_errors)``: usage buckets are int64 counts (>= 0) or ``INT_NA``, ``finish_reason`` a
string or None, times as stored.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import numpy as np

from ..core.fields import INT_HI, INT_LO
from ..core.store import TRACEBACK_START, tool_error
from ._build import INLINE, TEXT, THINKING, TOOL_CALL, TOOL_RESULT
from ._columns import INT_NA, _encodable, count_or_na, utf8_safe

try:
    import msgspec
except ImportError:  # pragma: no cover - exercised only without msgspec
    msgspec = None  # type: ignore[assignment]

__all__ = ["FAST", "Summary", "Decoded", "summarize", "decode_trace"]

Summary = tuple[Any, ...]
#: where a summary holds the message's number of tool calls
N_TOOL_CALLS = 11

#: whether :func:`decode_trace` can decode (msgspec is installed)
FAST = msgspec is not None


def _bucket(usage: dict[str, Any], key: str) -> int:
    v = usage.get(key)
    if v.__class__ is not int or not 0 <= v < INT_HI:
        return count_or_na(v)
    return v


def _usage(usage: Any) -> tuple[int, int, int, int]:
    if usage.__class__ is not dict:
        return INT_NA, INT_NA, INT_NA, INT_NA
    return (_bucket(usage, "cached_tokens"), _bucket(usage, "prompt_tokens"), _bucket(usage, "thoughts_tokens"),
            _bucket(usage, "response_tokens"))


def _finish(finish: Any) -> str | None:
    if finish is not None and finish.__class__ is not str:
        finish = str(finish)
    return finish or None


def _counts(items: Any) -> tuple[int, int, int, int, int, int, int, int]:
    """Content counts of a parsed ``content_items`` value (anything but a list counts nothing)."""
    n_text = n_think = n_tool = n_img = n_aud = text_chars = think_chars = 0
    if items.__class__ is not list:
        return 0, 0, 0, 0, 0, 0, 0, 0
    for it in items:
        if it.__class__ is not dict:
            continue
        t = it.get("type")
        if t.__class__ is not str:  # a list or an object as a type: an unknown item
            continue
        if t in TEXT:
            n_text += 1
            s = it.get("text")
            if s.__class__ is str:
                text_chars += len(s)
        elif t in THINKING:
            n_think += 1
            s = it.get("thinking")
            if s.__class__ is str:
                think_chars += len(s)
        elif t in TOOL_CALL:
            n_tool += 1
        elif t in INLINE:
            mt = it.get("mime_type")
            if mt.__class__ is str:
                head = mt.lstrip()[:6].lower()  # a MIME type is case-insensitive: IMAGE/PNG is an image
                if head == "image/":
                    n_img += 1
                elif head == "audio/":
                    n_aud += 1
    return len(items), n_text, n_think, n_tool, n_img, n_aud, text_chars, think_chars


def _tool_errors(items: Any) -> int:
    """Tool results of a parsed ``content_items`` value that report an error."""
    if items.__class__ is not list:
        return 0
    return sum(1 for it in items if it.__class__ is dict and (t := it.get("type")).__class__ is str
               and t in TOOL_RESULT and tool_error(it.get("text")) is not None)


def summarize(history: list[dict[str, Any]]) -> list[Summary]:
    """The summary of every assistant message of a parsed history (see the module docstring)."""
    out: list[Summary] = []
    before = None  # created_at of the message just before, when it is a user's
    last = -2  # index of the last assistant message
    for i, msg in enumerate(history):
        role = msg.get("role")
        if role != "assistant":
            if role == "user":
                before = msg.get("created_at")
                if last == i - 1 and out[-1][N_TOOL_CALLS] and (n := _tool_errors(msg.get("content_items"))):
                    out[-1] = (*out[-1][:-1], n)  # the results answer the calls of the message before
            else:
                before = None
            continue
        out.append((i, before, msg.get("created_at"), _finish(msg.get("finish_reason")),
                    *_usage(msg.get("usage_metadata")), *_counts(msg.get("content_items")), 0))
        before = None
        last = i
    return out


class Decoded:
    """A trace decoded by :func:`decode_trace`: the fields the turns frame takes from its config
    (:func:`~mmsp_notebook.traces._build.config_fields`, tool names made UTF-8 safe), the config's
    ``trace_id`` and the summary of each message."""

    __slots__ = ("cfg", "trace_id", "messages")

    def __init__(self, cfg: tuple[Any, ...], trace_id: Any, messages: list[Summary]) -> None:
        self.cfg = cfg
        self.trace_id = trace_id
        self.messages = messages


def safe_names(names: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """Tool names with lone surrogates replaced by U+FFFD (Arrow stores UTF-8 only)."""
    if names and not _encodable(names):
        return tuple(utf8_safe(name) for name in names)
    return names


if msgspec is not None:

    # gc=False: decoded JSON cannot form a reference cycle, so these need no tracking by the GC
    class _Item(msgspec.Struct, gc=False):
        type: Any = None
        text: Any = None
        thinking: Any = None
        mime_type: Any = None

    #: an int64 the frame can hold as it is (other than INT_NA) or null; anything else (a float, a
    #: string, an integer beyond int64) fails the decoding: the plain way coerces it
    _Bucket = Annotated[int, msgspec.Meta(ge=INT_LO + 1, le=INT_HI - 1)] | None
    #: a usage bucket: a count (an int64 >= 0) or null; a negative one takes the plain way too (NA)
    _Count = Annotated[int, msgspec.Meta(ge=0, le=INT_HI - 1)] | None

    class _Usage(msgspec.Struct, gc=False):
        cached_tokens: _Count = None
        prompt_tokens: _Count = None
        thoughts_tokens: _Count = None
        response_tokens: _Count = None

    # messages as a union tagged by "role" (mmsp's roles): an assistant message's items are
    # decoded in the same pass, a user message's are skipped; another role takes the plain way
    class _Result(msgspec.Struct, gc=False):
        type: Any = None
        text: msgspec.Raw = msgspec.Raw()  # (its first bytes are looked at, the rest is never decoded)

    class _User(msgspec.Struct, tag="user", tag_field="role", gc=False):
        created_at: Any = None
        content_items: list[_Result] | None = None

    class _Assistant(msgspec.Struct, tag="assistant", tag_field="role", gc=False):
        created_at: Any = None
        finish_reason: str | None = None  # another kind of value takes the plain way (str() of it)
        usage_metadata: _Usage | None = None
        content_items: list[_Item] | None = None

    # the config's scalars as the frame takes them; another kind of value (a bool, a string
    # temperature, an integral float as max_tokens...) takes the plain way, which coerces it
    class _Config(msgspec.Struct, gc=False):
        model: str | None = None
        temperature: float | None = None  # (an integer is taken as a float, as as_num takes it)
        max_tokens: _Bucket = None
        thinking_level: str | None = None
        trace_id: Any = None
        tools: msgspec.Raw = msgspec.Raw()

    class _Trace(msgspec.Struct, gc=False):
        history: list[_User | _Assistant]
        config: _Config | None = None

    _ANY = msgspec.json.Decoder()
    #: tools (raw JSON) -> (n_tools, names) or None when only the plain parse can say: configs
    #: repeat their tools from file to file, and a tool's schema is the larger part of a config
    _TOOLS: dict[bytes, tuple[int | None, tuple[str, ...] | None] | None] = {}

    _TRACE = msgspec.json.Decoder(_Trace)
    _FAILED = (msgspec.DecodeError, ValueError, TypeError, RecursionError)

    #: an item type -> 1 text, 2 thinking, 3 tool call, 4 inline data (other types count only as items)
    _KIND = {**dict.fromkeys(TEXT, 1), **dict.fromkeys(THINKING, 2), **dict.fromkeys(TOOL_CALL, 3),
             **dict.fromkeys(INLINE, 4)}

    _OPENERS = frozenset(b"eET")  # "error:" in any case, "Traceback"
    #: bytes that, right after a tool result's opening quote, call for a closer look: the openers,
    #: a blank, an escape, a non-ASCII character (maybe a Unicode blank)
    _SUSPECT = bytes(int(c in _OPENERS or c in b" \\" or c >= 0x80) for c in range(256))
    #: a JSON string's opening quote and its blanks (spaces, escaped newlines and tabs, taken whole),
    #: when what follows may open an error report: an opener, a non-ASCII character (maybe a
    #: Unicode blank) or a ``\\u`` escape
    _LEAD = re.compile(rb'"(?: |\\[ntrf])*+(?=[eET\x80-\xff]|\\u)')

    def _raw_tool_error(raw: msgspec.Raw) -> bool:
        """Whether a tool result's raw JSON text reports an error (:func:`tool_error`), from its first
        bytes after its blanks (the whole string is decoded only when a ``\\u`` escape or a
        non-ASCII character comes first, or an escape where the words looked for may go on)."""
        lead = _LEAD.match(raw)
        if lead is None:  # not a string, or another character opens it
            return False
        head = memoryview(raw)[lead.end():lead.end() + 34].tobytes()
        c = head[0]
        if c >= 0x80 or c == 92:  # maybe a Unicode blank
            return tool_error(_ANY.decode(raw)) is not None
        k = head.find(b"\\")
        if k > 0 and (b"error:".startswith(head[:k].lower()) or _TRACEBACK.startswith(head[:k])):
            return tool_error(_ANY.decode(raw)) is not None  # the words maybe spelled with escapes
        return head[:6].lower() == b"error:" or head.startswith(_TRACEBACK)

    _TRACEBACK = TRACEBACK_START.encode()

    _U64, _I64 = 2**64 - 1, -(2**63)
    _UNKNOWN = object()

    def _as_orjson(v: Any) -> bool:
        """Whether a value's text (``str()``, for a column of strings) is what the plain parse gives:
        orjson reads an integer beyond 64 bits as a float, msgspec as an int. Walked without
        recursion (the value may be nested deeply)."""
        stack = [v]
        while stack:
            x = stack.pop()
            c = x.__class__
            if c is int:
                if not _I64 <= x <= _U64:
                    return False
            elif c is list:
                stack.extend(x)
            elif c is dict:
                stack.extend(x.values())
        return True

    def _tools(raw: Any) -> tuple[int | None, tuple[str, ...] | None] | None:
        """(n_tools, names) of a config's raw ``tools``, as config_fields gives them."""
        key = bytes(raw)
        got = _TOOLS.get(key, _UNKNOWN)
        if got is not _UNKNOWN:
            return got  # type: ignore[return-value]
        tools = _ANY.decode(key)
        if tools.__class__ is not list:
            got = None, None
        elif not all(t.get("name").__class__ is str or _as_orjson(t) if t.__class__ is dict else _as_orjson(t) for t in tools):
            got = None
        else:
            names = tuple(t.get("name") if isinstance(t, dict) and isinstance(t.get("name"), str) else str(t) for t in tools)
            got = len(names), safe_names(names)  # type: ignore[arg-type]  # str(t) or a str name
        if len(key) <= 1 << 16:  # at most 256 tool lists of 64 KB are kept
            if len(_TOOLS) >= 256:
                _TOOLS.clear()
            _TOOLS[key] = got
        return got

    def _cfg(c: _Config | None) -> tuple[Any, ...] | None:
        """config_fields() of the decoded config; None when only the plain parse can say."""
        if c is None:
            return None, None, None, None, None, None
        tools = _tools(c.tools) if c.tools else (None, None)
        if tools is None:
            return None
        # the struct's types are what as_str / as_num / as_int keep (a float decoded is finite)
        return c.model or None, c.temperature, c.max_tokens, c.thinking_level or None, *tools

    #: a data URL's base64 text is cut out of the bytes before decoding when it is at least this
    #: long, and when a data URL starts within the first _LOOK bytes of the file
    _CUT_MIN, _LOOK = 1024, 16384
    _BLANK = frozenset(b" \t\r\n")

    def _image_url_at(raw: bytes, i: int) -> bool:
        """Whether the ``;base64,`` at ``i`` is in the string value of an ``"image_url"`` key that
        starts ``"data:`` (a quote before it, a colon and the key before that, blanks between)."""
        q = raw.rfind(b'"', max(0, i - 128), i)
        if q < 1 or not raw.startswith(b'"data:', q) or raw.find(b"\\", q, i) >= 0:
            return False
        k = q - 1
        while k > 0 and raw[k] in _BLANK:
            k -= 1
        if raw[k] != 58:  # ":"
            return False
        k -= 1
        while k > 0 and raw[k] in _BLANK:
            k -= 1
        return k >= 10 and raw.startswith(b'"image_url"', k - 10)

    def _without_payloads(raw: bytes) -> bytes:
        """The bytes with the base64 text of long data URLs (the images of user messages) cut out,
        so that the decoder does not scan it: the frame uses nothing of an ``image_url``.

        Only a JSON string's content is cut, and only what a JSON string may hold as it is: the
        text from a data URL's ``;base64,`` to the next quote, with no backslash (so that quote
        closes the string) and no control character. In a valid file the ``;`` is inside a string
        (JSON has none elsewhere) and so is the cut; in a file that is not valid JSON the cut leaves
        it as invalid (the ``;`` stays), and the plain way says why. A file is searched (a
        ``memchr`` per ``;``) only when a data URL starts within its first ``_LOOK`` bytes.
        """
        find = raw.find
        i = find(b";", 0, _LOOK)
        misses = 0
        while i >= 0 and not (raw.startswith(b";base64,", i) and _image_url_at(raw, i)):
            misses += 1
            if misses > 4:
                return raw
            i = find(b";", i + 1, _LOOK)
        if i < 0:
            return raw
        parts: list[bytes] = []
        pos = 0
        while i >= 0:
            if raw.startswith(b";base64,", i) and _image_url_at(raw, i):
                start = i + 8
                end = find(b'"', start)
                if (end - start >= _CUT_MIN and find(b"\\", start, end) < 0
                        and np.frombuffer(raw, np.uint8, end - start, start).min() >= 0x20):
                    parts.append(raw[pos:start])
                    pos = end
                    i = find(b";", end)
                    continue
            i = find(b";", i + 1)
        if not parts:
            return raw
        parts.append(raw[pos:])
        return b"".join(parts)

    def decode_trace(raw: bytes) -> Decoded | None:
        """The config and message summaries of a trace file's bytes, or None when msgspec
        cannot take the file (the standard read policy then parses and checks it)."""
        try:
            trace = _TRACE.decode(_without_payloads(raw))
            out: list[Summary] = []
            append = out.append
            na = INT_NA
            u0: Any
            u1: Any
            u2: Any
            u3: Any
            items: list[_Item] | None
            user, kind_of = _User, _KIND.get
            results, suspect = TOOL_RESULT, _SUSPECT
            before = None
            last = -2  # index of the last assistant message
            for i, m in enumerate(trace.history):
                if m.__class__ is user:
                    before = m.created_at
                    if last == i - 1 and out[-1][N_TOOL_CALLS] and (answers := m.content_items):
                        # the results of the calls of the message before: most are ruled out by
                        # the byte after their opening quote (an unhashable type falls back)
                        n = 0
                        for r in answers:
                            if r.type in results and len(txt := r.text) > 1 and suspect[memoryview(txt)[1]]:
                                n += _raw_tool_error(txt)
                        if n:
                            out[-1] = (*out[-1][:-1], n)
                    continue
                u = m.usage_metadata  # type: ignore[union-attr]
                if u is None:
                    u0 = u1 = u2 = u3 = na
                else:  # each an int64 or None (the struct says so)
                    if (u0 := u.cached_tokens) is None:
                        u0 = na
                    if (u1 := u.prompt_tokens) is None:
                        u1 = na
                    if (u2 := u.thoughts_tokens) is None:
                        u2 = na
                    if (u3 := u.response_tokens) is None:
                        u3 = na
                items = m.content_items  # type: ignore[assignment]
                if items:  # _counts(), on the structs (an unhashable type falls back)
                    n_text = n_think = n_tool = n_img = n_aud = text_chars = think_chars = 0
                    for it in items:
                        k = kind_of(it.type)
                        if k is None:
                            continue
                        if k == 1:
                            n_text += 1
                            if (s := it.text).__class__ is str:
                                text_chars += len(s)
                        elif k == 2:
                            n_think += 1
                            if (s := it.thinking).__class__ is str:
                                think_chars += len(s)
                        elif k == 3:
                            n_tool += 1
                        elif (mt := it.mime_type).__class__ is str:
                            head = mt.lstrip()[:6].lower()
                            if head == "image/":
                                n_img += 1
                            elif head == "audio/":
                                n_aud += 1
                    append((i, before, m.created_at, m.finish_reason or None, u0, u1, u2, u3,  # type: ignore[union-attr]
                            len(items), n_text, n_think, n_tool, n_img, n_aud, text_chars, think_chars, 0))
                else:
                    append((i, before, m.created_at, m.finish_reason or None, u0, u1, u2, u3,  # type: ignore[union-attr]
                            0, 0, 0, 0, 0, 0, 0, 0, 0))
                before = None
                last = i
            cfg = _cfg(trace.config)
        except _FAILED:
            return None
        if cfg is None:
            return None
        return Decoded(cfg, trace.config.trace_id if trace.config is not None else None, out)

else:  # pragma: no cover

    def decode_trace(raw: bytes) -> Decoded | None:
        """Without msgspec every file takes the standard way."""
        return None
