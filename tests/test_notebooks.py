"""The teaching notebooks run offline in a real kernel and show what their prose promises."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from helpers import html_of as html
from helpers import text_of as text
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WIDGET = "application/vnd.jupyter.widget-view+json"


def run(name: str, tmp_path, monkeypatch, instant: bool = True) -> list:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:  # stored without outputs
        assert cell.cell_type != "code" or (not cell.outputs and cell.execution_count is None), name
    assert nb.cells[-1].cell_type == "markdown" and "## Try this" in nb.cells[-1].source
    if instant:
        monkeypatch.setenv("MMSP_NOTEBOOK_DEMO_INSTANT", "1")
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # the notebooks' own temporary folders
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def find(cells, needle: str):
    """The first code cell whose source contains ``needle``."""
    return next(cell for cell in cells if needle in cell.source)


def test_two_layers(tmp_path, monkeypatch):
    cells = run("two-layers.ipynb", tmp_path, monkeypatch)
    events = html(find(cells, "%%mmsp --events --tools"))
    assert re.search(r'<span>events </span><span class="mmsp-meta">\(\d+\)</span></summary>', events)
    assert '<details class="mmsp-events" open>' in events and '<table class="mmsp-events-table">' in events
    for kind in ("thinking.delta", "thinking.done", "tool_call.delta", "tool_call.done", "<td>stop</td>"):
        assert kind in events
    assert "'tool_call.delta': 4" in text(find(cells, "Counter("))
    assert "is not JSON yet" in text(find(cells, "json.loads(d["))
    assert "('get_weather', {'city': 'Paris'})" in text(find(cells, 'done[0]["name"]'))
    nostop = find(cells, "demo+nostop")
    assert "ended without a stop event" in html(nostop) and "<td>stop</td>" not in html(nostop)
    assert "incomplete | ended without a stop event" in text(find(cells, "print(cut.status"))
    assert "IncompleteStreamError" in text(find(cells, "print(cut.status"))
    dropped = text(find(cells, "print(dropped.status"))
    assert "incomplete" in dropped and "['thinking.done']" in dropped


def test_protocols(tmp_path, monkeypatch):
    cells = run("protocols.ipynb", tmp_path, monkeypatch)
    transcripts = {
        "openai-chat": ("/v1/chat/completions", "chat.completion.chunk"),
        "openai-responses": ("/v1/responses", "event: response.created"),
        "ant-messages": ("/v1/messages", "event: content_block_delta"),
        "mmsp": ("/v1/stream", "&quot;event_type&quot;:&quot;delta&quot;"),
    }
    for client_type, (path, raw) in transcripts.items():
        needle = f"--client-type {client_type}" if client_type != "mmsp" else "--chat mmsp"
        shown = html(find(cells, needle))
        assert "raw SSE frame" in shown and path in shown, client_type
        assert raw in shown.replace('"', "&quot;") or raw in shown, client_type
        assert "tool_call.done" in shown and "<b>stop</b>" in shown, client_type
    table = html(find(cells, "pd.DataFrame([{"))
    assert table.count("<td>22</td>") == 4  # the same number of UniEvents from four wires
    assert "mmsp 1:1" in table
    assert "[(" in text(find(cells, "quick_heartbeats.stop()")) and ": keep-alive" in text(find(cells, "quick_heartbeats.stop()"))
    assert "error APIError" in text(find(cells, "print(err.status")) and "model_not_found" in text(find(cells, "print(err.status"))
    finals = text(find(cells, "def essentials"))
    assert finals.count("tool calls [('get_weather', {'city': 'Paris'})]") == 4
    assert "all four equal: True" in finals


def test_tools(tmp_path, monkeypatch):
    cells = run("tools.ipynb", tmp_path, monkeypatch)
    one = html(find(cells, "-o one"))
    assert ">get_weather</code>" in one and '<pre class="mmsp-tool-output">19 degrees and clear in Paris</pre>' in one
    assert ">2 steps</span>" in one
    assert "tool_result.done" in text(find(cells, "for message in one.messages"))
    assert "Rome" in text(find(cells, "two.tool_calls"))
    failing = html(find(cells, "-o failing"))
    assert '<div class="mmsp-tool-result mmsp-err">' in failing and '<span class="mmsp-tool-result-label">error</span>' in failing
    assert "ConnectionError: market data feed unreachable for ACME" in failing
    bad = html(find(cells, "demo+bad-args"))
    assert "ToolCallArgumentParseError" in bad and "not a JSON object" in bad
    assert "error ToolCallArgumentParseError" in text(find(cells, "print(bad.status"))
    assert "19 degrees and clear in Lisbon" in text(find(cells, 'chat="py"'))


def test_multimodal(tmp_path, monkeypatch):
    cells = run("multimodal.ipynb", tmp_path, monkeypatch)
    assert '<img class="mmsp-img" src="data:image/png;base64,' in html(find(cells, "draw a lighthouse"))
    assert "image/png" in text(find(cells, "pic.images[0]"))
    assert '<audio class="mmsp-audio-player" controls src="data:audio/wav;base64,' in html(find(cells, "say good morning"))
    assert "0.60 s of audio" in text(find(cells, "clip = voice.audio[0]"))
    assert "embedding · 64 dims" in html(find(cells, "-m demo-embed"))
    similarity = html(find(cells, "similarity = pd.DataFrame"))
    assert "<table" in similarity and "The lighthouse guided ships home" in similarity and "1.000" in similarity


def test_chat(tmp_path, monkeypatch):
    cells = run("chat.ipynb", tmp_path, monkeypatch)
    # the live widget, then the conversation as static HTML for a saved notebook
    assert WIDGET in cells[0].outputs[0]["data"] and "text/html" in cells[0].outputs[-1]["data"]
    assert "'complete'" in text(find(cells, 'chat.send("Hello!'))
    assert "19 degrees and clear in Paris" in text(find(cells, "What's the weather in Paris?"))
    history = text(find(cells, "for message in chat.history"))
    assert "tool_result.done" in history and history.count("assistant") == 3
    assert "<table" in html(find(cells, "chat.turns[["))
    assert "'text.delta'" in text(find(cells, "chat.on_event("))
    stopped = text(find(cells, "slow.stop"))
    assert "cancelled" in stopped and "0 messages in the history" in stopped


def test_compare(tmp_path, monkeypatch):
    cells = run("compare.ipynb", tmp_path, monkeypatch)
    first = html(find(cells, "-o first"))
    assert first.count('<section class="mmsp-column" aria-label=') == 4 and 'class="mmsp-best"' in first
    assert first.count('data-status="complete"') == 3 and first.count('data-status="error"') == 1
    frame = html(find(cells, "first.frame[["))
    assert frame.count("complete") == 3 and "UpstreamError" in frame
    assert "fastest: demo+tps=400" in text(find(cells, "fastest ="))
    assert text(find(cells, "zip(weather.labels")).count("19 degrees and clear in Paris") == 2
    assert "prompt 7 ·" in html(find(cells, "My name is Ada.")) and "prompt 129 ·" in html(find(cells, "-o again"))
    history = html(find(cells, "%mmsp history --chat pair~demo+nothink"))
    assert history.count("<td>user</td>") == 2 and history.count("<td>assistant</td>") == 2 and "My name is Ada." in history
    loaded = html(find(cells, "traces.load_turns("))
    assert loaded.count("<td>complete</td>") == 2 and "demo+nothink" in loaded


def test_quickstart(tmp_path, monkeypatch):
    cells = run("quickstart.ipynb", tmp_path, monkeypatch)
    assert 'data-status="complete"' in html(find(cells, "%%mmsp -o first"))
    assert "complete stop" in text(find(cells, "print(first.status"))
    assert "def summarize" in html(find(cells, "--to-cell python"))
    assert "KeyError" in text(find(cells, 'prices["banana"]'))
    fixed = html(find(cells, "%mmsp fix"))
    assert "except KeyError" in fixed and 'prices["banana"]' in fixed.replace("&quot;", '"')
    assert 'data-status="complete"' in html(find(cells, "{Err}"))
    explained = text(find(cells, "{Err}"))
    assert "Python describes KeyError as “Mapping key not found.”" in explained and "try:" not in explained
    assert "incomplete" in text(find(cells, "cut.status"))


def test_explore(tmp_path, monkeypatch):
    cells = run("explore.ipynb", tmp_path, monkeypatch)
    stock = html(find(cells, 'traces.show("explore/stock")'))
    assert 'class="mmsp-root mmsp-static mmsp-conversation"' in stock and "<script" not in stock
    assert '<div class="mmsp-tool-result mmsp-err">' in stock and "ConnectionError: market data feed unreachable" in stock
    assert "step 1: " in stock and "TTFT" in stock
    chat1 = find(cells, 'traces.show("explore/chat_1")')
    assert "'failed'" in text(chat1) and "(sidecar only)" in html(chat1) and "UpstreamError" in html(chat1)
    shown = find(cells, "explorer = traces.explore(CACHE)").outputs[-1]["data"]
    assert WIDGET in shown and '<table class="mmsp-x-table">' in shown["text/html"]
    assert re.search(r"<Explorer: (\d+) of \1 turns>", shown["text/plain"])
    errors = text(find(cells, 'quick=["errors"]'))
    assert "same rows: True" in errors and "explore/bad_args" in errors and "RemoteProtocolError" in errors
    assert "explore/stock" in text(find(cells, 'quick=["tool_errors"]'))
    selected = find(cells, "select(0)")
    assert "'finish_reason': 'length'" in text(selected)
    page = selected.outputs[-1]["data"]["text/html"]
    assert 'aria-selected="true"' in page and "mmsp-conv-selected" in page and "⚠ truncated (length)" in page
    assert "complete length True" in text(find(cells, "mn.replay(explorer.selection"))

