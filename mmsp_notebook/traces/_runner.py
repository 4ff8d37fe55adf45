"""Running the chunks of :func:`mmsp_notebook.traces.sync`: on the given executor, inline for a
single task, else on a process pool (a fork server's workers) created on first need; a few tasks
in flight per worker, the first failure cancelling the rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
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
        try:
            for t in todo:
                futures[ex.submit(fn, *t)] = t
                if len(futures) >= window:
                    break
            while futures:
                done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
                for f in done:
                    task = futures.pop(f)
                    yield task, f.result()
                    nxt = next(todo, None)
                    if nxt is not None:
                        futures[ex.submit(fn, *nxt)] = nxt
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

    def close(self) -> None:
        for ex in (self.pool, self.threads):
            if ex is not None:
                ex.shutdown(wait=True, cancel_futures=True)
        self.pool = self.threads = None


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
    return ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
