"""The one way a front door shows a turn in flight and finishes it.

``%%mmsp``, ``ask``, ``Chat.send`` and ``replay`` all end here, so the view chosen, the events
table, the wire view, strict mode and "drawn in this cell" mean the same whichever door a turn came
through:

* the view: the live widget in a Jupyter kernel, text on ``stream`` (stdout by default) elsewhere;
* ``events=None`` and ``strict=None`` take the kernel's settings (``%mmsp config``);
* a turn drawn live in the running cell shows only its summary as that cell's value;
* the session records the last turn and the last real error; strict mode raises
  :class:`~mmsp_notebook.TurnError` unless the turn completed;
* an interrupt (■, Ctrl-C) cancels the turn, which is drawn and recorded as cancelled, and then
  goes on up as a :class:`KeyboardInterrupt` (:class:`Interrupted`, with the turn), so a loop of
  turns, or the cells queued after the interrupted one, stop as with any other code.
"""

from __future__ import annotations

import concurrent.futures
import os
import traceback
import types
from collections.abc import Callable
from typing import Any, TextIO

from .._errors import OptionTypeError, TurnError
from ..core.flags import check_flag
from ..core.redact import redact
from ..core.run import TurnRun
from ..core.turn import Turn
from ..engine.session import Session, session
from ..engine.worker import stalled
from ..views.live import LiveView, TextLive, WidgetLive, abandoned_on_raise, drive, in_kernel
from ..views.static import register_formatters, running_cell
from ..views.wire import show_wire  # loaded with every front door: Jupyter then shows a Wire as its table

__all__ = ["live_view", "present", "present_group", "finish_turn", "check_door", "shown_without_internals", "Interrupted"]

register_formatters()  # Jupyter shows a Turn through the views, whichever door made it


class Interrupted(KeyboardInterrupt):
    """The interrupt (■, Ctrl-C) that stopped a turn or a comparison, raised once it is drawn and recorded.

    A :class:`KeyboardInterrupt`, so it stops the code around it (a loop of ``ask``, the cells
    queued after a ``%%mmsp`` cell); ``turn`` is the turn (or :class:`~mmsp_notebook.Comparison`) it
    stopped, cancelled with what had arrived, as the front door would have returned it.
    """

    def __init__(self, turn: Any, shown: bool = True) -> None:
        turns = getattr(turn, "turns", None)
        kind = "turn" if turns is None else "comparison"
        status = getattr(turn, "status", None)
        if not shown:  # (interrupted while its view was being made: a kernel's first takes a moment)
            said = f"the {kind} was cancelled before it was shown"
        elif status == "cancelled" or any(getattr(t, "status", None) == "cancelled" for t in turns or ()):
            said = f"the {kind} was cancelled; its partial answer{'s are' if kind == 'comparison' else ' is'} kept above"
        else:  # (it had ended just before the interrupt: it stays as it ended)
            said = f"the {kind} had ended ({status}) when interrupted; it is kept above"
        super().__init__(said)
        self.turn = turn


def live_view(stream: TextIO | None = None, events: bool = False) -> LiveView:
    """The live view for where this runs: the widget in a Jupyter kernel, else text on ``stream``."""
    if stream is None and in_kernel():
        return WidgetLive(events=events)
    return TextLive(stream)


def check_door(door: str, stream: Any = None, **flags: Any) -> None:
    """Refuse, before any request, a ``stream`` that cannot be written to (a path given as text)
    and a flag (``strict``, ``events``) that is not True, False or None: ``strict="false"`` would
    be taken as true."""
    if stream is not None and not callable(getattr(stream, "write", None)):
        raise OptionTypeError(f"{door}: stream takes a text stream to write to (sys.stdout, io.StringIO(), "
                              f"open(path, 'w')), not {type(stream).__name__} {redact(repr(stream))[:80]}")
    for name, value in flags.items():
        check_flag(name, value, none="the kernel's setting", door=door)


def present(
    run: TurnRun,
    future: concurrent.futures.Future[Turn],
    *,
    stream: TextIO | None = None,
    events: bool | None = None,
    strict: bool | None = None,
    wire: bool = False,
    keep: Callable[[Turn], Any] | None = None,
    sess: Session | None = None,
) -> Turn:
    """Show the turn live until it ends (KeyboardInterrupt stops it), then finish it.

    ``keep`` is called with the turn before strict mode, or an interrupt, raises (``-o VAR`` keeps a
    failed or cancelled turn).
    """
    sess = sess or session()
    shown = True
    try:
        with abandoned_on_raise(run):  # (the first view of a kernel takes a moment, its imports)
            live = live_view(stream, sess.settings.events if events is None else events)
        turn = drive(run, future, live, stalled=stalled)
    except KeyboardInterrupt:  # before the view was shown (the turn is aborted): ended, kept, not drawn
        concurrent.futures.wait([future], timeout=ABORT_WAIT)  # (a second interrupt goes on up as it is)
        turn, shown, run.interrupted = run.turn, False, True
        if not future.done():
            turn.mark_cancelled("interrupted (kernel interrupt)")
    if shown and wire:
        show_wire(turn, isinstance(live, WidgetLive), stream)
    if shown and stream is None:  # the live view drew it in the running cell (None outside IPython)
        turn.drawn_in_cell = running_cell()
    if keep is not None:
        keep(turn)
    return finish_turn(turn, strict, sess, interrupted=run.interrupted, shown=shown)


#: seconds a turn interrupted before its view was shown is given to end (it was aborted at once)
ABORT_WAIT = 3.0


def finish_turn(turn: Turn, strict: bool | None = None, sess: Session | None = None, *,
                interrupted: bool = False, shown: bool = True) -> Turn:
    """Record how a turn ended; in strict mode raise :class:`TurnError` unless it completed.

    ``strict=None`` takes the kernel's setting. ``interrupted``: an interrupt stopped the wait for
    the turn; once it is recorded, :class:`Interrupted` is raised (in strict mode too: the interrupt
    stops the code around, where a ``TurnError`` may be caught); ``shown``: whether its view drew it.
    """
    sess = sess or session()
    strict = sess.settings.strict if strict is None else strict
    sess.last_turn = turn
    if turn.error is not None and turn.status not in ("complete", "cancelled"):
        sess.last_error = turn.error  # a cancel is not an error: %mmsp error keeps showing the last real one
    if interrupted:
        raise Interrupted(turn, shown)
    if strict and turn.status != "complete":
        message = f"turn {turn.status}"
        if turn.error_message and turn.status != "cancelled":
            message += f": {type(turn.error).__name__}: {turn.error_message}"
        raise shown_without_internals(TurnError(message, turn)) from turn.error
    return turn


#: where this package's modules are: the frames IPython leaves out of strict mode's traceback
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def shown_without_internals(exc: TurnError) -> TurnError:
    """``exc`` (strict mode's TurnError), which IPython shows through the caller's frames only: the
    frames through this package, and the traceback of its cause through mmsp's client and httpx, add
    nothing to the banner of the turn's view, which already says what happened. The error itself is
    unchanged (``__cause__``, ``turn``, ``__traceback__``; ``%mmsp error`` shows the cause whole).
    The magic shows it in one line instead."""
    exc._render_traceback_ = lambda: _caller_traceback(exc)  # type: ignore[attr-defined]  # IPython's hook
    return exc


def _caller_traceback(exc: TurnError) -> list[str]:
    """``exc``'s traceback as IPython draws it, without this package's frames and without its cause."""
    tb, kept = exc.__traceback__, []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
            kept.append(tb)
        tb = tb.tb_next
    trimmed = None
    for frame in reversed(kept):
        trimmed = types.TracebackType(trimmed, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    turns = getattr(exc.turn, "turns", None) or [exc.turn]
    failed = any(getattr(turn, "status", None) in ("error", "incomplete") for turn in turns)
    shown = TurnError(f"{exc}" + (" (the full detail: %mmsp error)" if failed else ""), exc.turn)
    shown.__suppress_context__ = True  # (its cause is the turn's error, which the view's banner says)
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and trimmed is not None:
            return list(shell.InteractiveTB.structured_traceback(TurnError, shown, trimmed))
    except Exception:  # (IPython's formatter changed): Python's, below
        pass
    return [line.rstrip("\n") for line in traceback.format_exception(TurnError, shown, trimmed)]


def present_group(group: Any, future: concurrent.futures.Future[Any], *, stream: TextIO | None = None) -> Any:
    """Show several turns in flight as columns until they all end (KeyboardInterrupt stops them all:
    ``group.interrupted`` then says so, for the caller to raise :class:`Interrupted` once it is finished).

    The same pacer as one turn: a repaint of every column per tick, the final repaint once all ended.
    """
    with abandoned_on_raise(group):  # (as for one turn: while the view is made)
        from ..views.columns import ColumnsLive, ColumnsText

        live: LiveView = ColumnsLive() if stream is None and in_kernel() else ColumnsText(stream)
    comparison = drive(group, future, live, stalled=stalled)
    if stream is None:
        comparison.drawn_in_cell = running_cell()
    return comparison
