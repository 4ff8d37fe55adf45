"""What the views say of the unusual (``views/unusual.py``): items of a kind not known here, finish
reasons that are not a normal end, a complete turn with no answer, empty media, and content the
turn state accepts that no view expects: every view shows it, none raises."""

from __future__ import annotations

import math
import re
import typing

import pytest
from helpers import apply_ops

from mmsp_notebook._errors import ProtocolError
from mmsp_notebook.core.turn import Turn
from mmsp_notebook.views.html import render_html
from mmsp_notebook.views.model import OpsTracker, view_model
from mmsp_notebook.views.static import turn_bundle
from mmsp_notebook.views.text import render_text
from mmsp_notebook.views.unusual import EXCERPT_LIMIT, FINISH_MEANINGS, NORMAL_FINISH, finish_stat

FSI, PDI, RLO = "\u2068", "\u2069", "\u202e"
USAGE = {"cached_tokens": 0, "prompt_tokens": 10, "thoughts_tokens": None, "response_tokens": 5}


def delta(item):
    return {"role": "assistant", "event_type": "delta", "content_items": [item], "usage_metadata": None,
            "finish_reason": None, "created_at": 1}


def stop(reason="stop"):
    return {"role": "assistant", "event_type": "stop", "content_items": [], "usage_metadata": USAGE,
            "finish_reason": reason, "created_at": 2}


def group(kind, *parts, **fields):
    """A group: a delta per part (``kind``'s growing field, or the fields given), then its .done."""
    field = {"text": "text", "thinking": "thinking", "inline_data": "data", "embedding": "embedding"}.get(kind)
    if field is None:
        return [delta({"type": f"{kind}.delta", **fields}), delta({"type": f"{kind}.done", **fields})]
    joined = b"".join(parts) if kind == "inline_data" else [v for p in parts for v in p] if kind == "embedding" \
        else "".join(parts)
    return ([delta({"type": f"{kind}.delta", field: p, **fields}) for p in parts]
            + [delta({"type": f"{kind}.done", field: joined, **fields})])


def streamed(events, end=True):
    """A turn fed ``events`` (the ops a live front end got after each one), and those ops applied."""
    turn = Turn(model="m")
    step = turn.new_step()
    tracker, vm = OpsTracker(events=True), {"items": []}
    for event in events:
        step.feed(event)
        apply_ops(vm, tracker.ops(turn))
    if end:
        step.finish()
    apply_ops(vm, tracker.ops(turn, final=True))
    return turn, vm


def live_matches(live, vm):
    """The ops a live front end got give the static view model's kinds, footer and banner."""
    return ([it["kind"] for it in live["items"]] == [it["kind"] for it in vm["items"]]
            and live["footer"] == vm["footer"] and live["banner"] == vm["banner"])


def views(turn):
    """Every static view of ``turn``: its text, its HTML (with its events table), its mime bundle."""
    html = render_html(turn, events=True)
    bundle = turn_bundle(turn)
    assert bundle["text/html"] and bundle["text/plain"]
    return render_text(turn), html


def _no_markup_from(html, *hostile):
    for text in hostile:
        assert text not in html


# ---------------------------------------------------------------------------------------------- unknown kinds
def test_an_item_of_a_kind_not_known_here_shows_its_type_and_what_it_carries():
    turn, live = streamed(group("citation", url="javascript:alert(1)", title="<b>t</b>")
                          + group("audio_transcript", text="hello\nworld \x07" + RLO + "x")
                          + group("text", "hi") + [stop()])
    assert turn.status == "complete" and turn.message["content_items"][0]["type"] == "citation.done"
    vm = view_model(turn)
    citation, transcript = vm["items"][0], vm["items"][1]
    assert (citation["kind"], citation["tag"], citation["meta"]) == ("data", "citation", "url: javascript:alert(1)")
    # a text field is shown as it is: on one line, control characters visible, bidi isolated
    assert transcript["tag"] == "audio_transcript"
    assert transcript["meta"] == f"{FSI}hello world \u2407{RLO}x{PDI}"
    text, html = views(turn)
    assert text.startswith(f"[citation] url: javascript:alert(1)\n[audio_transcript] {FSI}hello world")
    assert '<div class="mmsp-meta">citation · url: javascript:alert(1)</div>' in html
    _no_markup_from(html, "<b>t</b>", 'href="javascript')
    # the live view: the same tag and meta, from the header facts and the .done's
    assert [(it["tag"], it.get("meta")) for it in live["items"][:2]] == [(it["tag"], it["meta"]) for it in vm["items"][:2]]


def test_what_an_unknown_item_carries_is_bounded_escaped_and_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unusual-0123456789abcdefghijklmnop")
    long = "<script>alert(1)</script> " + "word " * 200
    turn, _ = streamed(group("note", caption=long) + group("note", secret="sk-unusual-0123456789abcdefghijklmnop")
                       + group("note", count=3) + [stop()])
    first, second, third = view_model(turn)["items"]
    assert first["meta"].startswith("caption: <script>") and first["meta"].endswith("…")
    assert len(first["meta"]) == EXCERPT_LIMIT
    assert "sk-unusual" not in second["meta"] and "[redacted]" in second["meta"]
    assert third["tag"] == "note" and not third.get("meta")  # no string: only its type
    text, html = views(turn)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "sk-unusual" not in text + html
    # a type that is itself hostile is escaped and isolated like any server string
    turn, _ = streamed(group(f"<i>{RLO}x", text="t") + [stop()])
    assert view_model(turn)["items"][0]["tag"] == f"{FSI}<i>{RLO}x{PDI}"
    assert "<i>" not in views(turn)[1]


# ---------------------------------------------------------------------------------------------- finish reasons
def test_a_finish_reason_that_is_not_a_normal_end_is_a_warning_in_every_footer():
    for reason, said in (("content_filter", "⚠ finish: content_filter — the provider withheld or cut the answer"),
                         ("unknown", "⚠ finish: unknown — the provider ended the answer for a reason mmsp does not know"),
                         ("safety", "⚠ finish: safety — the provider withheld or cut the answer"),
                         ("pause_turn", "⚠ finish: pause_turn"),
                         (f"<b>x</b>{RLO}", f"⚠ finish: {FSI}<b>x</b>{RLO}{PDI}")):
        turn, live = streamed(group("text", "a") + [stop(reason)])
        footer = view_model(turn)["footer"]
        [stat] = [s for s in footer["stats"] if s[0] in ("finish", "warning", "truncated")]
        assert stat[0] == "warning" and stat[1].startswith(said), stat
        assert live["footer"]["stats"] == footer["stats"]  # the widget draws the same footer
        text, html = views(turn)
        assert said in text and "<b>x</b>" not in html
        assert re.search(r'<span class="mmsp-stat mmsp-warning"[^>]*>⚠ finish: ', html)
        assert ".mmsp-warning" in html.partition("</style>")[0]  # drawn in the warning colour, as a truncation is
    # the normal ends are said plainly, a truncation as before
    for reason, said in (("stop", "finish: stop"), ("tool_call", "finish: tool call"), ("length", "⚠ truncated (length)")):
        turn, _ = streamed(group("text", "a") + [stop(reason)])
        assert f"| {said} |" in render_text(turn)


def test_every_finish_reason_of_mmsp_is_worded():
    from mmsp.types import FinishReason

    from mmsp_notebook.core.state import FINISH_REASONS

    for reason in set(typing.get_args(FinishReason)) | set(FINISH_REASONS):
        key, text, _ = finish_stat(reason)
        assert reason in NORMAL_FINISH or text.startswith("⚠"), reason
        assert reason in NORMAL_FINISH or reason == "length" or reason in FINISH_MEANINGS, reason


# ---------------------------------------------------------------------------------------------- no answer
@pytest.mark.parametrize("events", [
    [], group("thinking", "hmm"), group("text", ""), group("text", " \n"),
    group("inline_data", b"", mime_type="image/png"), group("embedding", []),
], ids=["stop only", "thinking only", "empty text", "blank text", "empty image", "empty vector"])
def test_a_complete_turn_with_no_answer_says_so(events):
    turn, live = streamed(events + [stop()])
    assert turn.status == "complete"
    banner = view_model(turn)["banner"]
    assert banner == {"kind": "warn", "text": "(no answer) the model sent no answer: no text, tool call, media or embedding"}
    assert live["banner"] == banner
    text, html = views(turn)
    assert "[complete] (no answer) the model sent no answer" in text
    assert '<div class="mmsp-status mmsp-banner mmsp-warn"' in html and "(no answer)" in html


def test_an_answer_or_an_unfinished_turn_has_no_no_answer_note():
    call = [delta({"type": "tool_call.delta", "name": "f", "tool_call_id": "c", "arguments": "{}"}),
            delta({"type": "tool_call.done", "name": "f", "tool_call_id": "c", "arguments": {}})]
    for events in (group("text", "hi"), call,
                   group("embedding", [0.5]), group("citation", url="u")):
        turn, _ = streamed(events + [stop()])
        assert turn.status == "complete" and view_model(turn)["banner"] is None, events
    turn, _ = streamed(group("thinking", "hmm"))  # no stop: incomplete, and said so
    assert view_model(turn)["banner"]["text"].startswith("ended without a stop event")


# ---------------------------------------------------------------------------------------------- empty media
def test_empty_media_is_said_not_drawn():
    turn, live = streamed(group("inline_data", b"", mime_type="image/png") + group("inline_data", b"", mime_type="audio/wav")
                          + group("text", "hi") + [stop()])
    image, audio = view_model(turn)["items"][:2]
    assert "src" not in image and image["meta"] == "image/png · empty image"
    assert "src" not in audio and audio["meta"] == "audio/wav · empty audio"
    assert [it.get("src") for it in live["items"][:2]] == [None, None]
    text, html = views(turn)
    assert "<img" not in html and "<audio" not in html and "base64," not in html
    assert "[image] image/png · empty image" in text and "image · image/png · empty image" in html


# ---------------------------------------------------------------------------------------------- no view raises
ODD = {
    "nan and infinities": group("embedding", [math.nan, math.inf], [-math.inf, 1.0]),
    "empty vector": group("embedding", []),
    "unknown kinds": group("citation", url="u") + group("x.y", text=None) + group("blob", data=b"\x00"),
    "empty image": group("inline_data", b"", mime_type="image/png"),
    "tool call arguments with NaN": [
        delta({"type": "tool_call.delta", "name": "f", "tool_call_id": "c", "arguments": '{"a": NaN}'}),
        delta({"type": "tool_call.done", "name": "f", "tool_call_id": "c", "arguments": {"a": math.nan}})],
}

#: content the turn state refuses (a protocol error at its event): the turn ends in that error, every view draws it
REFUSED = {
    "no numbers": group("text", "<b>x</b> kept") + group("embedding", [None, "<b>x</b>", True, {"a": 1}, [1, 2],
                                                                        10 ** 400, "y" * 500]),
    "fragments that are no strings": group("text", "<b>x</b> kept") + [delta({"type": "thinking.delta", "thinking": ["a"]})],
    "text that is no string": group("text", "<b>x</b> kept") + [delta({"type": "text.delta", "text": {"k": 1}})],
    "tool call arguments as an object": group("text", "<b>x</b> kept") + [
        delta({"type": "tool_call.delta", "name": "f", "tool_call_id": "c", "arguments": {"a": math.nan}})],
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_content_the_state_refuses_ends_the_turn_in_that_error_and_every_view_draws_it(name):
    turn = Turn(model="m")
    step = turn.new_step()
    tracker, vm = OpsTracker(events=True), {"items": []}
    with pytest.raises(ProtocolError):
        for event in REFUSED[name]:
            step.feed(event)
            apply_ops(vm, tracker.ops(turn))
    apply_ops(vm, tracker.ops(turn, final=True))
    assert turn.status == "error" and isinstance(turn.error, ProtocolError)
    assert turn.text == "<b>x</b> kept"  # the partial answer is kept
    text, html = views(turn)
    assert "ProtocolError" in text and "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt; kept" in html
    assert live_matches(vm, view_model(turn))


@pytest.mark.parametrize("name", list(ODD))
@pytest.mark.parametrize("end", ["stop", "none"])
def test_no_view_raises_on_content_the_state_accepted(name, end):
    events = ODD[name]
    turn, live = streamed(events + ([stop()] if end == "stop" else []))
    assert turn.status in ("complete", "incomplete") and turn.error is None
    vm = view_model(turn)
    text, html = views(turn)
    assert [it["kind"] for it in live["items"]] == [it["kind"] for it in vm["items"]]
    assert live["footer"] == vm["footer"] and live["banner"] == vm["banner"]
    for item, shown in zip(vm["items"], live["items"]):
        assert shown.get("text") == item.get("text") and shown.get("meta") == item.get("meta")
    assert "<b>x</b>" not in html and "yyyyy" * 20 not in text
