"""Live views of a streaming turn, and the loop on the main thread that repaints them.

Like rich's ``Live``: the engine changes state under the turn's lock on the worker loop; the main
thread repaints at a bounded rate (at most ``rate`` updates a second, the first change at once) and
always once more at the end. A KeyboardInterrupt aborts the upstream request through mmsp's
``AbortSignal`` and the partial turn is kept, marked cancelled.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..core.run import Stall, TurnRun
from ..core.turn import STATUS_TEXT, Turn
from .html import render_html
from .model import OpsTracker, view_model
from .text import PLAIN_TEXT_LIMIT, banner_lines, footer_line, item_head, item_tail, printable, render_text, result_line

__all__ = ["LiveView", "WidgetLive", "TextLive", "LoopWatch", "drive", "adrive", "await_turn", "in_kernel"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
# repaints a second at most (40 ms apart, so at most 25 in any second): with a turn's first message
# (the widget's display) and its last two (the final ops and the static rendering, sent as soon as
# the stream ends) no second carries more than 28, under the 30 a front end is promised and well
# under jupyter_server's IOPub limit
UPDATES_PER_SECOND = 25.0
# seconds without a change after which the pacer repaints anyway: the live banner's "waiting for
# the first token… 12 s" counts whole seconds (see views.model.waiting_text)
QUIET_REPAINT = 0.5


def in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (a front end that can show widgets and HTML)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class LiveView:
    def start(self, turn: Turn) -> None: ...

    def update(self, turn: Turn) -> None: ...

    def finish(self, turn: Turn) -> None: ...


_shared_view: Any = None


def _turn_view(turn: Turn, tracker: OpsTracker | None = None) -> Any:
    """The kernel's one TurnView, reused turn after turn.

    Each turn's finished output is static HTML, so the widget is only needed while a turn streams;
    one model for the whole kernel keeps the saved widget state (which carries the front-end bundle)
    from growing with every cell.
    """
    global _shared_view
    from .widget import TurnView

    if _shared_view is None or getattr(_shared_view, "comm", None) is None:
        _shared_view = TurnView(source=turn, tracker=tracker)
    else:
        _shared_view.reset(turn, tracker)
    return _shared_view


class WidgetLive(LiveView):
    """An anywidget fed with ops while the turn streams; then the static rendering takes its place.

    The finished output is sanitized ``text/html`` plus ``text/plain`` only: a saved notebook then
    shows the whole turn on GitHub, nbviewer and nbconvert, with no kernel and no widget state,
    exactly as JupyterLab shows it after the stream.
    """

    def __init__(self, events: bool = False) -> None:
        self.events = events
        self.tracker = OpsTracker(events=events)
        self.widget: Any = None
        self.handle: Any = None

    def start(self, turn: Turn) -> None:
        from IPython.display import display

        self.widget = _turn_view(turn, self.tracker)
        ref = {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id}
        bundle = {WIDGET_MIME: ref, "text/plain": "<mmsp turn: streaming…>"}
        self.handle = display(bundle, raw=True, display_id=True)

    def update(self, turn: Turn) -> None:
        self.widget.push(self.tracker.ops(turn))

    def finish(self, turn: Turn) -> None:
        self.widget.push(self.tracker.ops(turn, final=True))
        vm = view_model(turn)
        # text/plain is the fallback of front ends without HTML; the HTML carries the whole turn
        # (with the events table inside it, where the live view drew it)
        plain = render_text(turn, vm, limit=PLAIN_TEXT_LIMIT)
        self.handle.update({"text/html": render_html(turn, vm, events=self.events), "text/plain": plain}, raw=True)


class TextLive(LiveView):
    """Terminal IPython and plain Python: text streams to stdout, thinking dimmed, then banner and footer.

    A template of the view model like the others: it keeps each item's view up to date from the
    ops and writes the tags, results, banner and footer the model words.
    """

    DIM, RESET, YELLOW, RED = "\x1b[2m", "\x1b[0m", "\x1b[33m", "\x1b[31m"
    CLEAR = "\r\x1b[2K"  # back to the start of the line, the line erased

    def __init__(self, stream: TextIO | None = None, color: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.color = self.stream.isatty() if color is None and hasattr(self.stream, "isatty") else bool(color)
        self.tracker = OpsTracker()
        self.items: dict[int, dict[str, Any]] = {}
        self.told: set[int] = set()  # items whose outcome (meta line, tool result) is written
        self.started = False
        self.line_start = True  # whether the last thing written ended a line
        self.status_shown = False  # a status line ("waiting for the first token… 3 s") is on screen

    def _w(self, text: str, style: str = "") -> None:
        if not text:
            return
        self._clear_status()  # the status line goes before anything else is written
        text = printable(text)  # what the model sent never drives the terminal
        self.line_start = text.endswith("\n")
        if style and self.color:
            text = f"{style}{text}{self.RESET}"
        self.stream.write(text)

    def _clear_status(self) -> None:
        if self.status_shown:
            self.stream.write(self.CLEAR)
            self.status_shown = False

    def _status(self, banner: Any) -> None:
        """On a terminal, say what a silent server is waiting for on a line of its own (rewritten in
        place as it counts, cleared before the answer goes on)."""
        text = banner.get("text") if isinstance(banner, dict) and banner.get("kind") == "streaming" else None
        if text == STATUS_TEXT["streaming"]:
            text = None
        self._clear_status()
        if text and self.line_start:
            self.stream.write(f"{self.DIM}{text}{self.RESET}")
            self.status_shown = True

    def _outcome(self, i: int) -> None:
        """Write what a finished item shows after its streamed part, once."""
        item = self.items[i]
        if i in self.told or item.get("kind") in ("text", "thinking"):
            return
        if item.get("kind") == "tool_call":
            result = item.get("result")
            if isinstance(result, dict) and isinstance(result.get("text"), str):
                self._w("\n" + result_line(item), self.YELLOW)
                self.told.add(i)
        elif item.get("status") == "done":
            self._w(item_tail(item))
            self.told.add(i)

    def update(self, turn: Turn, final: bool = False) -> None:
        new = None  # an item just drawn: its outcome goes after the text that follows it in this batch
        for op in self.tracker.ops(turn, final):
            if new is not None and not (op[0] == "append" and op[1] == new):
                self._outcome(new)
                new = None
            if op[0] == "item":
                item = self.items[op[1]] = dict(op[2])
                if self.started:
                    self._w("\n")
                self.started = True
                kind = item.get("kind")
                self._w(item_head(item), self.DIM if kind == "thinking" else self.YELLOW if kind == "tool_call" else "")
                new = op[1]
            elif op[0] == "append":
                self._w(op[2], self.DIM if self.items[op[1]].get("kind") == "thinking" else "")
            elif op[0] == "set":
                self.items[op[1]].update(op[2])
                self._outcome(op[1])
            elif op[0] == "turn" and "banner" in op[1] and self.color:
                self._status(op[1]["banner"])
        if new is not None:
            self._outcome(new)
        self.stream.flush()

    def finish(self, turn: Turn) -> None:
        self.update(turn, final=True)
        vm = view_model(turn)
        if self.started:
            self._w("\n")
        banner = vm.get("banner") or {}
        lines = banner_lines(banner)
        style = self.RED if banner.get("kind") == "error" else self.YELLOW
        for n, line in enumerate(lines):
            hint = n > 0 and n == len(lines) - 1 and bool(banner.get("hint"))  # the hint in plain text
            self._w((f"[{vm['status']}] " if n == 0 else "") + line + "\n", "" if hint else style)
        footer = footer_line(vm.get("footer"))
        if footer:
            self._w(footer + "\n", self.DIM)
        self.stream.flush()


def drive(run: TurnRun, future: concurrent.futures.Future[Any], live: LiveView, rate: float = UPDATES_PER_SECOND,
          abort_grace: float = 2.0, stalled: Callable[[], Stall | None] | None = None) -> Turn:
    """Repaint ``live`` while ``future`` runs; on KeyboardInterrupt abort and keep the partial turn.

    The interrupt is not raised here: the turn is returned, drawn, with ``run.interrupted`` set; the
    front door raises it once the turn is finished (:func:`mmsp_notebook.front.finish.finish_turn`).

    The main thread sleeps until something changes, repaints, then rests for one tick whatever
    arrives meanwhile (while nothing changes it repaints every ``QUIET_REPAINT`` seconds, so the
    view can say how long the server has been silent); the end of the turn wakes it from either
    wait at once, so the final repaint follows the last event without waiting out a tick.

    ``stalled`` says whether the worker loop is blocked (``engine.worker.stalled``): the view then
    says by what, and the turn is not waited for, as nothing of it can move: an interrupt ends it at
    once (``cancelled``), and so does its idle timeout (``error``), with a
    :class:`~mmsp_notebook.LoopBlockedError`; what arrived is kept.
    """
    turn = run.turn
    interval = 1.0 / rate
    ended = threading.Event()
    watch = LoopWatch(run, stalled)

    def on_done(_: Any) -> None:
        ended.set()
        run.changed.set()

    future.add_done_callback(on_done)
    with abandoned_on_raise(run):
        live.start(turn)  # (the first widget of a kernel takes a moment: its imports, its comm)
    interrupted = False
    deadline = None
    quiet_repaint = time.monotonic() + QUIET_REPAINT
    while True:
        try:
            if ended.is_set():
                break
            if watch.due(interrupted):
                break
            if deadline is not None and time.monotonic() > deadline:
                if _streams_ended(run) and time.monotonic() < deadline + WRAP_UP:
                    # the request is ended; what is left (the wire captured, the client released)
                    # is bounded and would be lost to a cancel: wait for it (a second interrupt breaks)
                    ended.wait(0.05)
                    continue
                future.cancel()
                break
            # idle until something changes (the first delta is drawn at once) ...
            if not run.changed.wait(0.05):
                if time.monotonic() >= quiet_repaint:
                    # nothing arrived for a while: repaint all the same, so "waiting… N s" counts
                    # (a view whose words did not change sends nothing), and rest a tick as after
                    # any repaint
                    live.update(turn)
                    quiet_repaint = time.monotonic() + QUIET_REPAINT
                    ended.wait(interval)
                continue
            run.changed.clear()
            if ended.is_set():
                break
            live.update(turn)
            quiet_repaint = time.monotonic() + QUIET_REPAINT
            # ... then rest for a tick: one wake-up per repaint, whatever arrives meanwhile
            ended.wait(interval)
        except KeyboardInterrupt:
            if not interrupted:
                interrupted = run.interrupted = True
                run.abort("interrupted (kernel interrupt)")
                deadline = time.monotonic() + abort_grace
            else:
                future.cancel()
                break
        except Exception as exc:  # the view cannot show it (a stream that cannot be written)
            abandon(run, exc)
            raise
    watch.settle(future, ended.is_set(), interrupted)
    returned = future.done() and not future.cancelled() and future.exception() is None
    if (interrupted or not future.done()) and not returned:
        # stopped by the user, or the worker did not end in time: the turn is cancelled all the same
        # (unless it had already ended another way), also when its last step had completed
        turn.mark_cancelled("interrupted (kernel interrupt)")
    live.finish(turn)
    return turn


#: seconds an interrupted turn whose streams have ended is given to wrap up (its --wire captured)
WRAP_UP = 30.0


def _streams_ended(run: Any) -> bool:
    """Whether every stream of ``run`` (a turn's, or each of a comparison's ``runs``) has ended."""
    runs = getattr(run, "runs", None) or [run]
    return all(getattr(getattr(one, "finished", None), "is_set", lambda: False)() for one in runs)


@contextmanager
def abandoned_on_raise(run: Any) -> Iterator[None]:
    """Showing a turn (making its view, starting it): whatever raises there, an interrupt included,
    ends the turn (:func:`abandon`) and goes on up."""
    try:
        yield
    except BaseException as exc:
        abandon(run, exc)
        raise


def abandon(run: Any, exc: BaseException) -> None:
    """The view failed, or an interrupt reached it before it was shown: the turn is aborted, not
    left streaming unseen and holding its conversation."""
    run.abort("interrupted (kernel interrupt)" if isinstance(exc, KeyboardInterrupt)
              else f"its live view failed: {type(exc).__name__}")


class LoopWatch:
    """A front door's watch on the worker loop while it waits for a turn (:func:`drive`, :func:`await_turn`).

    ``stalled`` says whether the worker loop is blocked (``engine.worker.stalled``; ``None``: not
    watched). Each :meth:`due` looks again, notes the block on the turn (its view says by what) and
    says whether the turn ends here, as nothing of it can move while the loop is held: at once on an
    interrupt, else once the block has lasted the turn's idle timeout. :meth:`settle` then ends it
    with a :class:`~mmsp_notebook.LoopBlockedError`, what arrived kept.
    """

    def __init__(self, run: Any, stalled: Callable[[], Stall | None] | None) -> None:
        self.run = run
        self.stalled = stalled
        self.limit: float | None = getattr(run, "idle_timeout", None)
        self.began = time.monotonic()
        self.blocked: Stall | None = None

    def due(self, interrupted: bool = False) -> bool:
        """Whether the turn ends here now (the loop blocked, and interrupted or past the limit)."""
        if self.stalled is None:
            return False
        was, self.blocked = self.blocked, self.stalled()
        if self.blocked is not None or was is not None:
            _note_blocked(self.run.turn, self.blocked)
        return self.blocked is not None and (
            interrupted or self.blocked.overdue(self.limit, time.monotonic() - self.began))

    def settle(self, future: concurrent.futures.Future[Any], ended: bool, interrupted: bool) -> bool:
        """Once the wait is over: a turn that had not ``ended`` while the loop was blocked ends here
        (``cancelled`` if ``interrupted``, else ``error``) and its task is cancelled once the loop
        turns again; a block that passed is no longer noted. Whether the turn was ended here."""
        if self.blocked is None:
            return False
        if ended:
            _note_blocked(self.run.turn, None)
            return False
        future.cancel()
        from .._errors import LoopBlockedError

        _end_blocked(self.run, LoopBlockedError(self.blocked, interrupted, self.limit), interrupted)
        return True


def _note_blocked(turn: Any, stall: Stall | None) -> None:
    """Say on the turn (each turn of a comparison) that the worker loop is blocked, or no longer."""
    for one in getattr(turn, "turns", None) or [turn]:
        one.loop_blocked = stall


def _end_blocked(run: Any, exc: BaseException, cancelled: bool) -> None:
    """End the turns of ``run`` (each of a comparison's) that had not finished when the loop blocked."""
    for one in getattr(run, "runs", None) or [run]:
        if not one.finished.is_set():
            one.turn.end_blocked(exc, cancelled)
    _note_blocked(run.turn, None)


async def adrive(run: TurnRun, future: concurrent.futures.Future[Any], live: LiveView,
                 rate: float = UPDATES_PER_SECOND) -> Turn:
    """:func:`drive` for an event loop: the same pacing, awaited instead of blocking a thread.

    The chat paces its turns here, on the worker loop, so a turn started from the front end streams
    while the kernel runs other cells. Cancelling the await aborts the turn; the view always gets
    its final repaint.
    """
    turn = run.turn
    interval = 1.0 / rate
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def poke() -> None:
        loop.call_soon_threadsafe(wake.set)

    ended = asyncio.wrap_future(future)
    ended.add_done_callback(lambda _: wake.set())
    run.add_waker(poke)
    live.start(turn)
    try:
        while not ended.done():
            # idle until something changes (the first delta is drawn at once), or repaint all the
            # same after a quiet while, so "waiting… N s" counts
            try:
                await asyncio.wait_for(wake.wait(), QUIET_REPAINT)
            except TimeoutError:
                live.update(turn)
                await asyncio.wait({ended}, timeout=interval)
                continue
            wake.clear()
            run.changed.clear()
            if ended.done():
                break
            live.update(turn)
            # ... then rest for a tick, unless the turn ends
            await asyncio.wait({ended}, timeout=interval)
    except asyncio.CancelledError:
        run.abort("cancelled")
        await asyncio.wait({ended}, timeout=2.0)
        raise
    finally:
        run.remove_waker(poke)
        if ended.done() and not ended.cancelled():
            ended.exception()  # retrieved: the turn records its own errors
        live.finish(turn)
    return turn


async def await_turn(run: TurnRun, future: concurrent.futures.Future[Turn],
                     stalled: Callable[[], Stall | None] | None = None, poll: float = 0.1,
                     shown: concurrent.futures.Future[Turn] | None = None) -> Turn:
    """Wait for a turn from async code, with no view (``aask``): its end, as :func:`drive` waits for it.

    While the worker loop is blocked (``stalled``, as for :func:`drive`), the turn is not waited for:
    it ends here once the block has lasted its idle timeout (``error``), with a
    :class:`~mmsp_notebook.LoopBlockedError`; what arrived is kept. Cancelling the await aborts the
    turn, and ends it at once (``cancelled``, with that error) when the loop is blocked.

    ``shown`` (``Chat.asend``): a future that resolves to the turn once its view on the worker loop
    has drawn its end; it is waited for in place of ``future``, and never cancelled here (the view
    always finishes, once the loop turns).
    """
    watch = LoopWatch(run, stalled)
    ended = asyncio.wrap_future(future if shown is None else shown)
    try:
        while not ended.done() and not watch.due():
            await asyncio.wait({ended}, timeout=poll)
    except (asyncio.CancelledError, KeyboardInterrupt):  # (an interrupt raised in this task, not through it: the same)
        future.cancel()  # (cancels the turn's task on the worker loop)
        run.abort("cancelled")
        if watch.due(interrupted=True):
            watch.settle(future, False, interrupted=True)
        raise
    if watch.settle(future, ended.done(), interrupted=False):
        return run.turn
    return await ended
