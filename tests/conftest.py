"""Shared fixtures."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from helpers import fresh_session, kernel, serve_posts  # noqa: F401  (fixtures shared by every module)

from mmsp_notebook.demo import DemoServer


@pytest.fixture(scope="module")
def demo_server() -> Iterator[DemoServer]:
    """An instant demo server (short heartbeat interval), shared by the tests of a module."""
    with DemoServer(instant=True, heartbeat=0.1) as server:
        yield server


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
