"""Generate a synthetic corpus of mmsp traces (and timing sidecars) for benchmarking, offline.

Files are byte-compatible with mmsp's Tracer: ``{"history": [...], "config": {..., "model"},
"timestamp": iso}`` indented by 2 with non-ASCII kept, bytes as base64 text; one file per
conversation, ``shard_XX/agentK/conversation_NNNNN.json``. Each conversation has ``--turns``
assistant turns with realistic content: user prompts of a few hundred to ~1,500 characters,
answers of a few hundred to a few thousand characters, thinking with a signature in about half
the turns, tool calls (followed by a tool result) in about a quarter, a small base64 PNG in about
2%, and ``length`` truncation in about 3%. Half of the conversations get a timing sidecar
(``.timing.jsonl``, the format of :mod:`mmsp_notebook.core.store`) with per-event timings, and in
those about 2% of attempts fail (an extra ``error`` record with ``message_index`` null).

Other corpus shapes (``--shape``), the same layout and sidecars, each stressing the loader
differently:

* ``agent`` — long agent traces: 50 to 80 turns a file, most answers one to three tool calls
  with code in their arguments, tool results (code, JSON, logs) as the user messages;
* ``tiny`` — many tiny files: one or two short turns each;
* ``large`` — large payloads: 5 to 60 KB of thinking and of Markdown text per answer;
* ``images`` — base64 images in the history: one or two PNG data URLs of 30 to 300 KB in user
  messages, a generated image in some answers.

Their text is English Markdown (newlines, quotes and code, so JSON escapes, and a few non-ASCII
characters), the way models write; ``mixed`` keeps its word salad with non-ASCII in every line.

Usage::

    .venv/bin/python bench/gen_corpus.py --out /tmp/mmsp_trace_corpus --files 10000 --turns 10
    .venv/bin/python bench/gen_corpus.py --out /tmp/mmsp_agent --shape agent --files 1000

Deterministic for a given ``--seed``. Shards of 1,000 files each let a benchmark load 1k, 5k or
10k files from one corpus.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    import orjson

    def _dump_trace(obj: Any) -> bytes:
        # the same bytes as json.dump(obj, indent=2, ensure_ascii=False), much faster
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2)

    def _dump_line(obj: Any) -> bytes:
        return orjson.dumps(obj) + b"\n"

except ImportError:  # pragma: no cover

    def _dump_trace(obj: Any) -> bytes:
        return json.dumps(obj, indent=2, ensure_ascii=False).encode()

    def _dump_line(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


# (model, client_type): registry models (priced) and one local model without a price
MODELS = [
    ("gemini-3.8-flash", "google-official"),
    ("gemini-4-argon", "google-official"),
    ("glm-5.3", "zai-official"),
    ("deepseek-v4-pro", "deepseek-official"),
    ("local-llama-70b", "openai-chat"),
]
# per model: (ttft mean s, decode tokens/s)
SPEED = {
    "gemini-3.8-flash": (0.35, 180.0),
    "gemini-4-argon": (0.9, 70.0),
    "glm-5.3": (0.6, 90.0),
    "deepseek-v4-pro": (1.2, 45.0),
    "local-llama-70b": (0.25, 30.0),
}
TOOLS = [
    {"name": "get_weather", "description": "Current weather for a city", "parameters": {"type": "object"}},
    {"name": "search_docs", "description": "Search the documentation", "parameters": {"type": "object"}},
    {"name": "run_sql", "description": "Run a read-only SQL query", "parameters": {"type": "object"}},
]

_WORDS = (
    "the model streams each content item as deltas and closes it with one done item then a stop "
    "event carries usage and the finish reason a tool call arrives as argument fragments parsed "
    "once complete thinking comes first with a signature kept for the next turn latency tokens "
    "cache prompt response agent harness trace replay café naïve 数据 流式 响应 résumé über"
).split()


def _lorem(rng: random.Random, n_chars: int = 400_000) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        sentence = " ".join(rng.choices(_WORDS, k=rng.randint(6, 18))).capitalize() + ". "
        out.append(sentence)
        size += len(sentence)
    return "".join(out)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lorem = _lorem(self.rng)
        png = bytes(range(256)) * 40
        self.images = [base64.b64encode(png[: n]).decode() for n in (2048, 4096, 8192, 12000)]

    def big_image(self, n_bytes: int) -> str:
        """Base64 text of ``n_bytes`` of image-like bytes (a slice of one random block)."""
        if not hasattr(self, "_blob"):
            self._blob = base64.b64encode(self.rng.randbytes(300_000)).decode()
        n = (n_bytes * 4 // 3) // 4 * 4
        start = self.rng.randrange(0, (len(self._blob) - n) // 4 + 1) * 4
        return self._blob[start : start + n]

    def text(self, lo: int, hi: int) -> str:
        n = self.rng.randint(lo, hi)
        start = self.rng.randrange(0, len(self.lorem) - n - 1)
        return self.lorem[start : start + n]

    def conversation(
        self, k: int, trace_id: str, n_turns: int, t0_ms: int, sidecar: bool
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """One conversation (Tracer JSON object) and its sidecar records (empty without sidecar)."""
        rng = self.rng
        model, client = MODELS[k % len(MODELS)]
        ttft_mean, speed = SPEED[model]
        config: dict[str, Any] = {
            "max_tokens": rng.choice([2048, 4096, 8192]),
            "temperature": rng.choice([0.0, 0.2, 0.7, 1.0]),
            "thinking_level": rng.choice(["low", "medium", "high"]),
            "tools": TOOLS[: rng.randint(1, 3)],
            "trace_id": trace_id,
        }
        history: list[dict[str, Any]] = []
        records: list[dict[str, Any]] = []
        now = t0_ms
        prompt_tokens = 0
        pending_tool: dict[str, Any] | None = None
        for turn in range(n_turns):
            if pending_tool is not None:
                user_items = [
                    {"type": "tool_result.done", "text": self.text(80, 800), "tool_call_id": pending_tool["tool_call_id"]}
                ]
            else:
                user_items = [{"type": "text.done", "text": self.text(100, 1500)}]
            history.append({"role": "user", "content_items": user_items, "created_at": now})
            prompt_tokens += sum(len(i["text"]) for i in user_items) // 4 + 20
            sent = now + rng.randint(1, 20)
            # an attempt that failed before this turn succeeded (sidecar only)
            if sidecar and rng.random() < 0.02:
                fail_ms = rng.uniform(50, 3000)
                records.append(
                    {
                        "trace_id": trace_id, "turn": turn, "message_index": None, "model": model,
                        "client_type": client, "status": rng.choice(["error", "error", "incomplete"]),
                        "error": {"type": "UpstreamError", "message": "503 Service Unavailable"},
                        "started_at": float(sent), "ttft_ms": None, "total_ms": fail_ms, "usage": None,
                        "finish_reason": None, "events": [],
                    }
                )
                sent += int(fail_ms) + 500
            items: list[dict[str, Any]] = []
            if rng.random() < 0.5:
                items.append(
                    {"type": "thinking.done", "thinking": self.text(200, 2000), "fidelity": {"signature": "sig_" + "A" * 120}}
                )
            items.append({"type": "text.done", "text": self.text(300, 3000)})
            finish = "stop"
            pending_tool = None
            if rng.random() < 0.25:
                call = {
                    "type": "tool_call.done",
                    "name": config["tools"][0]["name"],
                    "arguments": {"query": self.text(10, 80), "limit": rng.randint(1, 50)},
                    "tool_call_id": f"call_{k}_{turn}",
                }
                items.append(call)
                pending_tool = call
                finish = "tool_call"
            if rng.random() < 0.02:
                items.append({"type": "inline_data.done", "data": rng.choice(self.images), "mime_type": "image/png"})
            if finish == "stop" and rng.random() < 0.03:
                finish = "length"
            thoughts = sum(len(i.get("thinking", "")) for i in items) // 4 or None
            response = sum(len(i.get("text", "")) for i in items) // 4 + 5
            cached = (prompt_tokens // 2) if turn > 0 and rng.random() < 0.7 else 0
            usage = {
                "cached_tokens": cached if model != "local-llama-70b" else None,
                "prompt_tokens": prompt_tokens - cached,
                "thoughts_tokens": thoughts,
                "response_tokens": response,
            }
            out_tokens = (thoughts or 0) + response
            ttft = max(0.05, rng.gauss(ttft_mean, ttft_mean / 4)) * 1000
            total = ttft + out_tokens / speed * 1000 * rng.uniform(0.8, 1.25)
            ended = int(sent + total)
            message = {"role": "assistant", "content_items": items, "usage_metadata": usage, "finish_reason": finish, "created_at": ended}
            history.append(message)
            prompt_tokens += response + (thoughts or 0)
            if sidecar:
                events: list[list[Any]] = []
                t = ttft
                span = total - ttft
                for it in items:
                    field = {"text.done": "text", "thinking.done": "thinking"}.get(it["type"])
                    kind = it["type"][:-5]
                    if field:
                        n = len(it[field])
                        chunks = max(1, n // 40)
                        for c in range(chunks):
                            events.append([round(t, 1), kind + ".delta", 40 if c < chunks - 1 else n - 40 * (chunks - 1)])
                            t += span / max(1, out_tokens) * 10
                        events.append([round(t, 1), it["type"], n])
                    elif it["type"] == "tool_call.done":
                        raw = json.dumps(it["arguments"])
                        events.append([round(t, 1), "tool_call.delta", len(raw)])
                        events.append([round(t, 1), "tool_call.done", len(raw)])
                    else:
                        size = len(it["data"]) * 3 // 4
                        events.append([round(t, 1), "inline_data.delta", size])
                        events.append([round(t, 1), "inline_data.done", size])
                events.append([round(total, 1), "stop", 0])
                records.append(
                    {
                        "trace_id": trace_id, "turn": turn, "message_index": len(history) - 1, "model": model,
                        "client_type": client, "status": "complete", "error": None, "started_at": float(sent),
                        "ttft_ms": round(ttft, 1), "total_ms": round(total, 1), "usage": usage,
                        "finish_reason": finish, "events": events,
                    }
                )
            now = ended + rng.randint(2_000, 60_000)
        trace = {
            "history": history,
            "config": {**config, "model": model},
            "timestamp": datetime.fromtimestamp(now / 1000, tz=UTC).replace(tzinfo=None).isoformat(),
        }
        return trace, records


# ------------------------------------------------------------------------------ other shapes
#: shape -> (turns per file lo, hi); "mixed" takes --turns
SHAPES: dict[str, tuple[int, int]] = {"mixed": (0, 0), "agent": (50, 80), "tiny": (1, 2), "large": (3, 5), "images": (3, 6)}

_PROSE_WORDS = (
    "the model reads the file and the test then changes one function so that the loader skips a "
    "damaged trace names it and goes on with the next one while the sidecar keeps its timing for "
    "every turn streamed error rates stay real because failed attempts are rows too"
).split()
_ODD = ["—", "“quoted”", "café", "naïve", "→", "🙂", "e.g.", "(see below)", "`load_turns`", '"quotes"']
_CODE = [
    'def load(path: str) -> dict:\n    with open(path, "rb") as fh:\n        return json.loads(fh.read())\n',
    'for row in rows:\n    if row["status"] != "complete":\n        print(f"{row[\'trace_id\']}: {row[\'error\']}")\n',
    '{"ok": true, "rows": 12, "columns": ["trace_id", "turn", "latency"], "elapsed_ms": 41.5}\n',
    "Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\nKeyError: 'history'\n",
    "$ pytest -q tests/test_traces.py\n....................                [100%]\n20 passed in 1.84s\n",
]


def _prose(rng: random.Random, n_chars: int) -> str:
    """English Markdown of about ``n_chars`` characters: paragraphs, lists, code blocks."""
    out: list[str] = []
    size = 0
    while size < n_chars:
        r = rng.random()
        if r < 0.12:
            block = "```python\n" + "".join(rng.choices(_CODE, k=rng.randint(1, 3))) + "```\n\n"
        elif r < 0.25:
            block = "".join(f"- {' '.join(rng.choices(_PROSE_WORDS, k=rng.randint(4, 12)))}\n" for _ in range(rng.randint(2, 5))) + "\n"
        else:
            words = rng.choices(_PROSE_WORDS, k=rng.randint(25, 70))
            for _ in range(len(words) // 40):
                words[rng.randrange(len(words))] = rng.choice(_ODD)
            block = " ".join(words).capitalize() + ".\n\n"
        out.append(block)
        size += len(block)
    return "".join(out)[:n_chars]


class _Texts:
    """Slices of one long prose text (fast to cut, different for each use)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.prose = _prose(rng, 600_000)
        self.code = "".join(rng.choices(_CODE, k=4000))

    def text(self, lo: int, hi: int, code: bool = False) -> str:
        src = self.code if code else self.prose
        n = min(self.rng.randint(lo, hi), len(src) - 2)
        start = self.rng.randrange(0, len(src) - n - 1)
        return src[start : start + n]


def _events(items: list[dict[str, Any]], ttft: float, total: float, out_tokens: int) -> list[list[Any]]:
    """Sidecar events of one answer: deltas every ~40 characters, a done per item, the stop."""
    events: list[list[Any]] = []
    t = ttft
    step = (total - ttft) / max(1, out_tokens) * 10
    for it in items:
        kind = it["type"][:-5]
        field = {"text": "text", "thinking": "thinking"}.get(kind)
        if field:
            n = len(it[field])
            chunks = max(1, min(n // 40, 400))
            size = max(1, n // chunks)
            for _c in range(chunks):
                events.append([round(t, 1), kind + ".delta", size])
                t += step
            events.append([round(t, 1), it["type"], n])
        elif kind == "tool_call":
            raw = len(json.dumps(it["arguments"]))
            events += [[round(t, 1), "tool_call.delta", raw], [round(t, 1), "tool_call.done", raw]]
        else:
            size = len(it.get("data", "")) * 3 // 4
            events += [[round(t, 1), "inline_data.delta", size], [round(t, 1), "inline_data.done", size]]
    events.append([round(total, 1), "stop", 0])
    return events


def shaped_conversation(
    gen: _Gen, shape: str, k: int, trace_id: str, t0_ms: int, sidecar: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One conversation of a shape other than ``mixed`` and its sidecar records."""
    rng = gen.rng
    texts: _Texts = getattr(gen, "texts", None) or _Texts(rng)
    gen.texts = texts  # type: ignore[attr-defined]
    model, client = MODELS[k % len(MODELS)]
    ttft_mean, speed = SPEED[model]
    config: dict[str, Any] = {"max_tokens": 8192, "temperature": 0.2, "thinking_level": "medium", "trace_id": trace_id,
                              "tools": TOOLS if shape == "agent" else TOOLS[:1]}
    history: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    now = t0_ms
    prompt_tokens = 0
    pending: list[dict[str, Any]] = []
    lo, hi = SHAPES[shape]
    n_turns = rng.randint(lo, hi)
    for turn in range(n_turns):
        if pending:
            user_items = [{"type": "tool_result.done", "text": texts.text(200, 3000, code=True), "tool_call_id": c["tool_call_id"]}
                          for c in pending]
        elif shape == "tiny":
            user_items = [{"type": "text.done", "text": texts.text(20, 300)}]
        else:
            user_items = [{"type": "text.done", "text": texts.text(200, 1500)}]
        if shape == "images":
            for _ in range(rng.randint(1, 2)):
                user_items.append({"type": "image_url.done", "image_url": "data:image/png;base64," + gen.big_image(rng.randint(30_000, 300_000))})
        history.append({"role": "user", "content_items": user_items, "created_at": now})
        prompt_tokens += sum(len(i.get("text", "")) for i in user_items) // 4 + 20
        sent = now + rng.randint(1, 20)
        items: list[dict[str, Any]] = []
        pending = []
        if shape == "agent":
            if rng.random() < 0.5:
                items.append({"type": "thinking.done", "thinking": texts.text(100, 800), "fidelity": {"signature": "sig_" + "A" * 200}})
            items.append({"type": "text.done", "text": texts.text(50, 400)})
            if turn < n_turns - 1:
                for j in range(rng.randint(1, 3)):
                    call = {"type": "tool_call.done", "name": rng.choice(TOOLS)["name"], "tool_call_id": f"call_{k}_{turn}_{j}",
                            "arguments": {"path": f"src/module_{rng.randint(1, 99)}.py", "code": texts.text(100, 1500, code=True)}}
                    items.append(call)
                    pending.append(call)
        elif shape == "large":
            if rng.random() < 0.7:
                items.append({"type": "thinking.done", "thinking": texts.text(5_000, 60_000), "fidelity": {"signature": "sig_" + "B" * 300}})
            items.append({"type": "text.done", "text": texts.text(5_000, 60_000)})
        else:
            if shape == "tiny" and rng.random() < 0.3:
                items.append({"type": "thinking.done", "thinking": texts.text(20, 300)})
            items.append({"type": "text.done", "text": texts.text(20, 500) if shape == "tiny" else texts.text(200, 1500)})
            if shape == "images" and rng.random() < 0.2:
                items.append({"type": "inline_data.done", "data": gen.big_image(rng.randint(50_000, 200_000)), "mime_type": "image/png"})
        finish = "tool_call" if pending else ("length" if rng.random() < 0.03 else "stop")
        thoughts = sum(len(i.get("thinking", "")) for i in items) // 4 or None
        response = sum(len(i.get("text", "")) for i in items) // 4 + 5
        cached = prompt_tokens // 2 if turn > 0 else 0
        usage = {"cached_tokens": cached if model != "local-llama-70b" else None, "prompt_tokens": prompt_tokens - cached,
                 "thoughts_tokens": thoughts, "response_tokens": response}
        out_tokens = (thoughts or 0) + response
        ttft = max(0.05, rng.gauss(ttft_mean, ttft_mean / 4)) * 1000
        total = ttft + out_tokens / speed * 1000 * rng.uniform(0.8, 1.25)
        ended = int(sent + total)
        history.append({"role": "assistant", "content_items": items, "usage_metadata": usage, "finish_reason": finish, "created_at": ended})
        prompt_tokens += out_tokens
        if sidecar:
            records.append({"trace_id": trace_id, "turn": turn, "message_index": len(history) - 1, "model": model,
                            "client_type": client, "status": "complete", "error": None, "started_at": float(sent),
                            "ttft_ms": round(ttft, 1), "total_ms": round(total, 1), "usage": usage,
                            "finish_reason": finish, "events": _events(items, ttft, total, out_tokens)})
        now = ended + rng.randint(500, 30_000)
    trace = {"history": history, "config": {**config, "model": model},
             "timestamp": datetime.fromtimestamp(now / 1000, tz=UTC).replace(tzinfo=None).isoformat()}
    return trace, records


def generate(out: str | os.PathLike[str], files: int = 10_000, turns: int = 10, seed: int = 7, shard_size: int = 1000,
             shape: str = "mixed", tool_errors: bool = False) -> Path:
    """Write ``files`` traces under ``out`` (``turns`` turns each for ``mixed``, the shape's own
    number otherwise); sidecars for every other trace. ``tool_errors``: every 23rd conversation's
    tool results report an error (``error: …``); the random draws, so the rest, stay the same."""
    if shape not in SHAPES:
        raise ValueError(f"unknown corpus shape {shape!r}: one of {', '.join(SHAPES)}")
    root = Path(out)
    if root.exists():
        shutil.rmtree(root)
    gen = _Gen(seed)
    t0 = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp() * 1000)
    for k in range(files):
        start = t0 + k * 37_000  # conversations spread over a few days
        tid = f"shard_{k // shard_size:02d}/agent{k % 7}/conversation_{k:05d}"
        if shape == "mixed":
            trace, records = gen.conversation(k, tid, turns, start, sidecar=(k % 2 == 0))
        else:
            trace, records = shaped_conversation(gen, shape, k, tid, start, sidecar=(k % 2 == 0))
        if tool_errors and k % 23 == 5:
            for message in trace["history"]:
                for item in message["content_items"] if message["role"] == "user" else ():
                    if item["type"] == "tool_result.done":
                        item["text"] = "error: TimeoutError: the service did not answer\n" + item["text"]
        base = root / tid
        base.parent.mkdir(parents=True, exist_ok=True)
        base.with_suffix(".json").write_bytes(_dump_trace(trace))
        if records:
            with open(str(base) + ".timing.jsonl", "wb") as fh:
                for r in records:
                    fh.write(_dump_line({"v": 1, **r}))
    return root


def ensure(out: str | os.PathLike[str], meta: dict[str, Any], regen: bool = False, **options: Any) -> bool:
    """Generate a corpus with ``generate(out, **options)`` unless one described by ``meta`` is there
    already (``<out>.meta.json``, written after it); returns whether it generated one."""
    root = Path(out)
    meta_path = root.with_name(root.name + ".meta.json")
    if not regen and root.is_dir() and meta_path.is_file():
        try:
            if json.loads(meta_path.read_text()) == meta:
                return False
        except ValueError:
            pass
    t = time.perf_counter()
    generate(root, **options)
    meta_path.write_text(json.dumps(meta))
    print(f"generated {root} ({options.get('files', 10_000)} files, {options.get('shape', 'mixed')}) "
          f"in {time.perf_counter() - t:.1f} s", flush=True)
    return True


def main(argv: list[str] | None = None) -> None:
    """Command line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/mmsp_trace_corpus")
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--shard-size", type=int, default=1000)
    ap.add_argument("--shape", default="mixed", choices=list(SHAPES))
    args = ap.parse_args(argv)
    t = time.perf_counter()
    root = generate(args.out, args.files, args.turns, args.seed, args.shard_size, args.shape)
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    print(f"wrote {args.files} {args.shape} traces to {root} ({size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f}s")


if __name__ == "__main__":
    main()
