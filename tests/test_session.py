"""What a session keeps: shared clients per endpoint, bounded turns, usage rows, one trace per conversation."""

from __future__ import annotations

import base64
import gc
import io
import json
import math
import os
import warnings

import pytest
from sse_scripts import mmsp_event, mmsp_text, script_server

import mmsp_notebook as mn
from mmsp_notebook import traces
from mmsp_notebook.core.store import read_sidecar, sidecar_path, tracer_path
from mmsp_notebook.engine.session import KEEP_TURNS
from mmsp_notebook.front.frames import usage_frame


def ask(prompt, **kw):
    return mn.ask(prompt, stream=io.StringIO(), **kw)


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def test_conversations_share_one_client_per_endpoint_and_keep_their_own_history(fresh_session):
    for i in range(12):
        turn = ask(f"question {i}", chat=f"c{i}", max_tokens=20)
        assert turn.status == "complete"
    ask("again", chat="c3", max_tokens=20)
    assert len(fresh_session.clients) == 1  # was one client (and its HTTP connection pool) per conversation
    for i in range(12):
        history = fresh_session.conversation(f"c{i}").history()
        users = [m["content_items"][0]["text"] for m in history if m["role"] == "user"]
        assert users == ([f"question {i}", "again"] if i == 3 else [f"question {i}"])
    ask("through another protocol", chat="c0", client_type="openai-chat", max_tokens=20)
    assert len(fresh_session.clients) == 2
    assert len(fresh_session.conversation("c0").history()) == 4  # a new endpoint keeps the history


def test_a_client_class_is_imported_off_the_worker_loop_once_per_endpoint(fresh_session, monkeypatch):
    # a provider's SDK is imported when its first client is made (anthropic: seconds); on the worker
    # loop that would hold every other turn, chat and comparison of the kernel meanwhile
    import asyncio

    import mmsp.auto_client

    real, calls = mmsp.auto_client._client_class, []

    def client_class(client_type, model):
        try:
            asyncio.get_running_loop()
            calls.append((client_type, "loop"))
        except RuntimeError:
            calls.append((client_type, "thread"))
        return real(client_type, model)

    monkeypatch.setattr(mmsp.auto_client, "_client_class", client_class)
    assert ask("hi", client_type="ant-messages", chat="a", max_tokens=5).status == "complete"
    assert calls[0] == ("ant-messages", "thread")  # the first call, which imports: not on the loop
    n = len(calls)
    assert ask("again", client_type="ant-messages", chat="b", max_tokens=5).status == "complete"
    assert len(calls) == n  # the endpoint's client is shared: nothing imported or made again
    calls.clear()
    assert ask("on the wire", client_type="openai-responses", chat="c", max_tokens=5, wire=True).status == "complete"
    assert calls[0] == ("openai-responses", "thread")  # --wire makes its client for the wire proxy the same way


def test_idle_clients_beyond_the_limit_are_closed_and_close_closes_the_rest(fresh_session):
    fresh_session.clients.limit = 2
    kept = []
    for n in range(4):
        ask("hi", model=f"demo+tps={100 + n}", chat=f"m{n}", max_tokens=5)
        kept.append(next(reversed(fresh_session.clients._clients.values())))
    assert len(fresh_session.clients) == 2 and fresh_session.clients.closed == 2
    http = [client._client._client for client in kept]
    assert [h.is_closed for h in http] == [True, True, False, False]
    fresh_session.close()
    assert all(h.is_closed for h in http)
    assert ask("after close", max_tokens=5).status == "complete"  # the session stays usable


def test_a_new_value_of_the_key_variable_gets_a_new_client(fresh_session, monkeypatch):
    def script(request, auth):
        return [*mmsp_text(auth.split()[-1]), mmsp_event(stop=True)]

    with script_server(script) as url:
        monkeypatch.setenv("ROTATED_API_KEY", "first-key-000")
        assert ask("hi", model="m", client_type="mmsp", base_url=url, api_key_env="ROTATED_API_KEY").text == \
            "first-key-000"
        monkeypatch.setenv("ROTATED_API_KEY", "second-key-000")
        assert ask("hi", model="m", client_type="mmsp", base_url=url, api_key_env="ROTATED_API_KEY").text == \
            "second-key-000"


def test_the_session_keeps_recent_turns_whole_and_every_turn_as_a_usage_row(fresh_session):
    n = KEEP_TURNS + 8
    for i in range(n):
        ask(f"q{i}", chat="even" if i % 2 == 0 else "odd", max_tokens=5)
    assert len(fresh_session.turns) == KEEP_TURNS
    rows = fresh_session.usage.rows()
    assert len(rows) == n and [r["status"] for r in rows] == ["complete"] * n
    df = usage_frame(rows)
    assert len(df) == n and str(df["prompt_tokens"].dtype) == "Int64"
    assert len(fresh_session.usage.rows(chat="odd")) == n // 2
    gc.collect()
    assert len(fresh_session.conversation("even").turns) <= KEEP_TURNS  # only turns still alive somewhere


def test_memory_per_new_conversation_stays_small(fresh_session):
    for i in range(20):
        ask("warm up", chat=f"w{i}", max_tokens=20)
    gc.collect()
    before = rss_mb()
    for i in range(200):
        ask("Tell me about pandas", chat=f"c{i}", max_tokens=20)
    gc.collect()
    grown = rss_mb() - before
    # a client per conversation cost ~860 KB each (~170 MB here); now the demo server's own records
    # and the conversations' histories are most of it
    assert grown < 20, f"RSS grew {grown:.1f} MB over 200 conversations"


def _bytes_under(root):
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_a_conversation_has_one_trace_whose_size_grows_with_its_content(fresh_session, tmp_path):
    cache = tmp_path / "cache"
    sizes = {}
    for i in range(1, 31):
        turn = ask(f"question {i}", max_tokens=20)
        assert turn.status == "complete"
        if i in (10, 30):
            sizes[i] = _bytes_under(cache)
    assert turn.trace_id == "tests/default"
    assert sorted(p.name for p in (cache / "tests").iterdir()) == ["default.json", "default.timing.jsonl",
                                                                   "default.txt"]
    # linear: three times the turns, about three times the bytes (a trace per turn grew ~7x here)
    assert sizes[30] < 3.6 * sizes[10], sizes
    records = list(read_sidecar(sidecar_path(turn.trace_id)))
    assert [r["turn"] for r in records] == list(range(30))
    assert [r["message_index"] for r in records] == list(range(1, 60, 2))
    history = json.loads(tracer_path(turn.trace_id).read_text())["history"]
    assert len(history) == 60
    # the loaders and replay find each turn of the conversation
    rows = traces.load_turns(cache)
    assert len(rows) == 30 and set(rows["trace_id"]) == {"tests/default"}
    fifth = mn.replay(turn.trace_id, turn=4, speed=math.inf, display=False)
    assert fifth.text == history[9]["content_items"][-1]["text"]
    assert mn.replay(rows.iloc[4], speed=math.inf, display=False, root=cache).text == fifth.text


def test_a_fresh_start_or_a_replaced_history_starts_a_new_trace(fresh_session):
    first = ask("one", max_tokens=5)
    fresh = ask("two", max_tokens=5, new=True)
    assert (first.trace_id, fresh.trace_id) == ("tests/default", "tests/default~2")
    conv = fresh_session.conversation(None)
    conv.set_history(conv.history()[:2])
    replaced = ask("three", max_tokens=5)
    assert replaced.trace_id == "tests/default~3"
    history = json.loads(tracer_path(replaced.trace_id).read_text())["history"]
    assert [m["content_items"][0].get("text") for m in history if m["role"] == "user"] == ["two", "three"]


def test_a_trace_id_per_turn_still_works(fresh_session, tmp_path):
    """Traces named per turn (the earlier default, or --trace ID) still load and replay."""
    a = ask("first", trace="old/chat/turn_000", max_tokens=5)
    b = ask("second", trace="old/chat/turn_001", max_tokens=5)
    assert tracer_path(a.trace_id).is_file() and tracer_path(b.trace_id).is_file()
    assert mn.replay("old/chat/turn_000", speed=math.inf, display=False).text == a.text
    rows = traces.load_turns(tmp_path / "cache")
    assert sorted(rows["trace_id"]) == ["old/chat/turn_000", "old/chat/turn_001"]


def test_the_kernels_demo_server_keeps_few_request_records(fresh_session):
    import io

    import mmsp_notebook
    from mmsp_notebook import ask

    for n in range(12):
        ask(f"turn {n}", chat="long", stream=io.StringIO())
    server = fresh_session.demo_server()
    assert len(server.transcripts) == mmsp_notebook.EMBEDDED_TRANSCRIPTS == 8
    assert "turn 11" in str(server.transcripts[-1].request)  # the latest are kept


def test_conversations_whose_names_clean_alike_keep_their_own_traces(fresh_session, tmp_path):
    from mmsp_notebook.engine.launch import check_trace_id

    names = ["a b", "a.b", "a_b", "翻訳", "要約", "demo+nothink"]
    turns = [ask(f"I am {name}", chat=name, max_tokens=5) for name in names]
    ids = [turn.trace_id for turn in turns]
    assert len(set(ids)) == len(names) and ids[2] == "tests/a_b"  # a name that needs no cleaning keeps it
    for name, turn in zip(names, turns):
        check_trace_id(turn.trace_id)
        history = json.loads(tracer_path(turn.trace_id).read_text())["history"]
        assert history[0]["content_items"][0]["text"] == f"I am {name}"  # its own conversation, alone
        assert len(history) == 2
    assert ask("again", chat="翻訳", max_tokens=5).trace_id == ids[3]  # the same name, the same trace


@pytest.mark.serial  # an instant turn within 1 s
def test_demo_instant_set_after_the_first_turn_takes_effect(fresh_session):
    fresh_session.settings.demo_instant = False  # the demo server starts paced
    paced = ask("one", model="demo+nothink+tokens=8", trace=False)
    assert paced.status == "complete" and paced.timings["total"] > 0.3  # a 0.4 s first token
    fresh_session.settings.update({"demo_instant": "true"})  # %mmsp config demo_instant=true
    instant = ask("two", model="demo+nothink+tokens=200", trace=False)
    assert instant.status == "complete" and instant.timings["total"] < 1.0  # paced: 5 s at 40 tokens/s
    fresh_session.settings.update({"demo_instant": "false"})
    again = ask("three", model="demo+nothink+tokens=8", trace=False)
    assert again.timings["total"] > 0.3


def test_a_conversation_with_a_long_name_is_traced_under_a_shortened_id(fresh_session):
    turn = ask("hi", chat="c" * 300, max_tokens=5)
    part = turn.trace_id.split("/")[-1]
    assert turn.status == "complete" and len(part) <= 242 and part.startswith("c" * 200 + "-")
    assert tracer_path(turn.trace_id).is_file() and traces.show(turn.trace_id).turns
    assert ask("hi", chat="c" * 301, max_tokens=5).trace_id != turn.trace_id


def _sent(image):
    import base64

    from PIL import Image

    from mmsp_notebook.engine.session import image_item

    url = image_item(image)["image_url"]
    assert url.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def test_an_animated_pil_image_sends_its_current_frame_and_says_so(tmp_path):
    from PIL import Image

    from mmsp_notebook.engine.session import image_item

    path = tmp_path / "anim.gif"
    frames = [Image.new("RGB", (4, 4), color) for color in ((255, 0, 0), (0, 0, 255), (0, 255, 0))]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=100, loop=0)
    image = Image.open(path)
    image.seek(1)
    with pytest.warns(UserWarning, match="animated image of 3 frames: only its frame 2 is sent"):
        sent = _sent(image)
    assert sent.convert("RGB").getpixel((0, 0)) == (0, 0, 255)
    whole = image_item(path)["image_url"]  # the file itself: sent as it is, every frame
    assert whole.startswith("data:image/gif;base64,") and Image.open(io.BytesIO(base64.b64decode(whole.split(",", 1)[1]))).n_frames == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _sent(Image.new("RGB", (2, 2)))  # a still image: no word


def test_pil_images_of_premultiplied_alpha_keep_their_alpha():
    from PIL import Image

    assert _sent(Image.new("La", (2, 2), (10, 100))).getpixel((0, 0)) == (25, 100)  # 10 premultiplied by 100/255
    sent = _sent(Image.new("RGBa", (2, 2), (10, 20, 30, 100)))
    assert sent.mode == "RGBA" and sent.getpixel((0, 0))[3] == 100


def test_pil_float_and_32_bit_images_are_scaled_not_clipped():
    from PIL import Image

    unit = Image.new("F", (2, 1))
    unit.putpixel((0, 0), 0.0)
    unit.putpixel((1, 0), 1.0)  # a float image of 0–1: was sent black (clipped to 0–255)
    assert [_sent(unit).getpixel((x, 0)) for x in (0, 1)] == [0, 255]
    depth = Image.new("I", (2, 1))
    depth.putpixel((0, 0), -1000)
    depth.putpixel((1, 0), 100_000)  # beyond 16 bits: was white everywhere
    assert [_sent(depth).getpixel((x, 0)) for x in (0, 1)] == [0, 255]
    twelve_bit = Image.new("I", (1, 1), 4000)
    assert _sent(twelve_bit).getpixel((0, 0)) == 4000  # 16-bit values are kept as 16-bit grey


def test_an_empty_or_unreadable_pil_image_is_an_option_error():
    from PIL import Image

    from mmsp_notebook.engine.launch import interpolate

    with pytest.raises(mn.OptionError, match=r"^\{img\}: not an image to send: an empty PIL image \(0×0 pixels\)$"):
        interpolate("see {img}", {"img": Image.new("RGB", (0, 0))})
    buf = io.BytesIO()
    Image.new("RGB", (64, 64)).save(buf, format="PNG")
    truncated = Image.open(io.BytesIO(buf.getvalue()[:60]))  # opened lazily: the damage shows on load
    with pytest.raises(mn.OptionError, match=r"^\{img\}: not an image to send: a PIL image that cannot be read \(OSError: image file is"):
        interpolate("see {img}", {"img": truncated})


@pytest.mark.parametrize("fmt", ["BMP", "TIFF", "ICO"])
def test_image_bytes_of_a_format_pil_reads_are_sent_as_png_not_as_their_repr(fmt, tmp_path):
    """{bmp} put b'BM\\x00...' into the prompt: the bytes' repr, a megabyte of it for a photograph."""
    from PIL import Image

    from mmsp_notebook.engine.launch import interpolate, user_message

    buf = io.BytesIO()
    Image.new("RGB", (3, 2), (200, 10, 10)).save(buf, format=fmt)
    text, images = interpolate("look at {data}", {"data": buf.getvalue()})
    assert text == "look at [image 1]" and len(images) == 1
    assert _sent(buf.getvalue()).getpixel((0, 0))[:3] == (200, 10, 10)
    path = tmp_path / f"picture.{fmt.lower()}"
    path.write_bytes(buf.getvalue())
    assert user_message("look", [str(path)])["content_items"][1]["image_url"].startswith("data:image/png;base64,")
    assert interpolate("say {b}", {"b": b"hello"}) == ("say b'hello'", [])  # bytes that are no image stay text
