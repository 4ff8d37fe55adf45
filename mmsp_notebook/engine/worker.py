"""One worker event loop in a daemon thread, where every stream of this process runs.

The kernel's own loop is never patched or re-entered (no ``nest_asyncio``): a magic submits a
coroutine with :func:`submit` and waits on the returned ``concurrent.futures.Future`` from the main
thread, which stays free to render and to receive KeyboardInterrupt. Clients are created on this
loop, the loop that uses them.

A watchdog thread notices when the loop stops turning: code that blocks inside a coroutine (an
``async def`` tool calling ``time.sleep`` or computing for seconds) holds every stream of the
process. :func:`stalled` says since when and what is running (the tool, by name, when one of
:func:`blocking_suspect`'s coroutines is on the loop's stack), the front doors show it and end
their turn on an interrupt or the turn's timeout, and it is logged once per stall.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

from ..core.run import Stall

__all__ = ["submit", "loop", "run_sync", "stalled", "blocking_suspect", "BLOCKED_AFTER"]

T = TypeVar("T")
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def loop() -> asyncio.AbstractEventLoop:
    """The worker loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            ready = threading.Event()
            new_loop = asyncio.new_event_loop()

            def run() -> None:
                asyncio.set_event_loop(new_loop)
                _beat(new_loop)
                ready.set()
                while True:
                    try:
                        new_loop.run_forever()
                        return  # stopped on purpose
                    except BaseException:
                        # asyncio re-raises them out of the loop after setting them on their task: the
                        # loop goes on, so that task's waiter and every other stream still finish
                        continue

            _thread = threading.Thread(target=run, name="mmsp-notebook-worker", daemon=True)
            _thread.start()
            ready.wait()
            _loop = new_loop
            _start_watchdog()
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Run ``coro`` on the worker loop; returns a thread-safe future."""
    return asyncio.run_coroutine_threadsafe(coro, loop())


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the worker loop and wait for its result (not from the worker thread itself)."""
    if threading.current_thread() is _thread:
        raise RuntimeError("run_sync called from the worker loop: await the coroutine instead")
    return submit(coro).result(timeout)


# ------------------------------------------------------------------------------------ the watchdog
#: Seconds the worker loop may run one piece of code before the watchdog calls it blocked.
BLOCKED_AFTER = 2.0
#: The same for code that is not a registered suspect (imports, a listener, the package itself).
UNKNOWN_BLOCKED_AFTER = 10.0
_BEAT = 0.1  # seconds between two beats of the loop
_last_beat = time.monotonic()  # the time.monotonic() of the loop's last beat
_suspects: dict[int, tuple[Any, str, str | None]] = {}  # id(frame) -> (frame, label, tool) of coroutines that may block
_watchdog: threading.Thread | None = None
_log = logging.getLogger("mmsp_notebook")


def _beat(on: asyncio.AbstractEventLoop) -> None:
    """Note that the loop turned, and again in ``_BEAT`` seconds: a loop that runs one callback for
    long misses its beats."""
    global _last_beat
    _last_beat = time.monotonic()
    on.call_later(_BEAT, _beat, on)


@contextlib.contextmanager
def blocking_suspect(awaitable: Any, label: str, tool: str | None = None) -> Iterator[None]:
    """While the body runs, a stall of the loop inside ``awaitable`` (a coroutine) is blamed on
    ``label`` (e.g. "the async tool 'get_weather'"), ``tool`` naming the tool."""
    frame = getattr(awaitable, "cr_frame", None)
    if frame is None:
        yield
        return
    key = id(frame)
    _suspects[key] = (frame, label, tool)
    try:
        yield
    finally:
        _suspects.pop(key, None)


_RUN_CALLBACK = asyncio.Handle._run.__code__  # on the loop's stack exactly while a callback or task step runs


def stalled(now: float | None = None) -> Stall | None:
    """How the worker loop is blocked: a :class:`~mmsp_notebook.core.run.Stall`, or ``None`` while it
    turns (or waits for the network, or was never started).

    The loop beats every 0.1 s; it is blocked when it has missed its beats while running a callback
    (its stack shows it: a loop waiting in ``select`` while another thread holds the interpreter is
    not blocked) for :data:`BLOCKED_AFTER` seconds inside a coroutine registered with
    :func:`blocking_suspect` (an async tool, then named the culprit), or for
    :data:`UNKNOWN_BLOCKED_AFTER` seconds in other code (the first turn importing a provider's SDK
    takes a few seconds on a slow machine, and is no one's fault).
    """
    thread = _thread
    if _loop is None or thread is None or not thread.is_alive():
        return None
    beat = _last_beat
    seconds = (time.monotonic() if now is None else now) - beat
    if seconds < BLOCKED_AFTER:
        return None
    frame = sys._current_frames().get(thread.ident or -1)
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    if not any(f.f_code is _RUN_CALLBACK for f in stack):
        return None  # not running a callback: waiting, or between two of them
    for f in stack:
        suspect = _suspects.get(id(f))
        if suspect is not None and suspect[0] is f:
            where = next((_where(g) for g in stack if not _is_loop_code(g)), None)
            return Stall(seconds=seconds, since=beat, culprit=suspect[1], tool=suspect[2], where=where)
    if seconds < UNKNOWN_BLOCKED_AFTER:
        return None
    where = next((_where(g) for g in stack if not _is_loop_code(g)), None)
    return Stall(seconds=seconds, since=beat, where=where)


_ASYNCIO_DIR = os.path.dirname(asyncio.__file__)


def _is_loop_code(frame: Any) -> bool:
    """asyncio's own frames (the loop, tasks, handles) and the import machinery, never the culprit."""
    name = frame.f_code.co_filename
    return name.startswith("<frozen ") or os.path.dirname(name) == _ASYNCIO_DIR


def _where(frame: Any) -> str:
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} in {frame.f_code.co_name}"


def _start_watchdog() -> None:
    """The thread that logs each stall of the loop once (called under ``_lock``)."""
    global _watchdog
    if _watchdog is not None and _watchdog.is_alive():
        return

    def watch() -> None:
        told = -1.0
        while True:
            time.sleep(_BEAT * 2.5)
            stall = stalled()
            if stall is not None and stall.since != told:
                told = stall.since
                _log.warning("%s", stall.message())

    _watchdog = threading.Thread(target=watch, name="mmsp-notebook-watchdog", daemon=True)
    _watchdog.start()
