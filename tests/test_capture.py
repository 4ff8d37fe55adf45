"""The wire of a turn (``wire/capture.py``): built from the proxy's records once the turn has ended."""

from __future__ import annotations

from mmsp_notebook.engine.launch import launch


def test_a_long_wire_reads_the_configured_keys_once_not_per_frame(fresh_session, monkeypatch):
    # (every frame is redacted; reading the environment for each one made a 20,000-token answer's
    # wire take seconds on the worker loop, after the stream had ended and before the turn returned)
    from mmsp_notebook.core import redact
    from mmsp_notebook.wire import capture

    run, future = launch("Tell me everything", model="demo+tokens=600+nothink", wire=True, sess=fresh_session)
    turn = future.result(60)
    assert turn.status == "complete" and len(turn.wire) > 600
    reads = []
    real = redact.secret_values

    def counted() -> list[str]:
        if getattr(redact._held, "secrets", None) is None:
            reads.append(1)  # the environment read, not keys held for a block of work
        return real()

    monkeypatch.setattr(redact, "secret_values", counted)
    monkeypatch.setattr(capture, "secret_values", counted)
    wire = capture.build_wire(turn, [exchange.record for exchange in turn.wire.exchanges])
    assert len(wire) == len(turn.wire) and wire.events == turn.wire.events
    assert len(reads) <= 2


def test_a_key_split_across_the_frames_of_a_long_wire_is_masked_in_every_frame(monkeypatch):
    # the frames are searched as one stream: a frame holding only a piece of a key (no head of it)
    # is still found by the events that carried it, and cut
    import json

    from mmsp_notebook.core.redact import REDACTED
    from mmsp_notebook.wire import capture
    from mmsp_notebook.wire.proxy import WireTranscript

    key = "sk-split-4b9e2d7a1c8f3e6b0a5d"
    monkeypatch.setenv("SPLIT_TEST_API_KEY", key)
    words = [f"w{i} " for i in range(3000)]
    words[1500:1503] = [f"here: {key[:9]}", key[9:20], key[20:] + " done"]  # no frame holds the key whole
    frames = [b"data: " + json.dumps({"object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": w}, "finish_reason": None}]}).encode() + b"\n\n" for w in words]
    record = WireTranscript(id="r1", endpoint="/v1/chat/completions", protocol="chat", model="m", request=None)
    for frame in frames:
        record.add(frame)
    record.status, record.outcome = 200, "complete"
    events = [{"event_type": "delta", "content_items": [{"type": "text.delta", "text": w}]} for w in words]
    times = list(record.times)
    exchange = capture._exchanges([(record.started - 1.0, events, times)], [record])[-1]
    shown = b"".join(frame.raw for frame in exchange.frames).decode()
    assert len(exchange.frames) == 3000 and exchange.pairs[1501] == 1501
    for piece in (key[:9], key[9:20], key[20:]):
        assert piece not in shown
    assert shown.count(REDACTED) >= 3 and "w1499 " in shown and " done" in shown
    assert [f.raw for i, f in enumerate(exchange.frames) if not 1500 <= i <= 1502] == \
        [f for i, f in enumerate(frames) if not 1500 <= i <= 1502]  # every other frame as it came
