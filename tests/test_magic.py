"""%%mmsp and %mmsp in a real kernel (nbclient, jupyter_client) and in IPython's terminal shell."""

from __future__ import annotations

import io
import json
import os
import re

import nbformat
import pytest
from helpers import html_of, text_of
from nbclient import NotebookClient
from tools import WEATHER_SOURCE, weather_in

WIDGET = "application/vnd.jupyter.widget-view+json"


def notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    return nb


def run_notebook(nb, tmp_path, monkeypatch, allow_errors=False):
    monkeypatch.setenv("MMSP_NOTEBOOK_DEMO_INSTANT", "1")
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=allow_errors,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


def assert_usage_error(cell) -> None:
    """The cell ended in a one-line UsageError, no traceback."""
    text = text_of(cell)
    assert "UsageError" in text, text
    assert all(len(o.traceback) <= 1 for o in cell.outputs if o.output_type == "error")


SETUP = "%load_ext mmsp_notebook\n" + WEATHER_SOURCE


def test_magic_streams_every_kind_of_item_into_the_cell(tmp_path, monkeypatch):
    nb = notebook(
        SETUP,
        "%%mmsp -o first\nTell me about notebooks",
        "%%mmsp --tools get_weather -o weather\nWhat's the weather in Lisbon?",
        "%%mmsp\ndraw a lighthouse",
        "%%mmsp\nsay good morning",
        "%%mmsp -m demo-embed --chat vectors\nembed this sentence",
        "%%mmsp --events --chat ev\nhi",
        'payload = {"k": 1}\n',
        '%%mmsp --chat json\nParse {{"a": {"b": [1, 2]}}} and {payload} and {"x": 1}',
        "print(first.status, first.finish_reason, weather.tool_calls[0]['output'], len(weather.steps))",
        "%mmsp usage",
        "%mmsp history",
        "%mmsp models",
        "%mmsp One line prompt",
    )
    run_notebook(nb, tmp_path, monkeypatch)
    cells = nb.cells
    first = cells[1]
    data = [o for o in first.outputs if o.output_type == "display_data"][0]["data"]
    # the live widget gave way to the static rendering: the saved notebook needs no widget state
    assert WIDGET not in data and "text/html" in data and "text/plain" in data
    # one TurnView model serves every turn of the kernel: the saved state does not grow per cell
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    assert sum(1 for s in state.values() if s["model_name"] == "AnyModel") == 1
    html = html_of(first)
    assert "Thought for" in html and "<h2>" in html and "<table>" in html and "<pre><code" in html
    assert '<div class="mmsp-root mmsp-turn mmsp-static" data-status="complete">' in html
    assert '<div class="mmsp-code"><div class="mmsp-code-bar">' in html and "<button" not in html
    assert ">tokens cached " in html and ">price unknown</span>" in html
    # the cell's value is the turn's one-line summary (the live view already shows the turn)
    value = [o for o in first.outputs if o.output_type == "execute_result"][0]["data"]["text/plain"]
    assert value.startswith("<Turn demo · complete")
    tool_html = html_of(cells[2])
    assert re.search(r'<span class="mmsp-tool-label">tool call</span> <code class="mmsp-tool-name"[^>]*>get_weather</code>',
                     tool_html)
    assert f'<pre class="mmsp-tool-output">{weather_in("Lisbon")}</pre>' in tool_html and ">2 steps</span>" in tool_html
    assert '<img class="mmsp-img" src="data:image/png;base64,' in html_of(cells[3])
    assert '<audio class="mmsp-audio-player" controls src="data:audio/wav;base64,' in html_of(cells[4])
    assert "embedding · 64 dims" in html_of(cells[5])
    events_html = html_of(cells[6])
    # the events table is inside the turn's view, after its footer, as the live view draws it
    assert re.search(r'<span>events </span><span class="mmsp-meta">\(\d+\)</span></summary>', events_html)
    assert events_html.index('class="mmsp-footer"') < events_html.index('<table class="mmsp-events-table">')
    assert "thinking.delta" in events_html and "<td>stop</td>" in events_html
    json_text = text_of(cells[8])
    assert "{'k': 1}" in json_text and '{"x": 1}' in json_text and '{"a": {"b": [1, 2]}}' in json_text
    assert f"complete stop {weather_in('Lisbon')} 2" in text_of(cells[9])
    usage_html = html_of(cells[10])
    assert "prompt_tokens" in usage_html and usage_html.count("<tr>") == 7
    assert "tool_result.done" in html_of(cells[11])
    import mmsp

    assert f"{len(mmsp.list_supported_models()) + 2} rows" in html_of(cells[12]) and "demo-embed" in html_of(cells[12])
    # without -o no Out[n] repeats the turn under its live view; `_` still holds it
    assert not [o for o in cells[13].outputs if o.output_type == "execute_result"]
    # traced: one mmsp trace JSON and one timing sidecar per conversation (default, vectors, ev, json)
    traces = sorted(p.name for p in (tmp_path / "cache").rglob("*.json"))
    sidecars = sorted(p.name for p in (tmp_path / "cache").rglob("*.timing.jsonl"))
    assert traces == ["default.json", "ev.json", "json.json", "vectors.json"]
    assert sidecars == [t.replace(".json", ".timing.jsonl") for t in traces]


@pytest.fixture(scope="module")
def notebook_kernel(tmp_path_factory):
    """One notebook kernel with the extension loaded, for cases that each start in a fresh session
    (see ``run_in_fresh_session``): a kernel and mmsp's first imports cost seconds a case."""
    where = tmp_path_factory.mktemp("notebook_kernel")
    client = NotebookClient(notebook(), timeout=120, kernel_name="python3", resources={"metadata": {"path": str(where)}})
    env = {**os.environ, "MMSP_NOTEBOOK_DEMO_INSTANT": "1", "MMSP_CACHE_DIR": str(where / "cache")}
    with client.setup_kernel(env=env):
        client.nb.cells.append(nbformat.v4.new_code_cell(SETUP))
        client.execute_cell(client.nb.cells[-1], 0)
        yield client


FRESH_SESSION = """\
%unload_ext mmsp_notebook
import os as _os
from mmsp_notebook.engine import session as _session_module
_session_module._session = None
_os.environ["MMSP_CACHE_DIR"] = {cache!r}
[globals().pop(_name, None) for _name in {names!r}]
del _os, _session_module
%load_ext mmsp_notebook
"""


def run_in_fresh_session(client, tmp_path, *sources: str, names: tuple[str, ...] = ()) -> list:
    """Run cells in the shared kernel after a new session (its own cache folder, the extension
    loaded again, ``names`` deleted): the cells as executed (a cell's error fails, as nbclient's)."""
    cells = [nbformat.v4.new_code_cell(src) for src in (FRESH_SESSION.format(cache=str(tmp_path / "cache"), names=names),
                                                        *sources)]
    for cell in cells:
        client.nb.cells.append(cell)
        client.execute_cell(cell, len(client.nb.cells) - 1)
    assert text_of(cells[0]) == "", text_of(cells[0])
    return cells


@pytest.mark.parametrize("fault, expect", [
    ("cut-text", "ended without a stop event"),
    ("cut-args", "ended without a stop event"),
    ("nostop", "ended without a stop event"),
    ("error", "UpstreamError"),
    ("bad-args", "UpstreamError"),
    ("401", "UpstreamError"),
    ("429", "Rate limited"),
])
def test_every_fault_shows_its_status_and_keeps_partial_content(notebook_kernel, tmp_path, fault, expect):
    cells = run_in_fresh_session(
        notebook_kernel, tmp_path, f"%%mmsp -m demo+{fault} --tools get_weather -o r\nWhat's the weather in Paris?",
        "print('status', r.status, len(r.text) + len(r.thinking) + len(r.tool_calls))", "%mmsp error", names=("r",))
    html = html_of(cells[1])
    assert expect in html
    assert not any(o.output_type == "error" for o in cells[1].outputs)  # no traceback
    status_line = text_of(cells[2])
    assert "status incomplete" in status_line or "status error" in status_line
    if fault in ("cut-text", "nostop", "error"):
        assert int(status_line.split()[-1]) > 0  # partial content kept
    assert "Traceback" in text_of(cells[3]) or "Error" in text_of(cells[3])


def test_bad_options_give_a_one_line_usage_error_and_strict_raises(tmp_path, monkeypatch):
    nb = notebook(
        SETUP,
        "%%mmsp --thinking enormous\nhi",
        "%%mmsp --max-tokens lots\nhi",
        "%%mmsp --tools no_such_function\nhi",
        "%mmsp config temperature=hot",
        "%%mmsp -m demo+401 --strict\nhi",
        "%mmsp config strict=true",
        "%%mmsp -m demo+nostop\nhi",
        "%mmsp config strict=false max_tokens=5",
        "%%mmsp -o short\nTell me everything",
        "print(short.finish_reason)",
        "%mmsp help",
    )
    run_notebook(nb, tmp_path, monkeypatch, allow_errors=True)
    c = nb.cells
    for i in (1, 2, 3, 4):
        assert_usage_error(c[i])
    assert "enormous" in text_of(c[1]) and "no_such_function" in text_of(c[3])
    assert "TurnError" in text_of(c[5])
    # one line under the banner, not a traceback through the package and mmsp's client
    [error] = [o for o in c[5].outputs if o.output_type == "error"]
    assert len(error.traceback) == 1 and "%mmsp error" in error.traceback[0] and error.ename == "TurnError"
    assert "TurnError" in text_of(c[7]) and "incomplete" in text_of(c[7])
    assert '<span class="mmsp-stat mmsp-truncated" title="the model stopped at its output token limit">⚠ truncated (length)</span>' in html_of(c[9])
    assert text_of(c[10]).strip() == "length"
    help_text = json.dumps([o.get("data", {}) for o in c[11].outputs]) + text_of(c[11])
    assert "--api-key-env" in help_text and "--tools" in help_text


@pytest.mark.serial  # interrupts 2 s in, must end within 3 s
def test_kernel_interrupt_cancels_mid_stream_and_the_next_cell_runs(kernel):
    kernel.execute("%load_ext mmsp_notebook")
    reply, took = kernel.interrupted("%%mmsp -m demo+stall -o stalled\nhello")
    assert took < 3.0
    # the cell ends with an error (the cells queued after it are aborted), in one line
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "Interrupted"
    assert reply["content"]["traceback"] == ["Interrupted: the turn was cancelled; its partial answer is kept above"]
    assert kernel.printed("print(stalled.status)").strip() == "cancelled"
    outputs = kernel.execute("%%mmsp -m demo+instant\nstill alive?")
    kinds = [m["msg_type"] for m in outputs]
    assert "display_data" in kinds and "update_display_data" in kinds
    live = [m for m in outputs if m["msg_type"] == "display_data"][0]
    assert WIDGET in live["content"]["data"]  # streamed into the widget first
    final = [m for m in outputs if m["msg_type"] == "update_display_data"][-1]
    assert '<span class="mmsp-stat mmsp-tokens" title="token usage per bucket">tokens cached ' in final["content"]["data"]["text/html"]


@pytest.mark.serial  # interrupts a cell mid-stream, with another queued behind it
def test_an_interrupt_stops_the_cells_queued_after_the_turn_and_keeps_its_partial_answer(kernel):
    """■ while a turn streams, with "Run All" queueing the next cell: the turn is drawn cancelled,
    what arrived kept, then the cell ends with an error in one line and the queued cell is aborted
    (no further paid request), as plain Python code interrupted would."""
    import queue
    import time

    kernel.execute("%load_ext mmsp_notebook")
    first = kernel.kc.execute("%%mmsp -m demo+tokens=2000 -o partial\nhello")
    second = kernel.kc.execute("%%mmsp -m demo -o after\nnever asked")
    outputs, deadline = [], time.monotonic() + 60
    while not any(m["msg_type"] == "display_data" for m in outputs):  # the live view is up
        assert time.monotonic() < deadline, "no live view within 60 s"
        try:
            msg = kernel.kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") == first:
            outputs.append(msg)
    time.sleep(5)  # mid-answer: the demo thinks for 3 s, then answers for a minute
    kernel.km.interrupt_kernel()
    replies = {}
    while len(replies) < 2:  # (the replies of the cells run before are still there: passed over)
        reply = kernel.kc.get_shell_msg(timeout=20)
        if reply["parent_header"].get("msg_id") in (first, second):
            replies[reply["parent_header"]["msg_id"]] = reply["content"]
    assert replies[first]["status"] == "error" and replies[second]["status"] == "aborted"
    while not (outputs and outputs[-1]["msg_type"] == "status" and outputs[-1]["content"]["execution_state"] == "idle"):
        msg = kernel.kc.get_iopub_msg(timeout=10)
        if msg["parent_header"].get("msg_id") == first:
            outputs.append(msg)
    kernel.settled()
    [error] = [m["content"] for m in outputs if m["msg_type"] == "error"]
    assert len(error["traceback"]) < 5 and "cancelled" in error["traceback"][-1], error
    final = [m for m in outputs if m["msg_type"] == "update_display_data"][-1]["content"]["data"]["text/html"]
    said = kernel.printed("print(partial.status, 0 < len(partial.text) < 11000, 'after' in dir())").split()
    assert said == ["cancelled", "True", "False"], said
    begun = kernel.printed("print(partial.text.split('\\n\\n')[1][:30])").strip()
    assert begun and begun in final and "cancelled" in final  # the partial answer, marked cancelled


def test_surrogates_a_model_sent_stream_into_the_cell_mended_and_the_kernel_goes_on(kernel):
    """Half a surrogate pair in each of two deltas and half a pair alone (JSON escapes a server slicing
    UTF-16 text may send): the live widget, the final view, the Turn's text and the trace carry the
    joined character and U+FFFD, where a raw surrogate would fail to be sent; the next cell runs."""
    from sse_scripts import SPLIT_SURROGATES, script_server

    with script_server(lambda _request, _auth: SPLIT_SURROGATES) as base_url:
        kernel.execute(f"%load_ext mmsp_notebook\nimport os\nos.environ['VIEW_TEST_KEY'] = 'sk-view-test-0000'\nurl = {base_url!r}")
        outputs = kernel.execute("%%mmsp -m m --client-type openai-chat --base-url {url} --api-key-env VIEW_TEST_KEY -o t\nhi")
    assert not [m for m in outputs if m["msg_type"] == "error"], outputs
    assert "Traceback" not in json.dumps([m["content"] for m in outputs if m["msg_type"] == "stream"])
    final = [m for m in outputs if m["msg_type"] == "update_display_data"][-1]["content"]["data"]
    assert "a smile \U0001f600 and half \ufffd a <strong>pair</strong>" in final["text/html"]
    # and the Turn's text, which a print would fail to write with a raw surrogate in it
    assert kernel.printed("print(t.status, ascii(t.text))").strip() == r"complete 'a smile \U0001f600 and half \ufffd a **pair**'"
    assert kernel.printed("print(t.text)").strip() == "a smile \U0001f600 and half \ufffd a **pair**"
    kernel.execute("%%mmsp -m demo+instant -o again\nstill alive?")
    assert kernel.printed("print(again.status, again.error_message)").strip() == "complete None"


BLOCKING_TOOL = """
import os, pathlib, threading, time
release = threading.Event()

async def slow_lookup(city: str) -> str:
    \"\"\"Look up a city, blocking.\"\"\"
    pathlib.Path(os.environ["MMSP_CACHE_DIR"]).with_name("blocking").touch()  # (a test waits for it)
    deadline = time.monotonic() + 30
    while not release.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)  # blocks the worker loop: no await
    return f"found {city}"
"""


@pytest.mark.serial  # the interrupt must end the cell within 2 s
def test_an_interrupt_ends_a_turn_whose_async_tool_blocks_the_loop_and_the_kernel_goes_on(kernel):
    kernel.execute("%load_ext mmsp_notebook\n%config MMSPMagics.demo_instant = True")
    kernel.execute(BLOCKING_TOOL)
    reply, took = kernel.interrupted("%%mmsp --tools slow_lookup -o blocked\nLook up Paris with slow_lookup",
                                     until="is blocking the event loop", after=0.5)  # (its live view says so)
    assert took < 2.0  # not the abort grace, not the tool's 30 s
    assert reply["content"]["status"] == "error" and len(reply["content"]["traceback"]) == 1
    said = kernel.printed("print(blocked.status, type(blocked.error).__name__, blocked.error.stall.tool,"
                          " blocked.tool_calls[0]['name'], blocked.status_text)")
    assert said.startswith("cancelled LoopBlockedError slow_lookup slow_lookup cancelled while the async tool "
                           "'slow_lookup'"), said
    assert kernel.printed("print(1 + 1)").strip() == "2"  # the kernel is usable while the tool still blocks
    kernel.execute("release.set()")
    outputs = kernel.execute("%%mmsp\nstill alive?")
    final = [m for m in outputs if m["msg_type"] == "update_display_data"][-1]
    assert "tokens cached " in final["content"]["data"]["text/html"]


def shell():
    """IPython's terminal shell (one per process), with the extension loaded."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    start_ipython()
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mmsp_notebook")
    return ip


def test_a_one_line_question_is_a_prompt_not_a_help_request(fresh_session, capsys):
    ip = shell()
    result = ip.run_cell("%mmsp What is my name?")
    assert result.success, result.error_in_exec
    turn = ip.user_ns["_"]  # no Out[n] without -o, but `_` holds the turn
    assert turn.status == "complete" and "What is my name?" in turn.prompt["content_items"][0]["text"]
    assert "not found" not in capsys.readouterr().out
    indented = ip.run_cell("if True:\n    %mmsp --chat q -o t Are you there?\nt.status")
    assert indented.result == "complete"
    assert "Are you there?" in ip.user_ns["t"].prompt["content_items"][0]["text"]
    # help on the magic itself still works, and a cell's prompt is left as written
    assert ip.run_cell("%mmsp?").success
    cell = ip.run_cell("%%mmsp --chat q -o body\nWhat does\n%mmsp mean?")
    assert cell.success and ip.user_ns["body"].prompt["content_items"][0]["text"] == "What does\n%mmsp mean?"
    assert fresh_session.conversation("q").turns


def test_a_prompt_that_starts_with_a_dash_gets_a_hint(fresh_session):
    from IPython.core.error import UsageError

    ip = shell()
    with pytest.raises(UsageError, match=r"%mmsp -- <prompt>"):
        ip.run_line_magic("mmsp", "-verbose output please")
    ip.run_line_magic("mmsp", "-o dash -- -verbose output please")
    turn = ip.user_ns["dash"]
    assert turn.status == "complete" and turn.prompt["content_items"][0]["text"] == "-verbose output please"


def test_an_out_name_is_the_variable_python_code_reads_by_it(fresh_session):
    """Python reads identifiers in their NFKC form: -o ﬁ (a ligature) keeps the turn where code that
    names ﬁ looks, which is fi."""
    ip = shell()
    result = ip.run_cell("%%mmsp -o \ufb01\nhello")
    assert result.success, result.error_in_exec
    assert ip.run_cell("\ufb01.status").result == "complete"
    assert "\ufb01" not in ip.user_ns and ip.user_ns["fi"].status == "complete"


def test_terminal_ipython_streams_plain_text(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MMSP_CACHE_DIR", str(tmp_path / "cache"))
    from mmsp_notebook.engine import session as _session
    sess = _session.Session()
    sess.settings.demo_instant = True
    monkeypatch.setattr(_session, "_session", sess)
    ip = shell()
    value = ip.run_cell_magic("mmsp", "-o t", "Tell me about terminals")
    out = capsys.readouterr().out
    turn = ip.user_ns["t"]
    assert value is turn  # the cell's value, shown as its one-line summary
    assert ip.display_formatter.format(turn)[0] == {"text/plain": turn.summary()}
    assert turn.status == "complete"
    assert turn.text in out and "[thinking]" in out and "tokens cached" in out
    assert "\x1b[" not in out  # not a tty: no colour codes
    ip.run_cell("%%mmsp?")
    assert "--api-key-env" in capsys.readouterr().out  # magic_arguments' help
    sess.stop_demo()


def test_options_take_shell_quoting_and_bad_values_change_nothing(tmp_path, monkeypatch):
    nb = notebook(
        SETUP + "from PIL import Image\nim = Image.new('CMYK', (8, 8), (0, 255, 255, 0))\nmodel_name = 'demo'\n",
        '%%mmsp --system "Be brief" --chat "my chat" -o q\nhi',
        "%%mmsp -o 1abc\nhi",
        "%mmsp config max_steps=3 thinking=ultra",
        "from mmsp_notebook.engine.session import session\nprint(session().settings.max_steps, session().settings.thinking)",
        "%mmsp -o r describe {im}",
        "print([i['type'] for i in r.prompt['content_items']], r.status)",
        "%mmsp histroy",
        "%%mmsp --trace exp.1\nhi",
        "print(q.config.get('system_prompt'), '|', q.chat, '|', q.status)",
        "q",
        "%mmsp what's a notebook?",
        "room = 'lab'\n%mmsp --chat {room} -o line_turn hello from {room}",
        "%%mmsp --chat {room}-2 -m $model_name -o cell_turn\nhi",
        "print(line_turn.chat, line_turn.prompt['content_items'][0]['text'], '|', cell_turn.chat, cell_turn.model)",
    )
    run_notebook(nb, tmp_path, monkeypatch, allow_errors=True)
    c = nb.cells
    for i in (2, 3, 7, 8):
        assert_usage_error(c[i])
    assert "1abc" in text_of(c[2]) and "nothing was changed" in text_of(c[3])
    assert text_of(c[4]).split() == ["8", "None"]  # the valid half of a refused config did not apply
    assert text_of(c[6]).strip() == "['text.done', 'image_url.done'] complete"  # {im} in a line magic
    assert "did you mean 'history'" in text_of(c[7]) and "exp_1" in text_of(c[8])
    assert text_of(c[9]).strip() == "Be brief | my chat | complete"
    # the turn shown again in a later cell is the whole turn, not the summary line of its own cell
    assert "mmsp-root" in html_of(c[10])
    assert not [o for o in c[11].outputs if o.output_type == "error"]  # an apostrophe in a line prompt
    # options expand {expr} and $name as IPython does for any magic's line
    assert text_of(c[14]).strip() == "lab hello from lab | lab-2 demo"


def test_subcommands_name_their_conversation_and_refuse_extra_words(fresh_session):
    from IPython.core.error import UsageError

    ip = shell()
    assert ip.run_cell("%%mmsp --chat mychat -o a\nfirst in mychat").success
    assert ip.run_cell("%mmsp -o b first in the default one").success
    assert len(fresh_session.conversation("mychat").history()) == 2
    ip.run_line_magic("mmsp", "reset mychat")
    assert fresh_session.conversation("mychat").history() == []
    assert len(fresh_session.conversation(None).history()) == 2  # not the default one
    assert set(ip.run_line_magic("mmsp", "history")["message"]) == {0, 1}
    for line, said in (("reset nosuch", "no conversation named 'nosuch'"), ("reset a b", "takes one conversation"),
                       ("usage foo", "takes no arguments"), ("models foo bar", "takes no arguments"),
                       ("history mychat other", "takes one conversation")):
        with pytest.raises(UsageError, match=said):
            ip.run_line_magic("mmsp", line)


def test_an_assigned_line_magic_gives_the_turn(fresh_session):
    ip = shell()
    assert ip.run_cell("x = %mmsp -m demo+nothink assigned").success
    x = ip.user_ns["x"]
    assert x is not None and x.status == "complete" and x.prompt["content_items"][0]["text"] == "assigned"
    assert ip.run_cell("y = %mmsp is it a question?").success
    assert ip.user_ns["y"].prompt["content_items"][0]["text"] == "is it a question?"
    assert ip.run_cell("h = %mmsp history").success and ip.user_ns["h"]["message"].nunique() == 4
    result = ip.run_cell("%mmsp not assigned")  # shown live: no Out[n] repeating it
    assert result.success and result.result is None


def test_a_refused_config_value_is_not_kept(fresh_session, capsys, caplog):
    ip = shell()
    ip.run_cell("%config MMSPMagics.temperature = -3")  # (%config logs what refused it)
    assert "temperature must be a finite number of at least 0" in caplog.text
    magics = ip.magics_manager.registry["MMSPMagics"]
    assert magics.temperature is None and fresh_session.settings.temperature is None
    # the configuration still holds it: loading the extension again leaves it out and says so
    assert ip.run_cell("%reload_ext mmsp_notebook").success
    assert "(left out)" in capsys.readouterr().err
    assert ip.run_cell("%mmsp config").success
    ip.config.MMSPMagics.pop("temperature", None)


def test_unloading_the_extension_takes_its_magics_with_it_and_loading_it_again_brings_them_back(fresh_session):
    ip = shell()
    try:
        assert ip.run_cell("%unload_ext mmsp_notebook").success
        assert "mmsp" not in ip.magics_manager.magics["line"] and "mmsp" not in ip.magics_manager.magics["cell"]
        result = ip.run_cell("%%mmsp\nhello")
        assert not result.success and "Cell magic `%%mmsp` not found" in str(result.error_in_exec)
    finally:
        assert ip.run_cell("%load_ext mmsp_notebook").success
    assert ip.run_cell("%mmsp -o back What is my name?").success  # a question is a prompt again
    assert ip.user_ns["back"].status == "complete"
    assert ip.run_cell("%reload_ext mmsp_notebook").success and ip.run_cell("%mmsp -o again hi").success


def test_an_empty_trace_id_is_refused_by_every_door_not_taken_for_the_default_or_for_none(fresh_session):
    from IPython.core.error import UsageError

    from mmsp_notebook import OptionError, ask

    ip = shell()
    with pytest.raises(UsageError, match="no empty part"):
        ip.run_cell_magic("mmsp", "--trace ''", "hi")
    with pytest.raises(UsageError, match="--trace and --no-trace contradict"):
        ip.run_cell_magic("mmsp", "--trace '' --no-trace", "hi")
    with pytest.raises(OptionError, match="no empty part"):
        ask("hi", trace="")
    assert fresh_session.turns == []  # nothing was sent


def test_an_empty_chat_name_is_refused_by_every_door_not_taken_for_the_default_conversation(fresh_session):
    from IPython.core.error import UsageError

    from mmsp_notebook import Chat, OptionError, ask, compare

    ip = shell()
    with pytest.raises(UsageError, match=r"^%%mmsp: chat '': a conversation's name cannot be empty"):
        ip.run_cell_magic("mmsp", "--chat ''", "hi")
    with pytest.raises(UsageError, match="name cannot be empty"):
        ip.run_cell_magic("mmsp", "-m demo,demo+nothink --chat ''", "hi")
    with pytest.raises(UsageError, match=r"^%mmsp reset: --chat '': a conversation's name cannot be empty"):
        ip.run_line_magic("mmsp", "reset --chat ''")
    with pytest.raises(UsageError, match=r"^%mmsp history: NAME ' ': a conversation's name cannot be empty"):
        ip.run_line_magic("mmsp", "history ' '")
    with pytest.raises(OptionError, match="chat '': a conversation's name cannot be empty"):
        ask("hi", chat="")
    with pytest.raises(OptionError, match="chat '': a conversation's name cannot be empty"):
        compare("hi", "demo,demo+nothink", chat="")
    with pytest.raises(OptionError, match="name '': a conversation's name cannot be empty"):
        Chat(name="")
    assert fresh_session.turns == [] and set(fresh_session.conversations) <= {"default"}


def test_the_input_transformer_leaves_continued_lines_and_strings_alone(fresh_session):
    from mmsp_notebook.front.magic import questions_are_prompts

    continued = ["x = %mmsp a long \\\n", "    prompt\n"]
    assert questions_are_prompts(continued) == continued
    text = ['doc = """\n', "x = %mmsp hello\n", '"""\n']
    assert questions_are_prompts(text) == text
    assert questions_are_prompts(["x = %mmsp hello\n"]) == ["x = get_ipython().run_line_magic('mmsp', '--value hello')\n"]


def test_refused_aliases_in_config_add_none(fresh_session, caplog):
    ip = shell()
    ip.run_cell("%config MMSPMagics.aliases = {'good': 'openai-chat:m', 'bad': 'openai-chat:'}")
    assert "a model id goes after" in caplog.text
    assert "good" not in fresh_session.settings.aliases
    ip.config.MMSPMagics.pop("aliases", None)


def test_an_option_value_with_spaces_stays_one_value_in_the_cell_magic_too(fresh_session):
    ip = shell()
    ip.user_ns.update(persona="You are a pirate", quoted="don't")
    assert ip.run_cell("%%mmsp --system {persona} -o cell_turn\nhi").success
    assert ip.run_cell("%%mmsp --system $persona --chat two -o dollar_turn\nhi").success
    assert ip.run_cell("%%mmsp --system \"{quoted}\" --chat three -o quoted_turn\nhi").success
    assert ip.run_cell("%mmsp --system {persona} --chat four -o line_turn hi").success
    for name, system in (("cell_turn", "You are a pirate"), ("dollar_turn", "You are a pirate"),
                         ("quoted_turn", "don't"), ("line_turn", "You are a pirate")):
        assert ip.user_ns[name].config["system_prompt"] == system, name


@pytest.mark.serial  # the interrupt 1.5 s in must land mid-stream
def test_strict_shows_a_comparison_in_one_line_and_sends_a_cancel_nowhere(kernel):
    kernel.execute("%load_ext mmsp_notebook\n%mmsp config demo_instant=true")
    outputs = kernel.execute("%%mmsp -m demo,demo+error --strict\nhi")
    [error] = [m["content"] for m in outputs if m["msg_type"] == "error"]
    assert error["ename"] == "TurnError" and len(error["traceback"]) == 1
    assert error["traceback"][0] == "TurnError: comparison error: demo+error did not complete (the full detail: %mmsp error)"
    # an interrupt is no error of the turn: its line says so (the interrupt, not strict mode's TurnError,
    # goes on up) and points nowhere
    reply, _ = kernel.interrupted("%%mmsp -m demo+stall --strict\nhello", after=1.5)
    assert reply["content"]["traceback"] == ["Interrupted: the turn was cancelled; its partial answer is kept above"]


def test_removing_an_alias_says_whether_there_was_one(fresh_session, capsys):
    ip = shell()
    assert ip.run_cell("%mmsp alias fast = demo+nothink").success
    capsys.readouterr()
    assert ip.run_cell("%mmsp alias fast =").success
    assert capsys.readouterr().out == "removed alias fast\n" and "fast" not in fresh_session.settings.aliases
    assert ip.run_cell("%mmsp alias fast =").success  # (a mistyped name removes nothing, and says so)
    assert capsys.readouterr().out == "no alias fast to remove\n"
    assert ip.run_cell("%mmsp alias fast = demo").success
    assert capsys.readouterr().out == ""  # naming one stays quiet


def test_an_assigned_alias_line_gives_the_aliases(fresh_session):
    from IPython.core.error import UsageError

    ip = shell()
    assert ip.run_cell('%mmsp alias fast = demo+nothink --system "be quick"').success
    assert ip.run_cell("aliases = %mmsp alias").success
    assert ip.user_ns["aliases"] == {"fast": "demo+nothink --system 'be quick'"}
    assert ip.run_cell('x = %mmsp alias slow = demo --system "take your time"').success
    assert fresh_session.settings.aliases["slow"].system == "take your time"
    with pytest.raises(UsageError, match="alias: takes no options"):
        ip.run_line_magic("mmsp", "--chat x alias")
    # its values expand as the magic's options do, a value with spaces staying one value
    ip.user_ns.update(persona="You are a pirate", short="pirate")
    assert ip.run_cell("%mmsp alias {short} = demo --system {persona}").success
    assert fresh_session.settings.aliases["pirate"].system == "You are a pirate"


def test_a_key_typed_into_the_magics_line_by_mistake_is_not_echoed_by_its_error(fresh_session):
    from IPython.core.error import UsageError

    ip = shell()
    key = "sk-" + "k3y" * 12
    for line, cell in ((f"--key={key}", "hi"), (f"--api-key-env OPENAI_API_KEY {key}", "hi"), (f"-o {key}", "hi"),
                       (f"--client-type {key}", "hi"), (f"models {key}", None)):
        with pytest.raises(UsageError) as raised:
            ip.run_cell_magic("mmsp", line, cell) if cell else ip.run_line_magic("mmsp", line)
        assert key[:12] not in str(raised.value) and "[redacted]" in str(raised.value), line
    assert fresh_session.turns == []  # nothing was sent


def test_a_mistyped_option_gets_the_nearest_one_and_a_cell_no_hint_about_one_line_prompts(fresh_session):
    from IPython.core.error import UsageError

    ip = shell()
    with pytest.raises(UsageError, match=r"^%%mmsp: unrecognized arguments: --temprature; did you mean "
                                         r"'--temperature'\?$"):
        ip.run_cell_magic("mmsp", "--temprature 0.5", "hi")
    with pytest.raises(UsageError, match=r"^%mmsp: unrecognized arguments: --max_tokens; did you mean '--max-tokens'\? "
                                         r"\(to send a prompt that starts with '-': %mmsp -- <prompt>\)$"):
        ip.run_line_magic("mmsp", "--max_tokens 5 hi")
    with pytest.raises(UsageError, match=r"^%%mmsp: ambiguous option: --t could match .*--temperature[^(]*$"):
        ip.run_cell_magic("mmsp", "--t 0.5", "hi")
    assert fresh_session.turns == []


def test_a_one_line_prompt_is_sent_as_typed_its_quotes_backslashes_and_spaces_kept(fresh_session):
    ip = shell()
    ip.user_ns["d"] = {"a": 1}
    for line, prompt in (('-o t What does "idempotent" mean', 'What does "idempotent" mean'),
                         ('-o t --system "be brief" Explain  `a\\nb`', "Explain  `a\\nb`"),
                         ('-o t {d["a"]} and {d}', "1 and {'a': 1}"),
                         ("-o t -- --x means 'x'", "--x means 'x'")):
        ip.run_line_magic("mmsp", line)
        assert ip.user_ns["t"].prompt["content_items"][0]["text"] == prompt, line
    assert ip.user_ns["t"].config.get("system_prompt") is None  # (options stay options)


def test_a_model_list_with_spaces_after_its_commas_is_refused_saying_how_to_write_it(fresh_session):
    from IPython.core.error import UsageError

    ip = shell()
    said = r"-m demo, demo\+nothink: write the models without spaces \(-m a,b,c\) or quote them \(-m 'a, b, c'\)"
    with pytest.raises(UsageError, match=rf"^%%mmsp: {said}"):  # (it was "unexpected argument 'demo+nothink'")
        ip.run_cell_magic("mmsp", "-m demo, demo+nothink", "hi")
    with pytest.raises(UsageError, match=rf"^%mmsp: {said}"):
        ip.run_line_magic("mmsp", "-m demo, demo+nothink hello")
    assert fresh_session.turns == []
    assert ip.run_cell("%%mmsp -m 'demo, demo+nothink' -o pair\nhi").success
    assert ip.user_ns["pair"].labels == ["demo", "demo+nothink"]


def test_mmsp_history_isolates_a_tool_name_holding_a_bidi_control_before_its_arguments(fresh_session):
    from mmsp_notebook.engine.tools import ToolSet
    from mmsp_notebook.front.ask import ask

    name = "get\u202eweather"
    ask(f"please {name} Paris", tools=ToolSet({name: lambda city: f"sunny in {city}"}), chat="bidi",
        stream=io.StringIO())
    frame = shell().run_line_magic("mmsp", "history bidi")
    [preview] = frame.loc[frame["type"] == "tool_call.done", "preview"]
    assert preview.startswith(f"\u2068{name}\u2069(") and preview.count(name) == 1


def test_an_error_of_the_line_magic_names_the_line_magic(fresh_session, capsys):
    ip = shell()
    for source, door in (("%mmsp --temperature nan hi", "%mmsp: "), ("%%mmsp --temperature nan\nhi", "%%mmsp: "),
                         ("%mmsp -o 1x hi", "%mmsp: "), ("%mmsp -m demo,demo --wire hi", "%mmsp: ")):
        result = ip.run_cell(source)
        assert not result.success
        said = str(result.error_in_exec)
        assert said.startswith(door), (source, said)


def test_an_expression_with_quotes_or_spaces_in_an_option_is_expanded_as_written(fresh_session, capsys):
    ip = shell()
    ip.user_ns.update(d={"a": "Answer in one word."}, parts=["Be", "brief."])
    assert ip.run_cell('%mmsp --system {d["a"]} -o t1 hi').success
    assert ip.run_cell('%%mmsp --system {" ".join(parts)} -o t2\nhi').success
    assert ip.run_cell("%mmsp --system {d['a']} -o t3 -- {d['a']} there").success
    systems = [ip.user_ns[name].config.get("system_prompt") for name in ("t1", "t2", "t3")]
    assert systems == ["Answer in one word.", "Be brief.", "Answer in one word."], systems
    assert ip.user_ns["t3"].prompt["content_items"][0]["text"] == "Answer in one word. there"


def test_code_pasted_into_a_prompt_is_never_run_and_the_cell_says_so_in_one_line(fresh_session, capsys):
    ip = shell()
    ip.user_ns["items"] = [1, 2, 3]
    result = ip.run_cell('%%mmsp -o q\nWhy does this print 3? print(f"{items.pop()}") for {items[0]}')
    assert result.success, result.error_in_exec
    assert ip.user_ns["items"] == [1, 2, 3]
    assert ip.user_ns["q"].prompt["content_items"][0]["text"] == 'Why does this print 3? print(f"{items.pop()}") for 1'
    err = capsys.readouterr().err
    assert "%%mmsp: sent as written, not run: {items.pop()}." in err
    assert "UserWarning" not in err and "magic.py" not in err


def test_the_help_names_the_default_trace_id_a_turn_gets(fresh_session):
    ip = shell()
    [action] = [a for a in ip.magics_manager.registry["MMSPMagics"].mmsp.parser._actions if "--trace" in a.option_strings]
    assert "default: <notebook>/<chat>" in action.help and "turn" not in action.help
    ip.run_line_magic("mmsp", "--chat c1 -o t hi")
    assert ip.user_ns["t"].trace_id == f"{fresh_session.notebook}/c1"  # what the help says: <notebook>/<chat>


def test_config_values_expand_expressions_and_names_as_option_values_do(fresh_session):
    ip = shell()
    ip.user_ns.update(m="demo+nothink", sysp="Be brief.", d={"a": "In one word."})
    assert ip.run_cell('%mmsp config model=$m system={sysp} max_tokens={2 * 20}').success
    settings = fresh_session.settings
    assert (settings.model, settings.system, settings.max_tokens) == ("demo+nothink", "Be brief.", 40)
    assert ip.run_cell('%mmsp config system={d["a"]}').success  # an expression keeps its quotes
    assert settings.system == "In one word."
    assert ip.run_cell("%mmsp -o t hi").success
    assert ip.user_ns["t"].model == "demo+nothink" and ip.user_ns["t"].config["system_prompt"] == "In one word."
    # what cannot be expanded is left as written, as in an option's value (-m {nope})
    assert ip.run_cell("%mmsp config system={nope}").success and settings.system == "{nope}"
    # a value refused after its expansion is named as expanded, and nothing is changed
    ip.user_ns["bad"] = "-3"
    result = ip.run_cell("%mmsp config temperature={bad} max_tokens=7")
    assert not result.success and "'-3'" in str(result.error_in_exec) and settings.max_tokens == 40
