"""``traces.show``: the whole conversation of one trace, drawn with the project's turn view.

Finds the trace (a trace id under a root, a trace file, a sidecar of a trace whose every turn
failed, or a row of :func:`~mmsp_notebook.traces.load_turns`), reads it and its timing sidecar
through the trace store, keeps the sidecar's latest run (as the loaders do) and hands them to
:func:`mmsp_notebook.views.conversation.build_conversation`. The result is a :class:`Conversation`:
static sanitized HTML in Jupyter (a saved notebook shows it), text in a terminal.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any, cast

from .._errors import OptionError, OptionTypeError, TraceError, TraceNotFoundError
from ..core.chars import isolate, printable
from ..core.redact import redact
from ..core.store import SIDECAR_SUFFIX, cache_dir, completed, read_sidecar, read_trace, sidecar_path, tracer_path
from ..views.conversation import build_conversation, conversation_html, conversation_text, waterfall
from ._common import FROM_OTEL, check_unique
from ._io import latest_run
from .recorded import is_file as _is_file
from .recorded import shown_path

__all__ = ["show", "Conversation", "read_conversation", "locate", "row_key"]


class Conversation:
    """A recorded conversation as the turn view draws it.

    ``entries`` are the drawn messages in order (user, assistant, failed responses from the
    sidecar, completed ones the trace file does not hold, damaged messages named); ``turns`` the :class:`~mmsp_notebook.Turn` of each assistant
    message; ``selected`` the key of the entry asked for (a row's turn), marked in the HTML with its
    timing waterfall above the conversation. Jupyter shows the HTML, a terminal the text.
    """

    def __init__(self, view: dict[str, Any], path: Path | None, sidecar: Path | None, selected: str | None = None,
                 selected_index: int | None = None) -> None:
        self.view = view
        self.trace_id: str = view["trace_id"]
        self.path = path
        self.sidecar = sidecar
        self.selected = selected
        self.selected_index = selected_index

    @property
    def entries(self) -> list[dict[str, Any]]:
        return cast("list[dict[str, Any]]", self.view["entries"])

    @property
    def turns(self) -> list[Any]:
        """The :class:`~mmsp_notebook.Turn` of each assistant message, in order."""
        return [self.view["turns"][e["key"]][0] for e in self.entries if e["kind"] == "assistant"]

    def turn_of(self, key: str) -> Any:
        """The :class:`~mmsp_notebook.Turn` drawn for entry ``key`` (None for a failed or damaged one)."""
        return self.view["turns"].get(key, (None,))[0]

    def key_of_turn(self, turn: int) -> tuple[str | None, int | None]:
        """The entry holding assistant message ``turn`` (0-based among the trace's assistant messages,
        as ``load_turns`` counts; negative from the end) and that message's history index."""
        found = [(e["key"], i, t) for e in self.entries if e["kind"] in ("assistant", "damaged")
                 for i, t in zip(e.get("indices") or [], e.get("turns") or [])]
        try:
            key, index, _ = found[turn]
        except IndexError:
            return None, None
        return key, index

    def waterfall(self, key: str | None = None) -> dict[str, Any] | None:
        """The timing waterfall of entry ``key`` (default: the selected one, its message's bars
        marked); None without a sidecar record."""
        if key is None:
            key, index = self.selected, self.selected_index
        else:
            index = None
        return waterfall(self.view, key, index) if key else None

    def select(self, key: str | None, index: int | None = None) -> Conversation:
        """The same conversation with another entry selected (``index``: its message in the history)."""
        return Conversation(self.view, self.path, self.sidecar, key, index)

    @property
    def html(self) -> str:
        return conversation_html(self.view, self.selected, wf=self.waterfall() if self.selected else None)

    @property
    def text(self) -> str:
        return conversation_text(self.view)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": self.html}

    def __repr__(self) -> str:
        n = sum(1 for e in self.entries if e["kind"] == "assistant")
        failed = sum(1 for e in self.entries if e["kind"] == "failed")
        beyond = sum(1 for e in self.entries if e["kind"] == "sidecar")
        more = (f", {failed} failed" if failed else "") + (f", {beyond} only in the sidecar" if beyond else "")
        return printable(f"<Conversation {isolate(redact(self.trace_id))}: {len(self.entries)} entries, {n} answers{more}>")


# ---------------------------------------------------------------------------------------------- finding
def _field(row: Any, *keys: str) -> Any:
    for key in keys:
        try:
            value = row.get(key)
        except Exception:  # a mapping may refuse a key
            continue
        try:
            if value is None or value != value:
                continue
        except (TypeError, ValueError):  # pd.NA refuses bool()
            continue
        return value
    return None


def _is_row(value: Any) -> bool:
    return isinstance(value, Mapping) or (hasattr(value, "get") and hasattr(value, "keys")
                                          and not isinstance(value, (str, bytes, PurePath)))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def locate(trace_id: str, roots: Sequence[str | Path]) -> tuple[Path | None, Path | None]:
    """(trace file, sidecar) of ``trace_id`` under the root that has either (None when missing).
    A trace id is a path under a root: one that climbs out of it (``..``) or is absolute names no file.

    Raises:
        TraceError: two roots hold different conversations under this trace id (a frame does not
            say which root a row came from: opening the first could show the wrong one)."""
    parts = Path(trace_id).parts
    if not trace_id or Path(trace_id).is_absolute() or ".." in parts:
        return None, None
    found: tuple[Path | None, Path | None] = (None, None)
    where: Path | None = None
    for root in roots:
        base = Path(root)
        candidates = [shown_path(p) for p in (tracer_path(trace_id, base), base / f"{trace_id}.json") if p is not None]
        path = next((p for p in candidates if _is_file(p)), None)
        side = shown_path(sidecar_path(trace_id, base))
        sidecar = side if _is_file(side) else None
        if path is None and sidecar is None:
            continue
        if where is None:
            found, where = (path, sidecar), base
        elif not _same_files(found, (path, sidecar)):
            first = found[0] or found[1]
            raise TraceError(redact(
                f"trace id {trace_id} names a trace under two roots, {where} and {base}: a frame does not "
                f"say which one its row came from; give root= the one directory it was loaded from"),
                path=str(first), reason="trace id found under several roots")
    return found


def _same_files(a: tuple[Path | None, Path | None], b: tuple[Path | None, Path | None]) -> bool:
    """Whether two (trace file, sidecar) pairs are the same files (a root given twice, or by
    another path)."""
    for x, y in zip(a, b):
        if (x is None) != (y is None):
            return False
        if x is not None and y is not None:
            try:
                if not os.path.samefile(x, y):
                    return False
            except OSError:
                return False
    return True


def _own_sidecar(path: Path, config: Mapping[str, Any]) -> Path | None:
    """The sidecar next to a trace file: named like it, else after the trace id its config records
    (``v1.5.timing.jsonl`` beside ``v1.json``)."""
    named = path.with_name(path.name.removesuffix(".json") + SIDECAR_SUFFIX)
    if _is_file(named):
        return named
    tid = config.get("trace_id")
    if isinstance(tid, str) and tid:
        other = path.parent / f"{Path(tid).name}{SIDECAR_SUFFIX}"
        if _is_file(other) and tracer_path(Path(tid).name, path.parent) == path:
            return other
    return None


def read_conversation(trace_id: str | None, path: Path | None, sidecar: Path | None) -> dict[str, Any]:
    """The conversation view of a trace file and its sidecar (either may be None, not both).

    Raises:
        TraceError: the trace file is unreadable, not JSON or not an mmsp trace (named, with why).
    """
    history: list[Any] = []
    config: dict[str, Any] = {}
    notes: list[str] = []
    if path is not None:
        data = read_trace(path)
        history, config = data["history"], data["config"]
        if sidecar is None:
            sidecar = _own_sidecar(path, config)
    if trace_id is None:
        tid = config.get("trace_id")
        trace_id = tid if isinstance(tid, str) and tid else (path or sidecar or Path("trace")).name.removesuffix(
            ".json").removesuffix(SIDECAR_SUFFIX)
    records: list[dict[str, Any]] = []
    if sidecar is not None:
        raw = read_sidecar(sidecar)
        if raw.damaged:
            notes.append(f"timing sidecar {sidecar}: {raw.damaged} damaged lines skipped")
        records = latest_run(cast("list[dict[str, Any]]", list(raw)))
    if path is None:
        done = sum(1 for r in records if completed(r))
        notes.append(f"no trace file: its timing sidecar times {done} completed response{'s' if done != 1 else ''}, "
                     "whose content only the trace file holds (removed, or not copied with the sidecar)" if done else
                     "no trace file: every response of this conversation failed, only its timing sidecar exists")
        if records and not config.get("model") and isinstance(records[-1].get("model"), str):
            config = {"model": records[-1]["model"]}
    elif sidecar is None:
        notes.append("no timing sidecar: mmsp's Tracer records no timing and no failed response")
    source = " · ".join(str(p) for p in (path, sidecar) if p is not None)
    return build_conversation(history, config, records, trace_id=trace_id, source=source, notes=notes)


def row_key(view: Mapping[str, Any], row: Any) -> tuple[str | None, int | None]:
    """The entry a row of ``load_turns`` stands for and its message's history index: the turn that
    holds its assistant message, or the response of its turn known only from the sidecar with its
    message index (a completed one beyond the trace file has one, a failed one none) that started
    closest to it (the start time only tells apart responses of the same turn and message index)."""
    mi = _field(row, "message_index")
    if mi is not None and str(_field(row, "source")) != "sidecar":  # (a sidecar-only row's message is not in the file)
        try:
            index = int(mi)
        except (TypeError, ValueError, OverflowError):
            index = -1
        for e in view["entries"]:
            if index in (e.get("indices") or ()):
                return e["key"], index
    turn = _field(row, "turn")
    failed = [e for e in view["entries"] if e["kind"] in ("failed", "sidecar") and turn is not None
              and int(turn) in (e.get("turns") or ())]
    if not failed:
        return None, None
    try:
        own = None if mi is None else int(mi)
    except (TypeError, ValueError, OverflowError):
        own = None
    failed = [e for e in failed if e.get("message_index") == own] or failed
    started = _field(row, "started")
    ms = None
    if started is not None:
        try:
            ms = started.value / 1e6 if hasattr(started, "value") else float(started)
        except (TypeError, ValueError):
            ms = None
    if ms is None:
        return cast(str, failed[0]["key"]), None
    return cast(str, min(failed, key=lambda e: abs((e.get("started") or math.inf) - ms))["key"]), None


def show(trace: Any, *, turn: int | None = None, root: str | Path | Sequence[str | Path] | None = None) -> Conversation:
    """The whole conversation of a trace, drawn with the project's turn view.

    Args:
        trace: A trace id (under ``root``, default ``MMSP_CACHE_DIR``; found where mmsp's Tracer
            writes it, so ``runs/v1.5`` in ``runs/v1.json``), a trace ``.json`` file, a
            ``.timing.jsonl`` sidecar (a conversation whose every response failed has only that),
            or a row of :func:`~mmsp_notebook.traces.load_turns` (a Series or a dict, ``otel=True``
            names too), whose turn is then selected.
        turn: For a trace id or a file, the assistant turn to select (0-based; -1 the last).
        root: The directory trace ids are relative to (or several, tried in order).

    Returns:
        A :class:`Conversation`: user messages, every assistant message as a turn (thinking, text,
        tool calls with their parsed arguments and results, images, audio, embeddings; a footer
        with usage, finish reason and, from the timing sidecar, TTFT, total, tokens/s and per-item
        durations), failed, cut-off and cancelled responses known only from the sidecar in place.
        Jupyter shows its static HTML, a terminal its text.

    Raises:
        TraceNotFoundError: No trace file and no sidecar (a ``FileNotFoundError`` too).
        TraceError: The trace file is damaged (unreadable, not JSON, not an mmsp trace): the error
            names it and says what is wrong. A damaged message or sidecar line is named in place.
        OptionTypeError: ``trace`` of another type (a whole DataFrame included), or a ``turn`` that is
            no integer.
        OptionError: a ``turn`` the conversation does not have (the error gives its range).
    """
    roots = [cache_dir()] if root is None else [Path(root)] if isinstance(root, (str, PurePath)) else [Path(r) for r in root]
    roots = [r.expanduser() for r in roots]  # (~ is the home directory, as for the loaders)
    if turn is not None and (not isinstance(turn, numbers.Integral) or isinstance(turn, bool)):
        raise OptionTypeError(f"turn takes the index of an assistant turn (0-based, -1 the last), not "
                              f"{type(turn).__name__} {turn!r}")
    if hasattr(trace, "columns") and hasattr(trace, "iloc"):
        raise OptionTypeError("a whole DataFrame was given: pass one of its rows (turns.iloc[n]), or explore it "
                              "with traces.explore(turns)")
    row = None
    if _is_row(trace):
        row = {FROM_OTEL.get(k, k): v for k, v in dict(trace).items()}
        tid = _field(row, "trace_id")
        if tid is None:
            raise OptionError("the row has no trace id (a 'trace_id' or 'gen_ai.conversation.id' field): pass a row "
                              "of traces.load_turns")
        trace_id: str | None = str(tid)
        check_unique(str(tid), getattr(trace, "attrs", None) or {})
        path, sidecar = locate(str(tid), roots)
        if path is None and sidecar is None:
            hint = "" if root is not None else " (MMSP_CACHE_DIR): give root= the directory the row was loaded from"
            raise TraceNotFoundError(redact(f"no trace file or sidecar for {tid} under {', '.join(map(str, roots))}{hint}"),
                                     path=str(roots[0] / f"{tid}.json"), reason="no trace file")
    elif isinstance(trace, (str, PurePath)) and not isinstance(trace, bytes):
        given = Path(trace).expanduser()
        if _is_file(given) and str(given).endswith(SIDECAR_SUFFIX):
            twin = Path(str(given)[: -len(SIDECAR_SUFFIX)] + ".json")
            path, sidecar, trace_id = (twin if _is_file(twin) else None), given, None
        elif _is_file(given):
            path, sidecar, trace_id = given, None, None
        elif _is_dir(given):
            raise TraceError(f"{given}: a directory, not a trace (explore a directory with traces.explore)",
                             path=str(given), reason="a directory, not a file")
        else:
            trace_id = str(trace).removesuffix(".json")
            path, sidecar = locate(trace_id, roots)
            if path is None and sidecar is None:
                tried = tracer_path(trace_id, roots[0]) or roots[0] / trace_id
                raise TraceNotFoundError(f"no trace file {tried} (and no sidecar)", path=str(tried),
                                         reason="no trace file")
    else:
        raise OptionTypeError(f"trace must be a trace id, a path or a row of traces.load_turns, not "
                              f"{type(trace).__name__}")
    view = read_conversation(trace_id, path, sidecar)
    conversation = Conversation(view, path, sidecar)
    if row is not None:
        conversation.selected, conversation.selected_index = row_key(view, row)
    elif turn is not None:
        conversation.selected, conversation.selected_index = conversation.key_of_turn(int(turn))
        if conversation.selected is None:
            n = len([i for e in conversation.entries if e["kind"] in ("assistant", "damaged") for i in e.get("turns") or []])
            raise OptionError(f"turn={turn}: {redact(conversation.trace_id)} has {n} assistant turn{'s' if n != 1 else ''}"
                              + (f" (give 0 to {n - 1}, or -1 for the last)" if n else ""))
    return conversation
