"""Compare models side by side: %%mmsp -m a,b,c and mmsp_notebook.compare()."""

from __future__ import annotations

import io
import time

import pandas as pd
import pytest
from helpers import html_of, text_of
from test_magic import notebook, run_notebook, shell

from mmsp_notebook import OptionError, TurnError
from mmsp_notebook.core.store import sidecar_path
from mmsp_notebook.front.compare import compare, parse_models
from mmsp_notebook.views.columns import figures, render_comparison_html

WIDGET = "application/vnd.jupyter.widget-view+json"


def test_model_lists_are_read_with_client_types_and_checked():
    assert parse_models("demo, gpt-x@openai-chat") == [("demo", None), ("gpt-x", "openai-chat")]
    assert parse_models(["a", "b"]) == [("a", None), ("b", None)]
    for bad, said in (("demo", "at least two"), ("demo,,x", "empty model"), ("demo,demo", "named twice"),
                      ("demo,x@", "client type after @"), (["demo", 5], "named by text"), (5, "named by text")):
        with pytest.raises(OptionError, match=said):
            parse_models(bad)


def test_a_comparison_runs_every_model_at_once_and_a_failure_stays_in_its_column(fresh_session):
    out = io.StringIO()
    c = compare("Tell me about rivers", "demo,demo+nothink,demo+error", stream=out)
    assert c.labels == ["demo", "demo+nothink", "demo+error"]
    assert [t.status for t in c.turns] == ["complete", "complete", "error"]
    assert c["demo+nothink"].thinking == "" and c["demo"].thinking
    df = c.frame
    assert list(df["model"]) == c.labels and list(df["status"]) == ["complete", "complete", "error"]
    for col in ("ttft_s", "total_s", "tokens_per_s", "prompt_tokens", "thoughts_tokens", "response_tokens", "cost",
                "text_chars", "tool_calls", "error", "trace_id", "comparison"):
        assert col in df.columns
    assert df["error"][2].startswith("UpstreamError") and df["error"].isna()[:2].all()
    assert df["thoughts_tokens"][1] == 0 and df["thoughts_tokens"][0] > 0
    # each model in its own conversation, traced under its own id; the default chat is untouched
    ids = list(df["trace_id"])
    assert len(set(ids)) == 3 and all(c.name in i for i in ids)
    assert all(sidecar_path(i).exists() for i in ids)
    assert fresh_session.conversation("default").turns == []
    text = out.getvalue()
    assert "── demo+error" in text and "status" in text and "* 0" in text  # fewest thoughts marked best


def test_a_continued_comparison_keeps_each_models_history(fresh_session):
    compare("My name is Ada.", "demo,demo+nothink", chat="pair", stream=io.StringIO())
    c = compare("What is my name?", "demo,demo+nothink", chat="pair", stream=io.StringIO())
    for label in c.labels:
        history = fresh_session.conversation(f"pair~{label}").history()
        assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
        assert "Ada" in history[0]["content_items"][0]["text"]


def test_strict_raises_after_keeping_the_comparison(fresh_session):
    kept = []
    with pytest.raises(TurnError, match="demo\\+nostop did not complete"):
        compare("hi", "demo,demo+nostop", stream=io.StringIO(), strict=True, keep=kept.append)
    assert kept and kept[0].turns[0].status == "complete" and kept[0].turns[1].status == "incomplete"


def test_the_figures_mark_the_best_among_completed_models(fresh_session):
    c = compare("hi", "demo+nothink,demo,demo+cut-text", stream=io.StringIO())
    rows = {r["label"]: r for r in figures(c.turns)}
    assert rows["thoughts tokens"]["best"] == [0]
    assert 2 not in rows["TTFT"]["best"]  # a cut-off answer is never "best"
    html = render_comparison_html(c.labels, c.turns)
    assert html.count('<section class="mmsp-column" aria-label=') == 3 and html.count("<style>") == 2
    for label in c.labels:  # each column is a region named for its model
        assert f'<section class="mmsp-column" aria-label="{label}">' in html
    assert 'class="mmsp-best"' in html and html.count("<script") == html.count("<script data-mmsp-copy>") <= 1


def test_an_answer_cut_at_the_token_limit_is_never_best(fresh_session):
    """It ends sooner and costs less because it was cut: its figures are not set against whole answers."""
    c = compare("hi", "demo+nothink+tokens=2000+instant,demo+nothink+tokens=20+tps=300,demo+nothink+tokens=22+tps=200",
                stream=io.StringIO(), max_tokens=40)
    assert [t.finish_reason for t in c.turns] == ["length", "stop", "stop"] and c.status == "complete"
    rows = {r["label"]: r for r in figures(c.turns)}
    assert all(0 not in r["best"] for r in rows.values()) and rows["total"]["best"] in ([1], [2])
    # the finish row warns of an end that is not normal, as the footer does
    assert rows["finish"]["cells"] == ["⚠ truncated (length)", "stop", "stop"]


def test_compare_cells_in_a_kernel(tmp_path, monkeypatch):
    nb = notebook(
        "%load_ext mmsp_notebook",
        "%%mmsp -m demo,demo+nothink,demo+error -o c\nTell me about {topic}",
        "print([t.status for t in c.turns], len(c.frame))",
        "%%mmsp -m demo,demo --chat x\nhi",
        "%%mmsp -m demo,demo+nothink --wire\nhi",
        "%mmsp history",
    )
    nb.cells.insert(1, nb.cells[0].copy())
    nb.cells[1].source = "topic = 'lakes'"
    run_notebook(nb, tmp_path, monkeypatch, allow_errors=True)
    c = nb.cells
    html = html_of(c[2])
    assert html.count('<section class="mmsp-column" aria-label=') == 3
    assert html.count('data-status="complete"') == 2 and html.count('data-status="error"') == 1
    assert "lakes" in html and html.count("<script") == html.count("<script data-mmsp-copy>") <= 1
    assert text_of(c[3]).strip() == "['complete', 'complete', 'error'] 3"
    assert "named twice" in text_of(c[4]) and "UsageError" in text_of(c[4])
    assert "--wire is for one model" in text_of(c[5])
    assert "lakes" not in text_of(c[6])  # the comparison did not touch the notebook's chat


@pytest.mark.serial  # interrupts 2 s in, must end within 3 s
def test_interrupt_cancels_every_column(kernel):
    kernel.execute("%load_ext mmsp_notebook")
    reply, took = kernel.interrupted("%%mmsp -m demo+stall,demo+tps=5 -o c\nhello")
    assert took < 3.0
    # the cell ends with an error (the cells queued after it are aborted), in one line; -o c still holds it
    assert reply["content"]["status"] == "error"
    assert reply["content"]["traceback"] == ["Interrupted: the comparison was cancelled; its partial answers are "
                                             "kept above"]
    assert kernel.printed("print([t.status for t in c.turns])").strip() == "['cancelled', 'cancelled']"
    outputs = kernel.execute("%%mmsp -m demo+instant,demo+instant+nothink\nstill alive?")
    live = [m for m in outputs if m["msg_type"] == "display_data"][0]
    assert WIDGET in live["content"]["data"]
    final = [m for m in outputs if m["msg_type"] == "update_display_data"][-1]
    assert final["content"]["data"]["text/html"].count('<section class="mmsp-column" aria-label=') == 2
    # one comm message per repaint for all columns, never one per column
    comms = [m for m in outputs if m["msg_type"] == "comm_msg" and m["content"]["data"].get("method") == "custom"]
    assert comms and all("cols" in m["content"]["data"]["content"] for m in comms
                         if m["content"]["data"]["content"].get("type") == "ops")


@pytest.mark.serial  # repaint count and gaps
def test_the_pacer_repaints_every_column_as_they_stream_each_delta_once(fresh_session):
    from mmsp_notebook.front.compare import start
    from mmsp_notebook.views.live import LiveView, drive
    from mmsp_notebook.views.model import OpsTracker

    class Counting(LiveView):
        def __init__(self):
            self.times, self.trackers, self.sent = [], [], []

        def start(self, comparison):
            self.trackers = [OpsTracker() for _ in comparison.turns]
            self.sent = ["" for _ in comparison.turns]

        def update(self, comparison):
            cols = [(i, ops) for i, (tr, t) in enumerate(zip(self.trackers, comparison.turns)) if (ops := tr.ops(t))]
            if cols:
                self.times.append(time.monotonic())
            for i, ops in cols:
                self.sent[i] += "".join(op[2] for op in ops
                                        if op[0] == "append" and comparison.turns[i].items[op[1]].kind == "text")

        def finish(self, comparison):
            self.update(comparison)

    group, future = start("Tell me about rivers", ["demo+tps=150", "demo+tps=300+nothink"])
    live = Counting()
    comparison = drive(group, future, live)
    assert comparison.status == "complete"
    assert len(live.times) >= 10  # repainted while streaming, not only at the end
    gaps = [b - a for a, b in zip(live.times, live.times[1:-1])]
    assert min(gaps) >= 0.035  # at most 25 repaints a second for all the columns together
    assert live.sent == [t.text for t in comparison.turns]


def test_the_trace_loaders_see_a_comparison_as_ordinary_turns_with_its_name(fresh_session, tmp_path):
    from mmsp_notebook import ask, traces

    ask("hi", stream=io.StringIO())
    c = compare("Tell me about rivers", "demo,demo+nothink", chat="rivers", stream=io.StringIO())
    turns = traces.load_turns(tmp_path / "cache", progress=False)
    mine = turns[turns["comparison"] == "rivers"]
    assert sorted(mine["model"]) == sorted(c.labels) and set(mine["trace_id"]) == set(c.frame["trace_id"])
    assert turns["comparison"].isna().sum() == len(turns) - 2  # the ordinary turn has none
    assert str(turns["comparison"].dtype) == "category"
    assert traces.to_arrow(turns).schema.field("comparison") is not None


@pytest.mark.serial  # a healthy column must never go 1 s without data
def test_the_magic_gives_its_timeout_and_client_type_to_every_model(fresh_session):
    ip = shell()
    started = time.monotonic()
    assert ip.run_cell("%%mmsp -m demo,demo+stall --timeout 1 -o timed\nTell me about rivers").success
    assert time.monotonic() - started < 30  # not the default 120 s of silence
    timed = ip.user_ns["timed"]
    assert [t.status for t in timed.turns] == ["complete", "incomplete"]
    assert type(timed["demo+stall"].error).__name__ == "IdleTimeoutError"
    assert ip.run_cell("%%mmsp -m demo,demo+nothink@mmsp --client-type openai-chat -o typed\nhi").success
    typed = ip.user_ns["typed"]
    assert [t.client_type for t in typed.turns] == ["openai-chat", "mmsp"]  # @ still wins for its model
    assert [t.status for t in typed.turns] == ["complete", "complete"]


@pytest.mark.serial  # the other column must end within the tool's 1 s; took < 10 s
def test_a_column_whose_async_tool_blocks_the_loop_ends_at_the_timeout_and_the_others_keep_their_end(fresh_session):
    import asyncio
    import threading

    from mmsp_notebook import LoopBlockedError

    release = threading.Event()
    calls = []

    async def slow_lookup(city: str) -> str:
        """Look up a city; the second call blocks the loop."""
        calls.append(city)
        if len(calls) == 2:
            await asyncio.sleep(1.0)  # the other column finishes meanwhile
            deadline = time.monotonic() + 30
            while not release.is_set() and time.monotonic() < deadline:
                time.sleep(0.05)  # no await: the worker loop stops turning
        return f"found {city}"

    began = time.monotonic()
    try:
        c = compare("Look up Paris with slow_lookup", "demo,demo+nothink", tools=[slow_lookup], timeout=3,
                    stream=io.StringIO(), trace=False)
        took = time.monotonic() - began
    finally:
        release.set()
    assert took < 10
    statuses = sorted(t.status for t in c.turns)
    assert statuses == ["complete", "error"], statuses
    [blocked] = [t for t in c.turns if t.status == "error"]
    assert isinstance(blocked.error, LoopBlockedError) and blocked.error.stall.tool == "slow_lookup"
    assert c.frame["error"].dropna().str.startswith("LoopBlockedError").all()


def test_an_unknown_keyword_is_refused_naming_compare_and_its_options(fresh_session):
    with pytest.raises(TypeError, match=r"^compare\(\) got an unexpected keyword argument 'bogus'; it takes chat, "
                                        r"stream, display, strict, keep, client_type, .*system") as info:
        compare("hi", "demo,demo+nothink", bogus=1, stream=io.StringIO())
    assert "launch" not in str(info.value) and "model," not in str(info.value)
    assert fresh_session.turns == []


def test_a_comparison_indexed_by_a_model_it_does_not_hold_raises_a_key_error_naming_its_models():
    import pytest

    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.front.compare import Comparison

    pair = Comparison("c", ["demo", "demo+nothink"], [Turn(None, model="demo"), Turn(None, model="demo")])
    assert pair["demo+nothink"] is pair.turns[1] and pair[0] is pair.turns[0]
    with pytest.raises(KeyError, match=r"'demo\+fast' is not one of this comparison's models: 'demo', 'demo\+nothink'"):
        pair["demo+fast"]


def test_an_answer_stopped_at_max_steps_with_calls_pending_is_never_best(fresh_session):
    """It stopped before its answer, as one cut at the token limit: faster and cheaper because unfinished."""
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"19 degrees in {city}"

    c = compare("What's the weather in Paris?", "demo+tps=400,demo+nothink+tps=200", tools=[get_weather],
                max_steps=1, stream=io.StringIO())
    assert [t.status_text for t in c.turns] == ["stopped after --max-steps with tool calls still pending"] * 2
    assert all(r["best"] == [] for r in figures(c.turns))


def test_a_comparison_says_which_models_it_holds_and_how_many():
    from mmsp_notebook.core.turn import Turn
    from mmsp_notebook.front.compare import Comparison

    pair = Comparison("c", ["demo", "demo+nothink"], [Turn(None, model="demo"), Turn(None, model="demo")])
    # `in` read a label as it was compared with each turn: False for a model it holds
    assert "demo+nothink" in pair and "demo+fast" not in pair and pair.turns[0] in pair
    assert len(pair) == 2 and list(pair) == pair.turns


def test_a_stream_that_cannot_be_written_and_a_flag_that_is_no_bool_are_refused_before_a_request(fresh_session):
    """compare(stream="out.txt") asked every model, then failed in the view (AttributeError); strict="false"
    and display="no" were true, and new="false" started the conversations fresh."""
    from mmsp_notebook import OptionTypeError

    with pytest.raises(OptionTypeError, match=r"^compare: stream takes a text stream to write to .* not str 'out.txt'"):
        compare("hi", "demo,demo+nothink", stream="out.txt")
    with pytest.raises(OptionTypeError, match=r"^compare: strict takes True or False .*not str 'false'"):
        compare("hi", "demo,demo+error", strict="false", stream=io.StringIO())
    with pytest.raises(OptionTypeError, match=r"^display takes True or False, not str 'no'"):
        compare("hi", "demo,demo+nothink", display="no")
    with pytest.raises(OptionTypeError, match=r"^new takes True or False, not str 'false'"):
        compare("hi", "demo,demo+nothink", new="false", stream=io.StringIO())
    assert fresh_session.turns == []  # refused before anything was sent
    assert compare("hi", "demo,demo+nothink", strict=False, display=False).status == "complete"


def test_a_trace_id_for_every_model_is_refused_before_anything_is_sent(fresh_session, tmp_path):
    """One trace id for all the columns would have each model's turn overwrite the others' trace
    file: refused, as the magic refuses --trace ID with -m a,b."""
    for trace in ("nb/mine", ""):
        with pytest.raises(OptionError, match="trace=ID is for one model"):
            compare("hi", "demo,demo+nothink", trace=trace, stream=io.StringIO())
    assert not (tmp_path / "cache").exists()
    c = compare("hi", "demo,demo+nothink", trace=True, stream=io.StringIO(), display=False)
    assert c.frame["trace_id"].nunique() == 2


def test_a_comparisons_frame_has_the_dtypes_of_the_usage_frame_and_the_loaded_turns(fresh_session, tmp_path):
    from mmsp_notebook import traces
    from mmsp_notebook.front.frames import usage_frame

    c = compare("Tell me about rivers", "demo+tps=2000,demo+error", stream=io.StringIO())
    df = c.frame
    usage = usage_frame(fresh_session.usage.rows())
    for col in set(df.columns) & set(usage.columns):
        assert df[col].dtype == usage[col].dtype or (
            isinstance(df[col].dtype, pd.CategoricalDtype) and isinstance(usage[col].dtype, pd.CategoricalDtype)), col
    loaded = traces.load_turns(tmp_path / "cache", progress=False)
    for col in ("model", "status", "finish_reason", "comparison"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
        assert df[col].cat.categories.dtype == loaded[col].cat.categories.dtype, col
    mine = loaded[loaded["comparison"] == c.name]
    assert sorted(df["model"].astype(str)) == sorted(mine["model"].astype(str))
    assert df.groupby("status", observed=True).size().to_dict() == {"complete": 1, "error": 1}


def test_times_speeds_and_costs_have_one_dtype_in_every_frame(fresh_session, tmp_path):
    """A usage or cost column has the dtype ``traces.load_turns`` gives it (times, speeds and costs
    ``float64``, token counts ``Int64``) in ``%mmsp usage``, ``Comparison.frame``, ``summary``, a
    dataset's ``query`` and its pyarrow frame."""
    from concurrent.futures import ThreadPoolExecutor

    from mmsp_notebook import traces
    from mmsp_notebook.front.frames import usage_frame

    c = compare("Tell me about rivers", "demo+tps=2000,demo+error", stream=io.StringIO())
    loaded = traces.load_turns(tmp_path / "cache", progress=False)
    with ThreadPoolExecutor(1) as pool:
        traces.sync(tmp_path / "cache", tmp_path / "ds", executor=pool)
    queried = traces.query("SELECT * FROM turns", tmp_path / "ds")
    arrow = traces.dataset(tmp_path / "ds").to_table().to_pandas()  # pyarrow's own conversion
    frames = {"usage": usage_frame(fresh_session.usage.rows()), "compare": c.frame, "query": queried}
    floats = {"cost": "cost", "tokens_per_s": "tokens_per_s", "ttft_s": "ttft", "total_s": "latency"}
    counts = ("cached_tokens", "prompt_tokens", "thoughts_tokens", "response_tokens")
    assert all(str(loaded[col].dtype) == "float64" for col in floats.values())
    assert all(str(loaded[col].dtype) == "Int64" for col in counts)
    for name, df in frames.items():
        shared = [(col, like) for col, like in floats.items() if col in df.columns]
        assert shared, name
        for col, like in shared:
            assert df[col].dtype == loaded[like].dtype, (name, col, df[col].dtype)
        for col in counts:
            assert df[col].dtype == loaded[col].dtype, (name, col, df[col].dtype)
    for col in floats.values():  # (pyarrow gives its own dtypes, but these are the loader's)
        assert arrow[col].dtype == loaded[col].dtype, col
    for summarized in (traces.summary(loaded), traces.summary(tmp_path / "ds")):
        for col in ("cost_total", "cost_mean", "latency_p50", "ttft_p90", "tokens_per_s_p99"):
            assert summarized[col].dtype == loaded["cost"].dtype, col
    # the frames of a new chat's turns (no row) too, and one turn's row of the usage frame adds to the loaded turns
    assert usage_frame([])["cost"].dtype == loaded["cost"].dtype
    both = pd.concat([loaded["cost"], frames["usage"]["cost"]], ignore_index=True)
    assert both.dtype == loaded["cost"].dtype
