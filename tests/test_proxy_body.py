"""The wire proxy bounds request bodies: a clear 413, nothing sent upstream, no big body kept."""

from __future__ import annotations

import io
import json

import httpx
import pytest
from sse_scripts import mmsp_event, mmsp_text, script_server

import mmsp_notebook as mn
from mmsp_notebook import DemoServerError
from mmsp_notebook.demo import WireProxy
from mmsp_notebook.wire.proxy import KEEP_REQUEST, MAX_BODY

LIMIT = 1024 * 1024


@pytest.fixture
def upstream():
    received = []

    def script(request, auth):
        received.append(request)
        return [*mmsp_text("ok"), mmsp_event(stop=True)]

    with script_server(script) as url:
        yield url, received


def test_a_body_over_the_limit_is_refused_with_413_and_not_forwarded(upstream):
    url, received = upstream
    big = json.dumps({"model": "m", "pad": "x" * (2 * LIMIT)}).encode()
    with WireProxy(url, max_body=LIMIT) as proxy:
        declared = httpx.post(proxy.base_url + "/stream", content=big, headers={"content-type": "application/json"})

        def chunks():  # no Content-Length: refused once the limit is passed while reading
            for start in range(0, len(big), 65536):
                yield big[start:start + 65536]

        streamed = httpx.post(proxy.base_url + "/stream", content=chunks())
        small = httpx.post(proxy.base_url + "/stream", json={"model": "m", "messages": [], "config": {}})
        records = proxy.transcripts
    for response in (declared, streamed):
        assert response.status_code == 413
        error = response.json()["error"]
        assert error["type"] == "RequestTooLarge" and "up to 1,048,576 bytes" in error["message"]
        assert "not sent upstream" in error["message"]
    assert small.status_code == 200
    assert len(received) == 1  # only the small one reached the upstream
    assert [(r.status, r.outcome) for r in records][:2] == [(413, "refused"), (413, "refused")]
    assert all(r.request == {"bytes": r.request["bytes"]} for r in records[:2])


def test_a_turn_through_the_proxy_says_why_its_request_was_refused(fresh_session, upstream):
    url, received = upstream
    with WireProxy(url, max_body=LIMIT) as proxy:
        turn = mn.ask("x" * (2 * LIMIT), model="m", client_type="mmsp", base_url=proxy.base_url,
                      stream=io.StringIO())
    assert turn.status == "error" and "413" in turn.error_message and "1,048,576 bytes" in turn.error_message
    assert received == []


def test_a_large_allowed_body_is_forwarded_whole_but_not_kept(upstream):
    url, received = upstream
    body = {"model": "m", "messages": [], "config": {}, "pad": "y" * (KEEP_REQUEST + 10)}
    with WireProxy(url, max_body=8 * LIMIT) as proxy:
        response = httpx.post(proxy.base_url + "/stream", json=body)
        assert proxy.settle()
        [record] = proxy.transcripts
    assert response.status_code == 200 and received[0]["pad"] == body["pad"]
    assert set(record.request) == {"bytes", "model"}  # not the parsed body: a record stays small
    assert record.request["model"] == record.model == "m" and record.request["bytes"] > KEEP_REQUEST


def test_the_limit_is_checked(upstream):
    assert MAX_BODY == 32 * 1024 * 1024
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(DemoServerError, match="max_body is a number of bytes above 0"):
            WireProxy(upstream[0], max_body=bad)
