"""The explorer's pickers on a hostile frame (``traces._facets``): thousands of distinct values and
values of 100 KB send a bounded page; a long value is picked through its stand-in, a rare one typed."""

from __future__ import annotations

import html
import json
import re

import pandas as pd
from test_explore import capture, inject

from mmsp_notebook import traces
from mmsp_notebook.traces._explore import CODE_CHARS
from mmsp_notebook.traces._facets import FACET_LIMIT, LABEL_CHARS, VALUE_CHARS


def hostile() -> pd.DataFrame:
    """3,000 models seen once; 100 of 100,000 characters seen twice (the most frequent, so offered); one
    of them holds markup and a bidi control; 100 alike in their first characters and their length."""
    huge = [f"{k:03d}" + "h" * 99_997 for k in range(100)]
    huge[7] = "<img src=x onerror=alert(1)>\u202e" + "h" * 99_971
    twins = ["t" * 300 + f"{k:02d}" for k in range(40)]
    models = [m for m in huge for _ in range(2)] + twins + [f"rare-{k:04d}" for k in range(3000)]
    n = len(models)
    return pd.DataFrame({"trace_id": [f"c/{k:05d}" for k in range(n)], "turn": 0, "model": models,
                         "status": "complete", "finish_reason": ["stop"] * (n - 1) + ["x" * 5000]})


def run(code, turns):
    """Copied filter code run as a cell runs it: its statements, then its last line's value."""
    *lines, last = code.splitlines()
    names = {"turns": turns}
    exec("\n".join(lines), names)
    return eval(last, names)


def page_of(explorer, patch=None):
    return inject(explorer, {"type": "query", "patch": patch or {}})


def test_pickers_of_a_hostile_frame_send_a_bounded_page():
    turns = hostile()
    explorer = traces.explore(turns)
    capture(explorer)
    page = page_of(explorer)
    models = page["facets"]["model"]
    assert len(models) == FACET_LIMIT
    assert len(json.dumps(page, ensure_ascii=False).encode()) < 80_000  # (it was 20 MB)
    for item in models:  # each offered value cut: the sent value, its label, its title
        value, label, title = item
        assert len(value) <= VALUE_CHARS + 40 and len(label) <= LABEL_CHARS + 10 and title and len(title) <= VALUE_CHARS + 40
        assert label.endswith(" (2)") and "characters)" in value
    evil = next(label for value, label, _ in models if value.startswith("<img"))
    assert evil.startswith("\u2068<img src=x onerror=alert(1)>\u202e") and evil.endswith("…\u2069 (2)")  # bidi isolated
    assert page["facet_other"] == {"model": "type a value… (3,040 more values)"}
    assert [len(it) for it in page["facets"]["status"]] == [2] and "status" not in page["facet_other"]
    finish = page["facets"]["finish"]
    assert finish[0] == ["stop", f"stop ({len(turns) - 1:,})"] and len(finish[1][0]) < 300
    # a frame whose pickers leave nothing out sends no count (its pages as small as before)
    few = traces.explore(turns.tail(20))
    capture(few)
    assert "facet_other" not in page_of(few)


def test_a_long_value_is_picked_through_its_stand_in_and_a_rare_one_typed():
    turns = hostile()
    explorer = traces.explore(turns)
    capture(explorer)
    page = page_of(explorer)
    stand_in = next(it[0] for it in page["facets"]["model"] if it[0].startswith("003"))
    assert stand_in == "003" + "h" * (VALUE_CHARS - 3) + "… (100,000 characters)"
    picked = page_of(explorer, {"model": [stand_in], "page": 0})  # as the front end sends it back
    assert picked["matched"] == 2 and set(explorer.filtered["model"]) == {turns["model"][6]}
    assert explorer.query["model"] == [turns["model"][6]]  # the value itself, for filter_code and pandas
    assert picked["query"]["model"] == [stand_in]  # the page echoes the stand-in: its option stays selected
    # the filter as pandas code holds the value whole (Copy filter gives code that runs): too long to
    # come with each page, it is sent when Copy filter asks for it
    assert picked["code"] is None and len(explorer.filter_code) > CODE_CHARS
    assert len(json.dumps(picked, ensure_ascii=False)) < 80_000
    code = inject(explorer, {"type": "code"})
    assert code["type"] == "code" and code["code"] == explorer.filter_code
    assert eval(code["code"], {"turns": explorer.turns}).index.tolist() == explorer.filtered.index.tolist()
    # a short one comes with the page
    assert page_of(explorer, {"model": ["rare-0001"]})["code"] == explorer.filter_code
    # values alike in their first characters and length have stand-ins of their own
    twins = [m for m in turns["model"].unique() if m.startswith("t" * 300)]
    stand_ins = set()
    for twin in twins[:5]:
        explorer.filter(model=[twin])
        page = page_of(explorer)
        sent = page["query"]["model"][0]
        assert sent not in stand_ins and len(sent) < VALUE_CHARS + 40
        stand_ins.add(sent)
        assert page_of(explorer, {"model": [sent]})["matched"] == 1 and explorer.query["model"] == [twin]
        assert [it for it in page["facets"]["model"] if it[0] == sent], "a value picked is offered"
    # a rare value typed in the picker is taken as written
    typed = page_of(explorer, {"model": ["rare-2999"], "page": 0})
    assert typed["matched"] == 1 and typed["facets"]["model"][-1] == ["rare-2999", "rare-2999"]
    # a picked list of thousands echoes a bounded part of it
    explorer.filter(model=[f"rare-{k:04d}" for k in range(3000)])
    page = page_of(explorer)
    assert page["matched"] == 3000 and len(page["query"]["model"]) == FACET_LIMIT
    assert page["code"] is None  # 3,000 values: asked for by Copy filter
    assert len(json.dumps(page, ensure_ascii=False)) < 80_000
    # a saved view shows it cut: CODE_CHARS characters, the last of them the mark of the cut
    summary = html.unescape(re.search(r'<div class="mmsp-x-summary">(.*?)</div>', explorer.static_html()).group(1))
    shown = summary.split(" · ", 2)[2]
    assert len(shown) == CODE_CHARS and shown.endswith("…") and explorer.filter_code.startswith(shown[:-1])


def test_a_value_holding_a_key_crosses_redacted_and_picks_its_own_rows():
    """Model ids holding a key (two that redact alike, a URL with a password) are offered as stand-ins:
    no page, echo, code or saved view holds a key, and each stand-in picks its own value's rows; a
    value of the column that reads as a stand-in does stays itself."""
    key_a, key_b = "sk-" + "a1" * 12, "sk-" + "b2" * 12
    keyed_a, keyed_b = f"gpt-x?key={key_a}", f"gpt-x?key={key_b}"
    url = "https://user:hunter2secret@llm.example/v1/m"
    literal = "gpt-x?key=[redacted]"  # a model named so: not merged with the redacted ones
    models = [keyed_a] * 3 + [keyed_b] * 2 + [literal] + [url] * 4 + ["demo"] * 5
    turns = pd.DataFrame({"trace_id": [f"c/{k:02d}" for k in range(len(models))], "turn": 0, "model": models,
                          "status": "complete", "finish_reason": "stop"})
    explorer = traces.explore(turns)
    capture(explorer)
    secrets = (key_a, key_b, "hunter2secret")

    def clean(payload):
        text = json.dumps(payload, ensure_ascii=False)
        assert not [s for s in secrets if s in text], text

    page = page_of(explorer)
    clean(page)
    options = {label: value for value, label, *_ in page["facets"]["model"]}
    assert len(set(options.values())) == 5  # five values, five options
    assert options["gpt-x?key=[redacted] (1)"] == literal  # sent as itself
    assert {options["gpt-x?key=[redacted] #2 (3)"], options["gpt-x?key=[redacted] #3 (2)"]} == {
        "gpt-x?key=[redacted] #2", "gpt-x?key=[redacted] #3"}
    for value, label, *_ in page["facets"]["model"]:
        picked = page_of(explorer, {"model": [value], "page": 0})  # as the front end sends it back
        clean(picked)
        real = explorer.query["model"]
        assert len(real) == 1 and picked["matched"] == models.count(real[0]) and set(explorer.filtered["model"]) == set(real)
        assert label.endswith(f" ({models.count(real[0])})")  # the option's count is its value's
        assert picked["query"]["model"] == [value]  # its option stays selected
        if real[0] != value:  # a stand-in: the filter's code is asked for by Copy filter
            assert picked["code"] is None
            code = inject(explorer, {"type": "code"})["code"]
            clean(code)  # the value named by its redacted form, which this kernel turns back into it
            assert code.startswith("from mmsp_notebook.traces import held_value") and "held_value(" in code
            assert run(code, explorer.turns).index.tolist() == explorer.filtered.index.tolist()
        clean(explorer.static_html())
    # the stand-ins pick the values whose counts their labels give
    assert page_of(explorer, {"model": [options["gpt-x?key=[redacted] #2 (3)"]]})["matched"] == 3
    assert explorer.query["model"] == [keyed_a]
    assert page_of(explorer, {"model": [options["gpt-x?key=[redacted] #3 (2)"]]})["matched"] == 2
    assert explorer.query["model"] == [keyed_b]
    # a value with a key typed in the picker, or given to filter(): echoed as a stand-in, its rows matched
    typed = page_of(explorer, {"model": [url], "page": 0})
    clean(typed)
    assert typed["matched"] == 4 and typed["query"]["model"] == ["https://user:[redacted]@llm.example/v1/m"]
    clean(page_of(explorer.filter(model=[keyed_b, "other?key=" + key_a])))


def test_a_copied_filter_names_a_key_it_holds_and_runs_in_its_kernel():
    """A search term holding a key: Copy filter gets code that names it redacted (the kernel turns the
    name back into the value), runs to the same rows, and says what a name this kernel lost is."""
    import pytest

    from mmsp_notebook import OptionError

    key = "sk-" + "c3" * 12
    models = [f"gpt-x?key={key}"] * 3 + ["demo"] * 2
    turns = pd.DataFrame({"trace_id": [f"c/{k:02d}" for k in range(len(models))], "turn": 0, "model": models,
                          "status": "complete", "finish_reason": "stop"})
    explorer = traces.explore(turns)
    capture(explorer)
    explorer.filter(f"model:{key} status:complete")
    code = inject(explorer, {"type": "code"})["code"]
    assert key not in code and 'held_value("[redacted]' in code
    assert len(run(code, explorer.turns)) == 3
    assert run(code, explorer.turns).index.tolist() == explorer.filtered.index.tolist()
    assert key in explorer.filter_code  # the code whole, in Python
    with pytest.raises(OptionError, match="holds no such value"):
        traces.held_value("gpt-y?key=[redacted] #9")


def test_a_search_word_holding_a_key_is_echoed_named_and_taken_back():
    """A search text given to filter() with a key in a word: the page echoes the word by its name, and
    the text the front end sends back (as echoed, or edited around the name) searches for the key."""
    key, other = "sk-" + "d4" * 12, "sk-" + "e5" * 12
    models = [f"gpt-x?key={key}"] * 3 + [f"gpt-x?key={other}"] * 2 + ["demo"] * 2
    turns = pd.DataFrame({"trace_id": [f"c/{k:02d}" for k in range(len(models))], "turn": 0, "model": models,
                          "status": ["complete", "complete", "error", "complete", "complete", "complete", "error"],
                          "finish_reason": "stop"})
    explorer = traces.explore(turns)
    sent = capture(explorer)
    explorer.filter(f"model:{key}")
    page = page_of(explorer)
    assert page["matched"] == 3 and page["query"]["text"] == "model:[redacted]"
    assert key not in json.dumps(sent, ensure_ascii=False) and key not in explorer.static_html()
    # sent back as echoed, and edited around the name: the key's rows still
    assert page_of(explorer, {"text": "model:[redacted]", "page": 0})["matched"] == 3
    assert explorer.query["text"] == f"model:{key}"
    edited = page_of(explorer, {"text": "model:[redacted] status:complete", "page": 0})
    assert edited["matched"] == 2 and edited["query"]["text"] == "model:[redacted] status:complete"
    # two keys, named apart; a word typed as "[redacted]" once no key is echoed is searched as written
    explorer.filter(f"{key} OR {other}".replace(" OR ", " "))
    page = page_of(explorer)
    names = page["query"]["text"]
    assert key not in names and other not in names and "[redacted]" in names and "#" in names
    assert page_of(explorer, {"text": names, "page": 0})["matched"] == 0  # (both words: no model holds both)
    assert explorer.query["text"].split() == [key, other]
    explorer.filter("demo")
    page_of(explorer)
    assert page_of(explorer, {"text": "[redacted]", "page": 0})["matched"] == 0
    assert explorer.query["text"] == "[redacted]"
    assert key not in json.dumps(sent, ensure_ascii=False) and other not in json.dumps(sent, ensure_ascii=False)
