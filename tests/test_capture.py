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
