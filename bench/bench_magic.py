"""Benchmarks of the %%mmsp live view, measured side by side in one run.

1. Bytes sent to the front end for a 20,000-token demo answer: this view (coalesced ops over the
   widget comm + the one final static rendering) vs the naive way (update a Markdown display with
   the whole text on every delta). Goal: <= 3x the answer's own size (+ a constant), >= 100x less
   than naive.
2. Overhead: consuming the same instant-mode demo stream with the live view (comm captured) vs bare
   iteration over mmsp's stream. Goal: <= 1.15x.
3. Front-end message rate: <= 30 per second, and a final update always sent.
4. Static output size per turn and per exported notebook (``--static-only`` runs this part alone).

Run: ``.venv/bin/python bench/bench_magic.py [--tokens 20000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from IPython.core.interactiveshell import InteractiveShell
from jupyter_client.session import json_packer as pack

import mmsp_notebook.views.live as live_mod
from mmsp_notebook.engine import session as _session
from mmsp_notebook.engine.launch import launch
from mmsp_notebook.engine.worker import run_sync
from mmsp_notebook.views.live import WidgetLive, drive


class CountingPublisher:
    """Stands in for the kernel's display publisher: counts the JSON bytes of every publish."""

    def __init__(self) -> None:
        self.bytes = 0
        self.count = 0
        self.times: list[float] = []
        self.main_cpu = 0.0

    def publish(self, data: Any, metadata: Any = None, source: Any = None, *, transient: Any = None,
                update: bool = False, **kw: Any) -> None:
        self.bytes += len(pack({"data": data, "metadata": metadata or {}, "transient": transient or {}}))
        self.count += 1
        self.times.append(time.monotonic())

    def clear_output(self, wait: bool = False) -> None:
        pass


RATE = live_mod.UPDATES_PER_SECOND  # the live view's update cap (--rate)
BASE_URL: str | None = None  # the demo server, in a process of its own so it does not share our GIL


def start_server() -> Any:
    """The demo server in a process of its own, on a CPU of its own where the machine has two or more.

    The client measured (both the bare iteration and the live view, with its worker and main thread)
    then runs on the other CPUs, so the server's own work never competes with what is measured.
    """
    import os
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "mmsp_notebook.demo", "--port", "0", "--instant"],
                            stdout=subprocess.PIPE, text=True)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2:
        os.sched_setaffinity(proc.pid, {cpus[0]})
        os.sched_setaffinity(0, set(cpus[1:]))
        print(f"demo server on CPU {cpus[0]}, client on CPU(s) {cpus[1:]}")
    line = proc.stdout.readline()
    global BASE_URL
    BASE_URL = line.strip().rsplit(" ", 1)[-1]
    return proc


_current: list[CountingPublisher] = []  # where the kernel's one TurnView counts its messages now


def live_turn(model: str) -> tuple[Any, CountingPublisher, float]:
    """One %%mmsp turn with the live view, counting every byte it publishes.

    As in a kernel, one TurnView serves every turn (its front-end code crosses once per kernel, when
    it is first shown: not counted per turn, see RESULTS.md).
    """
    shell = InteractiveShell.instance()
    pub = CountingPublisher()
    shell.display_pub = pub
    _current[:] = [pub]
    view = live_mod._shared_view
    if view is None or not getattr(view, "_bench_counted", False):
        view = live_mod._turn_view(None)
        original = view.comm.send

        def send(data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
            counter = _current[0]
            counter.bytes += len(pack(data))
            counter.count += 1
            counter.times.append(time.monotonic())
            return original(data=data, metadata=metadata, buffers=buffers)

        view.comm.send = send
        view._bench_counted = True
    pub.bytes = pub.count = 0
    pub.times.clear()
    live = WidgetLive()
    started = time.perf_counter()
    cpu = time.thread_time()
    run, future = launch("Tell me a long story", model=model, trace=False, base_url=BASE_URL, client_type="mmsp",
                         new=True)
    turn = drive(run, future, live, rate=RATE)
    elapsed = time.perf_counter() - started
    pub.main_cpu = time.thread_time() - cpu  # what the main thread spent: repaints and the final rendering
    return turn, pub, elapsed


def engine_turn(model: str) -> float:
    """The same turn with no view at all: the stream fed into the turn state, the main thread waiting."""
    started = time.perf_counter()
    _, future = launch("Tell me a long story", model=model, trace=False, base_url=BASE_URL, client_type="mmsp",
                       new=True)
    future.result()
    return time.perf_counter() - started


def naive_bytes(turn: Any) -> tuple[int, int]:
    """The naive way, done for real: a Markdown display updated with the whole text on every delta."""
    from IPython.display import Markdown, display

    shell = InteractiveShell.instance()
    pub = CountingPublisher()
    shell.display_pub = pub
    handle = display(Markdown(""), display_id=True)
    text = ""
    for event in turn.events:
        for item in event["content_items"]:
            if item["type"] in ("text.delta", "thinking.delta"):
                text += item.get("text") or item.get("thinking") or ""
                handle.update(Markdown(text))
    return pub.bytes, pub.count


PROMPT = {"role": "user", "content_items": [{"type": "text.done", "text": "Tell me a long story"}]}


_clients: dict[bool, Any] = {}


async def bare(model: str, stateful: bool) -> int:
    """Iterate mmsp's stream with nothing else: same worker loop, one client kept (as the magic keeps one)."""
    import mmsp

    client = _clients.get(stateful)
    if client is None:
        client = _clients[stateful] = mmsp.AutoLLMClient(model, base_url=BASE_URL, client_type="mmsp")
    client.clear_history()
    n = 0
    if stateful:
        stream = client.streaming_response_stateful(dict(PROMPT), {})
    else:
        stream = client.streaming_response([dict(PROMPT)], {})
    async for _event in stream:
        n += 1
    return n


def static_sizes() -> None:
    """4. The static output of finished turns, per turn and per exported notebook: the stylesheet
    each output carries now (the rules of the classes it uses) side by side with the whole turn
    stylesheet every output used to embed; and an answer of 10 MB (its HTML is cut)."""
    import io

    import nbformat
    from nbconvert import HTMLExporter

    import mmsp_notebook as m
    from mmsp_notebook.engine.tools import ToolSet
    from mmsp_notebook.views import html as H
    from mmsp_notebook.views.model import present_view, view_model

    tools = ToolSet({"get_weather": lambda city: f"18 degrees and sunny in {city}"})
    prompts = [("Explain streaming APIs", {}), ("What's the weather in Paris?", {"tools": tools}),
               ("draw a lighthouse", {}), ("Summarize notebooks", {}), ("hello", {"model": "demo+cut-text"}),
               ("What's the weather in Rome?", {"tools": tools})]
    outputs_now, outputs_before = [], []
    for prompt, kw in prompts:
        turn = m.ask(prompt, stream=io.StringIO(), **kw)
        body = H.turn_markup(view_model(turn))
        now = H.render_html(turn)
        before = f"<style>{H.CSS}</style>{body}"  # the whole turn stylesheet in every output, no copy script
        outputs_now.append((turn, now))
        outputs_before.append((turn, before))
        print(f"static turn {prompt[:28]!r:32} {len(before):>8,} bytes before, {len(now):>8,} now "
              f"(stylesheet {len(H.CSS):,} -> {len(H.css_for(now)):,})")

    def export(outputs: list[Any]) -> int:
        nb = nbformat.v4.new_notebook()
        for turn, markup in outputs:
            cell = nbformat.v4.new_code_cell("%%mmsp\n...")
            cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": markup,
                                                                          "text/plain": turn.summary()})]
            nb.cells.append(cell)
        body, _ = HTMLExporter().from_notebook_node(nb)
        return len(body.encode())

    empty = export([])
    b, n = export(outputs_before), export(outputs_now)
    print(f"6-turn notebook, nbconvert HTML: {b:,} bytes before, {n:,} now ({empty:,} of them nbconvert's page); "
          f"the turns' own part {b - empty:,} -> {n - empty:,} bytes ({(b - empty) / (n - empty):.2f}x smaller)")
    text = "word " * 2_000_000
    huge = H.render_html(None, present_view({"status": "complete", "items": [
        {"i": 0, "kind": "text", "status": "done", "text": text}]}))
    print(f"a {len(text):,}-character answer: static HTML {len(huge):,} bytes (cut at {H.HTML_TEXT_LIMIT:,} characters)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--static-only", action="store_true", help="only the static output sizes (4.)")
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--rate", type=float, default=live_mod.UPDATES_PER_SECOND,
                        help="live view updates per second at most")
    args = parser.parse_args()
    if args.static_only:
        _session._session = _session.Session()
        _session._session.settings.demo_instant = True
        try:
            static_sizes()
        finally:
            _session._session.stop_demo()
        return
    global RATE
    RATE = args.rate
    sess = _session.Session()
    _session._session = sess
    proc = start_server()
    model = f"demo+tokens={args.tokens}"
    try:
        # 1. bytes, at two sizes so the per-byte slope and the constant can be told apart
        sizes = {}
        for tokens in (args.tokens // 4, args.tokens):
            turn, pub, _ = live_turn(f"demo+tokens={tokens}")
            answer = len(turn.text.encode()) + len(turn.thinking.encode())
            sizes[tokens] = (answer, pub.bytes, pub.count, turn)
        (a1, b1, _, _), (a2, b2, count, turn) = sizes[args.tokens // 4], sizes[args.tokens]
        slope = (b2 - b1) / (a2 - a1)
        constant = b2 - slope * a2
        naive, naive_updates = naive_bytes(turn)
        print(f"answer size: {a2:,} bytes ({turn.usage['response_tokens']:,} response tokens)")
        print(f"live view: {b2:,} bytes in {count} messages = {b2 / a2:.2f}x the answer")
        print(f"  fit over {args.tokens // 4:,} and {args.tokens:,} tokens: {slope:.3f} bytes per answer byte"
              f" + {constant:,.0f} bytes constant")
        print(f"naive Markdown updates: {naive:,} bytes in {naive_updates:,} updates = {naive / a2:.1f}x the answer")
        print(f"naive / live view: {naive / b2:,.0f}x")

        # 2. overhead, interleaved rounds against the same server
        live_times, bare_times, stateful_times, engine_times, main_cpu = [], [], [], [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            run_sync(bare(model, stateful=False))
            bare_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            run_sync(bare(model, stateful=True))
            stateful_times.append(time.perf_counter() - started)
            engine_times.append(engine_turn(model))
            _, pub, elapsed = live_turn(model)
            live_times.append(elapsed)
            main_cpu.append(pub.main_cpu)
        b, st, en, lv, mc = (statistics.median(x) for x in (bare_times, stateful_times, engine_times, live_times,
                                                             main_cpu))
        print(f"bare streaming_response: median {b * 1000:.0f} ms; bare streaming_response_stateful: median"
              f" {st * 1000:.0f} ms; %%mmsp live view: median {lv * 1000:.0f} ms ({args.rounds} rounds)")
        print(f"  live view / bare: {lv / b:.3f}x; live view / bare stateful: {lv / st:.3f}x")
        print(f"  where it goes: the turn with no view (stream fed into the turn state) {en * 1000:.0f} ms ="
              f" {en / b:.3f}x bare; the live view's main thread (repaints + final static rendering)"
              f" {mc * 1000:.1f} ms CPU per turn")

        # 3. message rate: instant, and a paced stream lasting several seconds
        for label, m in (("instant", model), ("paced 3000 tok/s", f"demo+tokens={args.tokens // 2}+tps=3000")):
            turn, pub, elapsed = live_turn(m)
            times = pub.times
            worst = max(sum(1 for t in times if s <= t < s + 1.0) for s in times) if times else 0
            final_sent = pub.count > 0 and times[-1] >= turn.steps[-1].ended
            print(f"{label}: {pub.count} messages in {elapsed:.2f} s; most in any 1 s window: {worst};"
                  f" final update sent after the stream ended: {final_sent}")
    finally:
        proc.terminate()
        proc.wait(5)


if __name__ == "__main__":
    main()
