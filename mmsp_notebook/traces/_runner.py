"""Running the chunks of :func:`mmsp_notebook.traces.sync`: on the given executor, inline for a
single task, else on a process pool (a fork server's workers) created on first need; a few tasks
in flight per worker, the first failure cancelling the rest.

Ctrl-C: the pool's processes never take SIGINT (a terminal sends it to every process of its group,
Jupyter to the kernel's): they start with it blocked, and only the calling process is interrupted.
A ``KeyboardInterrupt`` that comes while a worker is being started waits until it is (a process
started halfway would be known to no shutdown); the sync then ends the workers (their files are
written under temporary names, which the next sync removes) and raises it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

__all__ = ["Runner", "IN_FLIGHT", "not_while_importing_main"]

#: tasks in flight at most on a given executor (its workers may be many); on the default pool,
#: two per worker. The main process holds the traces of the chunks in flight.
IN_FLIGHT = 64


class Runner:
    """Runs tasks on the given executor, else inline for one task and on a process pool (created on
    first need, shut down by :meth:`close`) for more."""

    def __init__(self, executor: Executor | None) -> None:
        self.given = executor
        self.pool: Executor | None = None
        self.threads: Executor | None = None

    def run(self, fn: Callable[..., Any], tasks: Iterable[tuple[Any, ...]], n: int, io: bool = False
            ) -> Iterator[tuple[tuple[Any, ...], Any]]:
        """(task, result) as the ``n`` tasks finish; the first failure cancels the rest and is
        raised. Tasks are taken from the iterable as workers free up (a few in flight per worker),
        so they are made lazily. ``io`` tasks (Parquet rewrites: Arrow releases the GIL) run on
        the process pool when this sync started one (its workers hold the reading and writing
        machinery already, which the main process then never takes on), else on threads."""
        if not n:
            return
        ex = self.given
        window = IN_FLIGHT
        if ex is None and n > 1:
            if io and self.pool is not None:
                ex = self.pool
            elif io:
                if self.threads is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self.threads = ThreadPoolExecutor(max(2, os.cpu_count() or 1))
                ex = self.threads
            else:
                if self.pool is None:
                    self.pool = _process_pool(n)
                ex = self.pool
            window = 2 * max(2, os.cpu_count() or 1)
        if ex is None:
            for t in tasks:
                yield t, fn(*t)
            return
        from concurrent.futures import FIRST_COMPLETED, wait

        todo = iter(tasks)
        futures: dict[Future[Any], tuple[Any, ...]] = {}
        pool = ex is self.pool
        try:
            for t in todo:
                futures[_submit(ex, pool, fn, t)] = t
                if len(futures) >= window:
                    break
            while futures:
                done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                for f in done:
                    task = futures.pop(f)
                    yield task, f.result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        futures[_submit(ex, pool, fn, nxt)] = nxt
        except BrokenProcessPool as exc:  # (on a result, or on submitting the next task)
            if ex is not self.pool:
                raise
            raise RuntimeError(
                "a worker process of traces.sync's pool ended abruptly (killed, or out of memory; "
                "in a script, call sync under `if __name__ == '__main__':`, as the pool's workers "
                "import the script's main module to start); the dataset is readable and the "
                "next sync goes on from the chunks committed so far") from exc
        finally:
            for f in futures:
                f.cancel()

    def close(self, abort: bool = False) -> None:
        """Shut the pools down: their running tasks finish first, unless ``abort`` (a
        ``KeyboardInterrupt``), which ends the pool's workers at once."""
        if abort and self.pool is not None:
            _end_workers(self.pool)
        for ex in (self.pool, self.threads):
            if ex is not None:
                ex.shutdown(wait=True, cancel_futures=True)
        self.pool = self.threads = None


def _submit(ex: Executor, pool: bool, fn: Callable[..., Any], task: tuple[Any, ...]) -> Future[Any]:
    """``ex.submit(fn, *task)``; on the sync's own pool, which may start a process to run it, with
    Ctrl-C held back (see :func:`_interrupts_held`)."""
    if not pool:
        return ex.submit(fn, *task)
    with _interrupts_held():
        return ex.submit(fn, *task)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """SIGINT blocked in this thread, so that the processes started meanwhile (the fork server, a
    worker) inherit the block and never take it; in the main thread, a SIGINT that comes
    meanwhile (through another thread) is held and raised again at the end, once."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    came: list[int] = []
    previous: Any = None
    # (a handler not set from Python, which could not be put back, is left in place)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is not None:
        previous = signal.signal(signal.SIGINT, lambda signum, _frame: came.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # (one blocked meanwhile comes here, to the handler above)
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            if came:
                signal.raise_signal(signal.SIGINT)


def _no_interrupts() -> None:
    """A worker's start: SIGINT ignored (the calling process ends the workers), for a pool whose
    fork server some other code started without the block."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _end_workers(pool: Executor) -> None:
    """Terminate the worker processes of a process pool (interrupted: their tasks' results would
    not be used) and wait for them."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        try:
            p.terminate()
        except (OSError, ValueError, AttributeError):  # (gone already)
            pass
    for p in procs:
        try:
            p.join(5)
        except (OSError, ValueError, AttributeError):
            pass


def not_while_importing_main() -> None:
    """A script that calls sync at its top level, unguarded, runs it again in every worker the
    pool starts (they import the main module): say so there, instead of a sync in each."""
    import multiprocessing as mp

    if getattr(mp.current_process(), "_inheriting", False):
        raise RuntimeError(
            "traces.sync was called while a worker process imported the main module: in a script, "
            "call it under `if __name__ == '__main__':` (its process pool's workers import the script to start)")


def _process_pool(n_tasks: int) -> Executor:
    import multiprocessing as mp

    workers = max(1, min(os.cpu_count() or 1, n_tasks))
    ctx: Any
    if "forkserver" in mp.get_all_start_methods():
        # not fork: a kernel has threads (the worker loop), and forking a threaded process can
        # deadlock; the fork server imports the converter once and forks workers from it
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["mmsp_notebook.traces._convert", "mmsp_notebook.core.pricing", "mmsp"])
    else:  # pragma: no cover - Windows
        ctx = mp.get_context("spawn")
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_no_interrupts)
