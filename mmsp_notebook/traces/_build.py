"""What the three builders of :mod:`mmsp_notebook.traces` share: content item types, a trace's
config fields, its sidecar records split by turn, and the ``since`` / ``until`` / ``models`` filter.

The builders themselves are in ``_turns.py`` (turns frame), ``_items.py`` (items frame) and
``_events.py`` (events frame): each makes one pass over the parsed traces into plain Python
containers and one DataFrame at the end (see ``_columns.py``).
"""

from __future__ import annotations

from typing import Any

from ..core.fields import INT_HI, INT_LO, as_int, attempt_order
from ..core.redact import redact
from ._columns import as_num, as_str

# Content item types as mmsp writes them, and the names used before mmsp 0.5 (still found in
# older trace files; the Tracer's own viewer accepts both).
TEXT = frozenset({"text.done", "text"})
THINKING = frozenset({"thinking.done", "thinking"})
TOOL_CALL = frozenset({"tool_call.done", "tool_call"})
INLINE = frozenset({"inline_data.done", "inline_data"})
TOOL_RESULT = frozenset({"tool_result.done", "tool_result"})


# --------------------------------------------------------------------------- per-file context


def config_fields(config: dict[str, Any]) -> tuple[Any, ...]:
    """(model, temperature, max_tokens, thinking_level, n_tools, tool_names) of a trace's config."""
    tools = config.get("tools")
    if isinstance(tools, list):
        names = tuple(
            t.get("name") if isinstance(t, dict) and isinstance(t.get("name"), str) else str(t) for t in tools
        )
        n_tools: int | None = len(names)
    else:
        names, n_tools = None, None
    level = config.get("thinking_level")
    return (
        as_str(config.get("model")),
        as_num(config.get("temperature")),
        as_int(config.get("max_tokens")),
        str(level) if level is not None and level != "" else None,
        n_tools,
        names,
    )


def split_sidecar(records: list[dict[str, Any]]) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """Sidecar records of one trace: ``({turn: record}, [records of turns that recorded nothing])``.

    A record is a turn's when it completed (:func:`~mmsp_notebook.core.store.completed`: status
    ``"complete"`` and an integer ``message_index``, ``3.0`` being 3: one that is no integer, such
    as ``"x"`` or ``2.5``, is as if absent), else an attempt that recorded nothing, as ``show``
    draws it. A turn recorded twice keeps the last record (the file is append-only). Records
    without an integer ``turn`` are ignored. The attempts are in
    :func:`~mmsp_notebook.core.fields.attempt_order` (turn, then start time), as ``show`` has them.
    """
    done: dict[int, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    lo, hi = INT_LO, INT_HI
    for r in records:
        t = r.get("turn")
        if t.__class__ is not int or not lo < t < hi:  # as_int(), its usual case inlined
            t = as_int(t)
            if t is None:
                continue
        mi = r.get("message_index")  # not completed(r), inlined: an int is the usual case
        if (mi.__class__ is int and lo < mi < hi or as_int(mi) is not None) and r.get("status") == "complete":
            done[t] = r
        else:
            failed.append(r)
    if len(failed) > 1:
        failed.sort(key=attempt_order)
    return done, failed


def other_message(rec: dict[str, Any], index: int) -> bool:
    """Whether a completed sidecar record times another message than the one at history index
    ``index``: its ``message_index`` is an integer (:func:`~mmsp_notebook.core.fields.as_int`, so
    ``3.0`` is 3) that differs (a record of an earlier version of the conversation, edited since).
    Such a record is not joined to the turn, whose row then has no timing, as ``traces.show`` draws
    it; a record without an integer ``message_index`` (none, or ``"x"``, ``2.5``, ``true``: as if
    absent) names no other message (such a record did not complete: it times no message at all)."""
    mi = rec.get("message_index")
    if mi.__class__ is not int or not INT_LO < mi < INT_HI:  # as_int(), its usual case inlined
        mi = as_int(mi)
    return mi is not None and mi != index


def own_records(done: dict[int, dict[str, Any]], history: list[Any]) -> dict[int, dict[str, Any]]:
    """``done`` (:func:`split_sidecar`'s, changed in place and returned) without the records of
    another message than their turn's assistant message in ``history`` (:func:`other_message`)."""
    turn = 0
    for index, msg in enumerate(history):
        if msg.__class__ is dict and msg.get("role") == "assistant":
            rec = done.get(turn)
            if rec is not None and other_message(rec, index):
                del done[turn]
            turn += 1
    return done


def error_fields(rec: dict[str, Any]) -> tuple[str | None, str | None]:
    """A sidecar record's error type and message; a key or URL password in either (a record not
    written by this package's redacting writer) is redacted, as the views of them are."""
    err = rec.get("error")
    if isinstance(err, dict):
        t, m = err.get("type"), err.get("message")
        return (redact(str(t)) if t is not None else None), (redact(str(m)) if m is not None else None)
    if err is None:
        return None, None
    return None, redact(str(err))


# --------------------------------------------------------------------------- filters


class Window:
    """The ``since`` / ``until`` / ``models`` filter the three builders share: keep a row when
    ``since <= started < until`` (a row without a start time is dropped when a bound is given) and
    its model is one of ``models``."""

    def __init__(self, since_ms: float | None, until_ms: float | None, models: frozenset[str] | None) -> None:
        self.since_ms, self.until_ms, self.models = since_ms, until_ms, models
        self.filtered = since_ms is not None or until_ms is not None or models is not None

    def _keep(self, started: float | None, model: str | None) -> bool:
        if self.since_ms is not None and (started is None or started < self.since_ms):
            return False
        if self.until_ms is not None and (started is None or started >= self.until_ms):
            return False
        return self.models is None or model in self.models
