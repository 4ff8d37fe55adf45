"""Compare models side by side: one prompt streamed to several models at once, in columns.

``%%mmsp -m a,b,c`` and :func:`compare` start one turn per model on the worker loop, all at once, and
follow them with the one pacer (one repaint of every column per tick, so the front end gets at most
25 updates a second in total). Each model runs in its own conversation — ``<name>~<model>`` — so a
comparison never touches the notebook's default chat, each model keeps its own history when the
comparison is continued (``--chat NAME``), and each turn is traced under its own trace id with its
timing sidecar (the sidecar records carry the comparison's name).

A model entry is a model id, an alias (``%mmsp alias``), or ``model@client-type``
(``gpt-x@openai-chat``). A failing model fails its column only; an interrupt cancels them all.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TextIO

from .._errors import LoopBlockedError, OptionError, TurnError
from ..core.chars import isolate, printable
from ..core.flags import check_flag
from ..core.redact import redact_value
from ..core.run import Watched
from ..core.turn import Turn
from ..engine.launch import check_chat_name, door_options, launch, refuse_unknown, user_message
from ..engine.session import Session, session
from .finish import check_door, finish_turn, shown_without_internals
from .frames import typed_frame

__all__ = ["Comparison", "compare", "parse_models"]

_names = itertools.count(1)


def parse_models(spec: str | Sequence[str]) -> list[tuple[str, str | None]]:
    """``"a,b@openai-chat"`` (or a list) as ``[(model, client_type or None), ...]``; at least two, no repeats."""
    names = spec.split(",") if isinstance(spec, str) else list(spec) if isinstance(spec, Iterable) else [spec]
    if not all(isinstance(e, str) for e in names):
        raise OptionError(f"compare: models are named by text (['a', 'b'] or 'a,b'), not {spec!r}")
    entries = [e.strip() for e in names]
    if any(not e for e in entries):
        raise OptionError("compare: an empty model in the list; write -m a,b,c")
    out = []
    for entry in entries:
        model, at, client_type = entry.partition("@")
        if at and not client_type:
            raise OptionError(f"compare: {entry!r}: name the client type after @ (e.g. gpt-x@openai-chat)")
        out.append((model.strip(), client_type.strip() or None))
    if len(out) < 2:
        raise OptionError("compare: give at least two models (-m a,b)")
    labels = [label(m, c) for m, c in out]
    if len(set(labels)) != len(labels):
        raise OptionError(f"compare: a model is named twice in {', '.join(labels)}")
    return out


def label(model: str, client_type: str | None) -> str:
    return f"{model}@{client_type}" if client_type else model


class _GroupRun(Watched):
    """Several turns in flight watched as one: the pacer's ``run`` for a comparison."""

    def __init__(self, comparison: Comparison, runs: list[Any]) -> None:
        super().__init__()
        self.turn = comparison
        self.runs = runs
        for run in runs:
            run.add_waker(self._waker(run))
            if run.changed.is_set():
                self.changed.set()

    def _waker(self, run: Any) -> Callable[[], None]:
        def wake() -> None:
            run.changed.clear()  # so the next change of this turn wakes the group again
            self.changed.clear()  # (notify wakes the group's own watchers on a clear-to-set)
            self.notify()
        return wake

    def abort(self, reason: str = "cancelled by the user") -> None:
        for run in self.runs:
            run.abort(reason)

    @property
    def idle_timeout(self) -> float | None:
        """The longest idle limit of the turns (``None``: one has no limit)."""
        limits = [run.idle_timeout for run in self.runs]
        return None if any(limit is None for limit in limits) else max(limits, default=None)


def _all_of(futures: list[concurrent.futures.Future[Turn]], result: Any) -> concurrent.futures.Future[Any]:
    """A future that resolves to ``result`` once every one of ``futures`` is done (whatever each gave)."""
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()
    left = [len(futures)]
    lock = threading.Lock()

    def one(_: Any) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last and not done.done():
            done.set_result(result)

    for future in futures:
        future.add_done_callback(one)
    return done


class Comparison:
    """One prompt answered by several models: ``turns`` (one :class:`Turn` per model, in the order
    given), ``labels``, and ``frame`` (a DataFrame to compare them). ``comparison["model"]`` or
    ``comparison[0]`` is one turn, ``"model" in comparison`` whether it holds that model; ``len()`` and
    iteration go over the turns."""

    def __init__(self, name: str, labels: list[str], turns: list[Turn]) -> None:
        self.name = name
        self.labels = labels
        self.turns = turns
        self.drawn_in_cell: int | None = None

    # the pacer reads a comparison as it reads a turn
    @property
    def lock(self) -> Any:
        return self.turns[0].lock

    @property
    def status(self) -> str:
        """``complete`` when every model completed, else the first other status."""
        statuses = [t.status for t in self.turns]
        if "streaming" in statuses:
            return "streaming"
        return next((s for s in statuses if s != "complete"), "complete")

    def mark_cancelled(self, reason: str = "cancelled") -> None:
        for turn in self.turns:
            if turn.status == "streaming":
                turn.mark_cancelled(reason)

    def __len__(self) -> int:
        return len(self.turns)

    def __iter__(self) -> Iterator[Turn]:
        return iter(self.turns)

    def __contains__(self, key: object) -> bool:
        """Whether the comparison holds that model, as ``comparison[label]`` reads it (or that turn)."""
        return key in self.labels if isinstance(key, str) else any(key is t for t in self.turns)

    def __getitem__(self, key: int | str) -> Turn:
        if isinstance(key, str):
            if key not in self.labels:  # (a KeyError naming the labels, as a dict's would be)
                raise KeyError(f"{key!r} is not one of this comparison's models: {', '.join(map(repr, self.labels))}")
            return self.turns[self.labels.index(key)]
        return self.turns[key]

    @property
    def frame(self) -> Any:
        """One row per model: status, finish, TTFT, latency, tokens/s, tokens per bucket, cost, text
        length, tool calls, error (pandas imported here only), typed as ``%mmsp usage`` is."""
        rows = []
        for name, turn in zip(self.labels, self.turns):
            usage = turn.usage or {}
            t = turn.timings
            rows.append({
                "model": name, "status": turn.status, "finish_reason": redact_value(turn.finish_reason),
                "ttft_s": t["ttft"], "total_s": t["total"], "tokens_per_s": t["tokens_per_second"],
                "cached_tokens": usage.get("cached_tokens"), "prompt_tokens": usage.get("prompt_tokens"),
                "thoughts_tokens": usage.get("thoughts_tokens"), "response_tokens": usage.get("response_tokens"),
                "cost": turn.cost, "text_chars": len(turn.text), "tool_calls": len(turn.tool_calls),
                "error": None if turn.error is None or turn.status == "complete" else
                f"{type(turn.error).__name__}: {turn.error_message}",
                "trace_id": turn.trace_id, "comparison": self.name,
            })
        return typed_frame(rows, ["model", "status", "finish_reason", "ttft_s", "total_s", "tokens_per_s", "cached_tokens",
                                  "prompt_tokens", "thoughts_tokens", "response_tokens", "cost", "text_chars",
                                  "tool_calls", "error", "trace_id", "comparison"])

    def summary(self) -> str:
        return printable(f"<Comparison {isolate(self.name)}: " + " · ".join(
            f"{isolate(name)} {turn.status}" for name, turn in zip(self.labels, self.turns)) + ">")

    def __repr__(self) -> str:
        return self.summary()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from ..views.columns import comparison_bundle

        return comparison_bundle(self)


def start(prompt: str | dict[str, Any], models: str | Sequence[str], *, chat: str | None = None,
          sess: Session | None = None, **options: Any) -> tuple[_GroupRun, concurrent.futures.Future[Any]]:
    """Start one turn per model; returns the group run (to watch or abort) and a future of the comparison."""
    sess = sess or session()
    entries = parse_models(models)
    if options.get("model") is not None:
        raise OptionError("compare: the models are the list (-m a,b), not one model= for all")
    refuse_unknown("compare", options, door_options("chat", "stream", "display", "strict", "keep", without=("model",)))
    if isinstance(options.get("trace"), str):  # every model's turn would overwrite one trace file
        raise OptionError("compare: trace=ID is for one model; a comparison traces each model under its own "
                          "trace id (name the comparison with chat=NAME; trace=False traces none)")
    every_type = options.pop("client_type", None)  # the client type of each model named without @
    if chat is not None:
        check_chat_name(chat)
    name = chat or f"compare-{next(_names)}"
    message = prompt if isinstance(prompt, dict) else user_message(prompt, options.pop("images", ()))
    labels = [label(m, c) for m, c in entries]
    runs, futures = [], []
    try:
        for (model, client_type), tag in zip(entries, labels):
            run, future = launch(message, model=model, client_type=client_type or every_type, chat=f"{name}~{tag}",
                                 sess=sess, comparison=name, **options)
            runs.append(run)
            futures.append(future)
    except Exception:
        for run in runs:  # a refused option of a later model: nothing of the comparison keeps running
            run.abort("compare: refused before it began")
        raise
    comparison = Comparison(name, labels, [run.turn for run in runs])
    return _GroupRun(comparison, runs), _all_of(futures, comparison)


def compare(prompt: str | dict[str, Any], models: str | Sequence[str], *, chat: str | None = None,
            stream: TextIO | None = None, display: bool = True, strict: bool | None = None,
            keep: Callable[[Comparison], Any] | None = None, **options: Any) -> Comparison:
    """Stream ``prompt`` to every model of ``models`` at once and show the answers in columns.

    Args:
        prompt: The prompt (sent as written).
        models: ``"a,b,c"`` or a list; each a model id, an alias, or ``model@client-type``.
        chat: Continue the comparison of that name (each model keeps its own history); a new
            comparison otherwise.
        stream: Where text goes outside Jupyter (stdout by default).
        display: Show the comparison live (``False``: just wait for it).
        strict: Raise :class:`~mmsp_notebook.TurnError` unless every model completed (default: the
            kernel's setting).
        keep: Called with the comparison before strict mode may raise (``-o VAR``).
        **options: Options of ``%%mmsp`` for every model (``system``, ``thinking``, ``max_tokens``,
            ``temperature``, ``tools``, ``max_steps``, ``timeout``, ``trace``, ``new``...);
            ``client_type`` is that of every model named without ``@``.

    Returns:
        The :class:`Comparison` (``.turns``, ``.frame``), also when models failed.

    An interrupt (■, Ctrl-C) cancels every model; the comparison is drawn, recorded and kept
    (``keep``), then the interrupt goes on up (a :class:`KeyboardInterrupt`, the comparison as ``.turn``).
    """
    # before any request (compare(stream="out.txt") failed in the view once every model was asked)
    check_door("compare", stream, strict=strict)
    check_flag("display", display)
    group, future = start(prompt, models, chat=chat, **options)
    comparison: Comparison = group.turn
    if display:
        from .finish import present_group

        present_group(group, future, stream=stream)
    else:
        try:
            future.result()
        except KeyboardInterrupt:
            group.interrupted = True
            group.abort("interrupted")
            try:
                future.result(timeout=5)
            except concurrent.futures.TimeoutError:  # the worker loop is blocked: the turns end here
                from ..engine.worker import stalled

                stall = stalled()
                for run, turn in zip(group.runs, comparison.turns):
                    if run.finished.is_set():
                        continue
                    if stall is not None:
                        turn.end_blocked(LoopBlockedError(stall, interrupted=True), cancelled=True)
                    else:
                        turn.mark_cancelled("interrupted")
    for turn in comparison.turns:
        finish_turn(turn, False)
    if keep is not None:
        keep(comparison)
    if group.interrupted:  # drawn and recorded: the interrupt goes on up (before strict mode, as for one turn)
        from .finish import Interrupted

        raise Interrupted(comparison)
    if (session().settings.strict if strict is None else strict) and comparison.status != "complete":
        failed = [n for n, t in zip(comparison.labels, comparison.turns) if t.status != "complete"]
        raise shown_without_internals(TurnError(f"comparison {comparison.status}: {', '.join(failed)} did not complete",
                                                comparison))
    return comparison
