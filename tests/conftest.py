"""Shared fixtures."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import fresh_session, kernel, serve_posts  # noqa: F401  (fixtures shared by every module)

from mmsp_notebook.demo import DemoServer

#: what jupyter_client says when a kernel it started exited before answering: with two test
#: processes starting kernels and servers at once, the kernel can lose one of the free ports
#: jupyter_client picked for it to another process ("Address already in use")
KERNEL_LOST_ITS_PORT = "Kernel died before replying to kernel_info"


def _start_retried(execute):
    """``NotebookClient.execute`` starting its kernel again, on fresh ports, when the kernel died
    before replying (nothing of the notebook has run then); any other failure is raised."""

    def execute_retried(self, **kwargs):
        for attempt in range(3):
            try:
                return execute(self, **kwargs)
            except RuntimeError as exc:
                if KERNEL_LOST_ITS_PORT not in str(exc) or not self.owns_km or attempt == 2:
                    raise
                self.km = self.kc = None  # (a new kernel manager: new ports)

    return execute_retried


def _install_kernel_start_retry() -> None:
    from nbclient import NotebookClient

    if not getattr(NotebookClient.execute, "retried", False):
        NotebookClient.execute = _start_retried(NotebookClient.execute)
        NotebookClient.execute.retried = True


_install_kernel_start_retry()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test of the browser modules (tests/test_browser*.py, which run in a row), the
    JupyterLab server and the Chromium they shared (browser_utils.SHARED) stop: the tests that
    follow get the machine's cores to themselves. (Not after a test of those modules that uses
    neither: the modules keep them as fixtures for their later tests.)"""
    yield
    browser_utils = sys.modules.get("browser_utils")
    if browser_utils is not None and (nextitem is None or not nextitem.path.name.startswith("test_browser")):
        browser_utils.SHARED.stop()


@pytest.fixture(scope="module")
def demo_server() -> Iterator[DemoServer]:
    """An instant demo server (short heartbeat interval), shared by the tests of a module."""
    with DemoServer(instant=True, heartbeat=0.1) as server:
        yield server


@pytest.fixture(scope="session")
def traces_notebook(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    """``notebooks/traces.ipynb`` executed once in a real kernel (it takes a while; the tests using
    it live in one module, so that the parallel phase runs it once): the executed
    notebook and the folder it ran in. Its own temporary folders go under that folder too."""
    import nbformat
    from nbclient import NotebookClient

    where = tmp_path_factory.mktemp("traces_notebook")
    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "traces.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "store the notebook without outputs"
    (where / "tmp").mkdir()
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(where / "tmp")  # inherited by the kernel
    try:
        NotebookClient(nb, kernel_name="python3", timeout=240, resources={"metadata": {"path": str(where)}}).execute()
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
    return nb, where


@pytest.fixture
def key_echoing_server():
    """A provider that refuses every request with a 401 quoting the key it was sent (some do)."""
    def refuse(self):
        request = self.rfile.read(int(self.headers.get("content-length") or 0))
        auth = self.headers.get("authorization") or ""
        error = {"error": {"message": f"Incorrect API key provided: {auth.split()[-1]}. Header: {auth}",
                           "type": "invalid_request_error", "code": "invalid_api_key"}}
        if b'"stream-refusal"' in request:  # refused inside a stream that began with HTTP 200
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.write(f"data: {json.dumps(error)}\n\n".encode())
            return
        body = json.dumps(error).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    yield from serve_posts(refuse)
