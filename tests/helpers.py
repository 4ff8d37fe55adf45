"""Shared test helpers: a fresh session on an instant demo server, required dependencies."""

from __future__ import annotations

import os
import queue
import shutil
from pathlib import Path

import pytest


def require(condition: bool, what: str) -> None:
    """Skip locally when a dependency is missing; under CI (CI=true) that is a failure."""
    if condition:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"missing dependency in CI: {what}")
    pytest.skip(f"missing dependency: {what}")


def chromium_path() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    require(os.path.exists(path), "Debian chromium (/usr/bin/chromium)")
    return path


def apply_ops(vm: dict, ops: list) -> dict:
    """What a front end does with ops: the reference the JS renderer is tested against too."""
    for op in ops:
        if op[0] == "item":
            i, fields = op[1], dict(op[2])
            assert i == len(vm["items"]), f"item {i} out of order"
            if fields["kind"] in ("text", "thinking", "tool_call"):
                fields.setdefault("text", "")
            vm["items"].append(fields)
        elif op[0] == "append":
            vm["items"][op[1]]["text"] += op[2]
        elif op[0] == "set":
            vm["items"][op[1]].update(op[2])
        elif op[0] == "turn":
            vm.update(op[1])
        elif op[0] == "event":
            vm.setdefault("events", []).append(op[1])
        else:  # pragma: no cover - a new op must be added here and in js/src/render.js
            raise AssertionError(f"unknown op {op[0]}")
    return vm


@pytest.fixture
def fresh_session(tmp_path, monkeypatch):
    """A new kernel session on an instant demo server, tracing into a temporary MMSP_CACHE_DIR."""
    from mmsp_notebook.engine import session as _session
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    sess = _session.Session()
    sess.settings.demo_instant = True
    sess.notebook = "tests"
    monkeypatch.setattr(_session, "_session", sess)
    yield sess
    sess.stop_demo()


def html_of(cell) -> str:
    """The text/html of a notebook cell's display outputs."""
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs
                   if o.output_type in ("display_data", "execute_result"))


def text_of(cell) -> str:
    """What a notebook cell printed or showed as text (errors as ``Name: value``)."""
    parts: list[str] = []
    last = None
    for o in cell.outputs:
        if o.output_type == "stream":
            if last is not None and last.output_type == "stream" and last.name == o.name:
                parts[-1] += o.text  # (one print may arrive in pieces: they carry their own newlines)
            else:
                parts.append(o.text)
        elif o.output_type in ("display_data", "execute_result"):
            parts.append(o.get("data", {}).get("text/plain", ""))
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
        last = o
    return "\n".join(parts)


class Kernel:
    """A real ipykernel driven through jupyter_client, for what nbclient cannot do (interrupts, comms)."""

    def __init__(self, km, kc):
        self.km, self.kc = km, kc

    def execute(self, code: str, timeout: float = 30) -> list:
        """Run a cell; returns its IOPub messages once the kernel is idle again."""
        import queue
        import time

        msg_id = self.kc.execute(code)
        outputs = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no idle after {timeout}s for {code!r}: {outputs}") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            outputs.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return outputs

    def interrupted(self, code: str, after: float = 2.0, until: str | Path | None = None,
                    any_output: bool = False) -> tuple[dict, float]:
        """Run a cell, interrupt the kernel ``after`` seconds in (with ``until``: once an output of
        the cell (with ``any_output``: of any cell, as a background thread's log may land) holds
        that text, or that file exists, within 60 s, then ``after`` seconds more); its execute
        reply and how long the interrupt took to end the cell."""
        import json
        import time

        msg_id = self.kc.execute(code)
        deadline = time.monotonic() + 60
        while isinstance(until, Path) and not until.exists():
            assert time.monotonic() < deadline, f"no {until} within 60 s"
            time.sleep(0.05)
        while isinstance(until, str):
            assert time.monotonic() < deadline, f"no output of the cell said {until!r} within 60 s"
            try:
                msg = self.kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            if (any_output or msg["parent_header"].get("msg_id") == msg_id) and until in json.dumps(msg["content"]):
                break
        time.sleep(after)
        interrupted_at = time.monotonic()
        self.km.interrupt_kernel()
        reply = self.kc.get_shell_msg(timeout=10)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=10)
        took = time.monotonic() - interrupted_at
        if reply["content"]["status"] == "error":
            self.settled()
        return reply, took

    def settled(self, timeout: float = 10) -> None:
        """Once a cell ended with an error: wait until the kernel runs cells again (it aborts those that
        reach it while it winds the error down, as after any failed cell: stop_on_error)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            msg_id = self.kc.execute("pass", store_history=False)
            reply = self.kc.get_shell_msg(timeout=10)
            while reply["parent_header"].get("msg_id") != msg_id:
                reply = self.kc.get_shell_msg(timeout=10)
            if reply["content"]["status"] == "ok":
                return
            assert time.monotonic() < deadline, f"the kernel still aborts cells after {timeout} s"
            time.sleep(0.05)

    def printed(self, code: str, timeout: float = 30) -> str:
        """What a cell printed to stdout (a log line of a background thread may land on stderr meanwhile)."""
        return "".join(m["content"].get("text", "") for m in self.execute(code, timeout)
                       if m["msg_type"] == "stream" and m["content"].get("name") == "stdout")


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A fresh kernel tracing into a temporary MMSP_CACHE_DIR."""
    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    for attempt in range(3):  # (a kernel that lost a port jupyter_client picked to another process: see conftest)
        try:
            km, kc = start_new_kernel(kernel_name="python3")
            break
        except RuntimeError as exc:
            if "Kernel died before replying to kernel_info" not in str(exc) or attempt == 2:
                raise
    try:
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def serve_posts(do_post, on_close=None):
    """A loopback HTTP server whose handler answers POSTs with ``do_post(handler)``; yields its ``/v1``
    base URL (a generator for a pytest fixture or a context manager: ``yield from serve_posts(...)``).
    ``on_close`` is called before the server stops (e.g. to let go of connections a handler holds)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            do_post(self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        if on_close is not None:
            on_close()
        server.shutdown()
        server.server_close()


def run_with_timeout(fn, timeout: float):
    """``fn()`` in a daemon thread; fails the test instead of hanging when it does not return in time
    (a FIFO read blocks forever); its exception, if any, is raised here."""
    import threading

    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"still running after {timeout} s")
    if "error" in out:
        raise out["error"]
    return out["value"]
