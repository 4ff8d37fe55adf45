"""``ask`` and ``aask``: a turn from Python, shown where it runs or awaited."""

from __future__ import annotations

from typing import Any, TextIO

from ..core.turn import Turn
from ..engine.launch import door_options, launch, refuse_unknown
from ..engine.worker import stalled
from ..views.live import await_turn
from .finish import check_door, finish_turn, present

__all__ = ["ask", "aask"]


def ask(prompt: str, *, stream: TextIO | None = None, strict: bool | None = None, events: bool | None = None,
        **options: Any) -> Turn:
    """Run one turn and show it as it streams: live in Jupyter, as text in a terminal or script.

    Options are those of ``%%mmsp`` (``model``, ``client_type``, ``base_url``, ``api_key_env``,
    ``system``, ``thinking``, ``max_tokens``, ``temperature``, ``tools``, ``max_steps``, ``chat``,
    ``new``, ``trace``, ``images``, ``wire``). Returns the :class:`Turn`, also when it failed.
    ``wire=True`` also shows the raw SSE frames next to the UniEvents they became (``turn.wire``).
    ``strict`` and ``events`` default to the kernel's settings (``%mmsp config``).
    An interrupt (■, Ctrl-C) cancels the turn, drawn with what arrived, then goes on up as a
    :class:`KeyboardInterrupt` (so a loop of ``ask`` stops); its ``.turn`` is the cancelled turn.
    """
    refuse_unknown("ask", options, door_options("stream", "strict", "events"))
    check_door("ask", stream, strict=strict, events=events)
    run, future = launch(prompt, **options)
    return present(run, future, stream=stream, events=events, strict=strict, wire=bool(options.get("wire")))


async def aask(prompt: str, *, strict: bool | None = None, **options: Any) -> Turn:
    """Run one turn from async code (it runs on the worker loop); cancelling the await aborts it.

    As for ``ask``: while an ``async def`` tool blocks the worker loop, the turn ends once the block
    has lasted its ``timeout`` (at once when the await is cancelled), with a
    :class:`~mmsp_notebook.LoopBlockedError` that names the tool; what arrived is kept.
    """
    refuse_unknown("aask", options, door_options("strict"))
    check_door("aask", strict=strict)
    run, future = launch(prompt, **options)
    turn = await await_turn(run, future, stalled)
    return finish_turn(turn, strict)
