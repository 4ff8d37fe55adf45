"""The one worker event loop where every stream of the process runs."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from mmsp_notebook.engine import worker


def test_coroutines_run_on_one_daemon_thread():
    async def where():
        return threading.current_thread()

    a = worker.run_sync(where())
    b = worker.submit(where()).result(5)
    assert a is b and a.daemon and a.name == "mmsp-notebook-worker" and a is not threading.current_thread()


def test_run_sync_from_the_worker_itself_is_refused():
    async def nested():
        coro = asyncio.sleep(0)
        try:
            worker.run_sync(coro)
        finally:
            coro.close()

    with pytest.raises(RuntimeError, match="await the coroutine instead"):
        worker.run_sync(nested())


def test_a_task_calling_sys_exit_does_not_stop_the_loop():
    async def leave():
        sys.exit(3)

    future = worker.submit(leave())
    with pytest.raises(SystemExit):
        future.result(5)

    async def still():
        return 42

    assert worker.run_sync(still(), timeout=5) == 42
