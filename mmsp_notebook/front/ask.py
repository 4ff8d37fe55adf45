"""``ask`` and ``aask``: a turn from Python, shown where it runs or awaited."""

from __future__ import annotations

import asyncio
from typing import Any, TextIO

from ..core.turn import Turn
from ..engine.launch import launch
from .finish import finish_turn, present

__all__ = ["ask", "aask"]


def ask(prompt: str, *, stream: TextIO | None = None, strict: bool | None = None, events: bool | None = None,
        **options: Any) -> Turn:
    """Run one turn and show it as it streams: live in Jupyter, as text in a terminal or script.

    Options are those of ``%%mmsp`` (``model``, ``client_type``, ``base_url``, ``api_key_env``,
    ``system``, ``thinking``, ``max_tokens``, ``temperature``, ``tools``, ``max_steps``, ``chat``,
    ``new``, ``trace``, ``images``, ``wire``). Returns the :class:`Turn`, also when it failed.
    ``wire=True`` also shows the raw SSE frames next to the UniEvents they became (``turn.wire``).
    ``strict`` and ``events`` default to the kernel's settings (``%mmsp config``).
    """
    run, future = launch(prompt, **options)
    return present(run, future, stream=stream, events=events, strict=strict, wire=bool(options.get("wire")))


async def aask(prompt: str, *, strict: bool | None = None, **options: Any) -> Turn:
    """Run one turn from async code (it runs on the worker loop); cancelling the await aborts it."""
    run, future = launch(prompt, **options)
    try:
        turn = await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        run.abort("cancelled")
        raise
    return finish_turn(turn, strict)
