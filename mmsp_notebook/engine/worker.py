"""One worker event loop in a daemon thread, where every stream of this process runs.

The kernel's own loop is never patched or re-entered (no ``nest_asyncio``): a magic submits a
coroutine with :func:`submit` and waits on the returned ``concurrent.futures.Future`` from the main
thread, which stays free to render and to receive KeyboardInterrupt. Clients are created on this
loop, the loop that uses them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["submit", "loop", "run_sync"]

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
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Run ``coro`` on the worker loop; returns a thread-safe future."""
    return asyncio.run_coroutine_threadsafe(coro, loop())


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the worker loop and wait for its result (not from the worker thread itself)."""
    if threading.current_thread() is _thread:
        raise RuntimeError("run_sync called from the worker loop: await the coroutine instead")
    return submit(coro).result(timeout)
