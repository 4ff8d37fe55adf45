"""The records a loopback server (the demo server, the wire proxy) keeps of the requests it answered."""

from __future__ import annotations

from mmsp_notebook._loopback import MAX_LOG_BYTES, Transcript, TranscriptLog


def record(n: int, size: int, outcome: str = "complete") -> Transcript:
    t = Transcript(id=f"r{n}", endpoint="/v1/chat/completions", protocol="chat", model="m", request=None,
                   outcome=outcome)
    t.add(b"x" * size)
    return t


def test_the_log_keeps_the_newest_bodies_within_its_byte_bound():
    log: TranscriptLog[Transcript] = TranscriptLog(limit=200, max_bytes=1000)
    for n in range(5):
        log.add(record(n, 400))
    assert [r.id for r in log.all()] == ["r3", "r4"]  # (every body was kept: 2,000 bytes for a 1,000-byte bound)
    log.add(record(5, 5000))  # the newest is kept, whatever its size
    assert [r.id for r in log.all()] == ["r5"]


def test_a_record_still_streaming_is_not_dropped_and_the_count_limit_holds():
    log: TranscriptLog[Transcript] = TranscriptLog(limit=3, max_bytes=1000)
    log.add(record(0, 900, outcome="streaming"))
    log.add(record(1, 900))
    log.add(record(2, 900))
    assert [r.id for r in log.all()] == ["r0", "r2"]  # r1 finished and older than r2: dropped; r0 streams on
    for n in range(3, 7):
        log.add(record(n, 1))
    assert [r.id for r in log.all()] == ["r4", "r5", "r6"]  # at most `limit` records, as before
    assert TranscriptLog().max_bytes == MAX_LOG_BYTES >= 64 * 1024 * 1024
