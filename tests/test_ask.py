"""``aask`` (mmsp_notebook/front/ask.py) while an ``async def`` tool blocks the worker loop: the turn
ends as the magic's and ``Chat.send``'s do, with a LoopBlockedError and what arrived kept."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mmsp_notebook import LoopBlockedError, TurnError, aask

#: the most a blocking tool here holds the loop (without the front door's watch, the turn would end
#: only then)
HOLD = 12.0


def blocking_tool(release: threading.Event):
    async def slow_lookup(city: str) -> str:
        """Look up a city, blocking."""
        deadline = time.monotonic() + HOLD
        while not release.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)  # no await: the worker loop stops turning
        return f"found {city}"

    return slow_lookup


@pytest.mark.serial  # the watchdog's 2 s, the 3 s timeout, took < 8 s
def test_aask_ends_a_turn_whose_async_tool_blocks_the_loop_at_its_timeout(fresh_session):
    release = threading.Event()
    began = time.monotonic()
    try:
        turn = asyncio.run(aask("Look up Paris with slow_lookup", tools=[blocking_tool(release)], timeout=3,
                                trace=False))
        took = time.monotonic() - began
    finally:
        release.set()
    assert took < 8, f"aask waited {took:.1f} s for a blocked loop"
    assert turn.status == "error" and isinstance(turn.error, LoopBlockedError)
    assert turn.error.stall.tool == "slow_lookup" and not turn.error.interrupted
    assert "the async tool 'slow_lookup'" in str(turn.error) and "after 3 s" in str(turn.error)
    assert turn.tool_calls and turn.tool_calls[0]["name"] == "slow_lookup"  # what arrived is kept
    assert turn.thinking  # (the step before the tool call too)
    assert turn.loop_blocked is None  # no longer said to be blocked: it has ended
    assert fresh_session.last_turn is turn and fresh_session.last_error is turn.error
    # the loop turns again once the tool returns, and serves the next turn
    assert asyncio.run(aask("hello", trace=False)).status == "complete"


@pytest.mark.serial  # the watchdog's 2 s must pass within the 2 s timeout
def test_aask_in_strict_mode_raises_the_turn_error_from_the_loop_blocked_error(fresh_session):
    release = threading.Event()
    try:
        with pytest.raises(TurnError, match="turn error: LoopBlockedError") as caught:
            asyncio.run(aask("Look up Paris with slow_lookup", tools=[blocking_tool(release)], timeout=2,
                             trace=False, strict=True))
    finally:
        release.set()
    assert isinstance(caught.value.__cause__, LoopBlockedError)
    assert caught.value.turn.tool_calls[0]["name"] == "slow_lookup"


def cancel_while_blocked(start: Callable[[], Awaitable[Any]], release: threading.Event) -> float:
    """Await ``start()`` until its tool has blocked the worker loop, cancel the await; the seconds
    the cancelled await took to end (the tool is released afterwards)."""
    from mmsp_notebook.engine import worker

    async def main() -> float:
        task = asyncio.ensure_future(start())
        while worker.stalled() is None:  # until the tool has blocked the loop (the watchdog says so)
            await asyncio.sleep(0.05)
        task.cancel()
        began = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - began

    try:
        return asyncio.run(asyncio.wait_for(main(), HOLD - 2))
    finally:
        release.set()


def assert_cancelled_while_blocked(turn: Any) -> None:
    assert turn.status == "cancelled" and isinstance(turn.error, LoopBlockedError) and turn.error.interrupted
    assert turn.error.stall.tool == "slow_lookup" and turn.tool_calls[0]["name"] == "slow_lookup"


@pytest.mark.serial  # the cancel must end the turn within 1 s
def test_cancelling_aask_while_the_loop_is_blocked_ends_the_turn_at_once(fresh_session):
    release = threading.Event()
    took = cancel_while_blocked(lambda: aask("Look up Paris with slow_lookup", tools=[blocking_tool(release)],
                                             timeout=60, trace=False), release)
    assert took < 1.0
    assert_cancelled_while_blocked(fresh_session.turns[-1])


def test_an_unknown_keyword_is_refused_naming_ask_or_aask_and_their_options(fresh_session):
    import mmsp_notebook as m

    with pytest.raises(TypeError, match=r"^ask\(\) got an unexpected keyword argument 'bogus'; it takes stream, "
                                        r"strict, events, model, .*system, .*chat, new, trace, images, wire$"):
        m.ask("hi", bogus=1)
    with pytest.raises(TypeError, match=r"^aask\(\) got an unexpected keyword argument 'sytem' "
                                        r"\(did you mean 'system'\?\); it takes strict, model, ") as info:
        asyncio.run(aask("hi", sytem="Be brief"))
    assert "launch" not in str(info.value) and "stream" not in str(info.value)
    assert fresh_session.turns == []  # refused before anything was sent


def test_a_stream_that_cannot_be_written_and_a_flag_that_is_no_bool_are_refused_before_a_request(fresh_session):
    """ask(stream="out.txt") used to send the request, then fail in the view; strict="false" was true."""
    import io

    import mmsp_notebook as m
    from mmsp_notebook import OptionTypeError

    with pytest.raises(OptionTypeError, match=r"^ask: stream takes a text stream to write to .* not str 'out.txt'"):
        m.ask("hi", stream="out.txt")
    for flag in ("strict", "events"):
        with pytest.raises(OptionTypeError, match=rf"^ask: {flag} takes True or False \(None: the kernel's setting\), "
                                                  r"not str 'false'"):
            m.ask("hi", stream=io.StringIO(), **{flag: "false"})
    with pytest.raises(OptionTypeError, match=r"^aask: strict takes True or False"):
        asyncio.run(aask("hi", strict=2))
    assert fresh_session.turns == []  # refused before anything was sent
    assert m.ask("hi", stream=io.StringIO(), strict=False, events=None).status == "complete"


def test_new_and_wire_that_are_no_bool_are_refused_before_a_request(fresh_session):
    """ask(wire="false") captured the wire and ask(new="false") forgot the conversation: a string is true."""
    import io

    import mmsp_notebook as m
    from mmsp_notebook import OptionTypeError

    for flag in ("new", "wire"):
        with pytest.raises(OptionTypeError, match=rf"^{flag} takes True or False, not str 'false'"):
            m.ask("hi", stream=io.StringIO(), **{flag: "false"})
        with pytest.raises(OptionTypeError, match=rf"^{flag} takes True or False, not int 2"):
            asyncio.run(aask("hi", **{flag: 2}))
    assert fresh_session.turns == []  # refused before anything was sent
    assert m.ask("hi", stream=io.StringIO(), new=False, wire=False).wire is None


def test_an_image_that_cannot_be_sent_is_named_with_why_and_one_path_is_one_image(fresh_session, tmp_path):
    """images=["missing.png"] said "not an image: str (give ... a path)" to a user who gave a path, and
    images="cat.png" (one path, not a list) was read letter by letter."""
    import base64
    import io

    import mmsp_notebook as m
    from mmsp_notebook import OptionError

    with pytest.raises(OptionError, match=r"^not an image: no file '.*missing\.png' \(give a PIL image"):
        m.ask("hi", images=[str(tmp_path / "missing.png")], stream=io.StringIO())
    (tmp_path / "notes.png").write_text("not a picture")
    with pytest.raises(OptionError, match=r"^not an image: '.*notes\.png' is not a PNG, JPEG, GIF or WebP file"):
        m.ask("hi", images=[tmp_path / "notes.png"], stream=io.StringIO())
    with pytest.raises(OptionError, match=r"^not an image: '.*' is not a file"):
        m.ask("hi", images=[str(tmp_path)], stream=io.StringIO())
    with pytest.raises(OptionError, match=r"^not an image: these 3 bytes are not PNG, JPEG, GIF or WebP data"):
        m.ask("hi", images=[b"abc"], stream=io.StringIO())
    assert fresh_session.turns == []  # refused before anything was sent
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
    (tmp_path / "cat.png").write_bytes(png)
    (tmp_path / "cat").write_bytes(png)  # named as an image: read whatever its name ends with
    for images in (str(tmp_path / "cat.png"), [str(tmp_path / "cat")], png):
        turn = m.ask("hi", images=images, stream=io.StringIO())
        sent = [item for item in turn.prompt["content_items"] if item["type"] == "image_url.done"]
        assert turn.status == "complete" and len(sent) == 1 and sent[0]["image_url"].startswith("data:image/png;base64,")


def test_strict_ask_is_shown_by_ipython_through_the_caller_s_frames_only(fresh_session, capsys):
    """ask(strict=True) in a notebook: IPython shows the TurnError through the cell's frames, without
    the package's frames or its cause's traceback through mmsp's client and httpx; the error keeps its
    cause and the partial turn, and what arrived stays shown, marked incomplete."""
    import sys

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    import mmsp_notebook

    start_ipython()
    ip = InteractiveShell.instance()
    ip.user_ns["out"] = out = __import__("io").StringIO()
    capsys.readouterr()
    result = ip.run_cell("from mmsp_notebook import ask\n"
                         "def pipeline(p):\n"
                         "    return ask(p, model='demo+cut-text', strict=True, stream=out, trace=False)\n"
                         "pipeline('hello')")
    shown = capsys.readouterr()
    shown = shown.out + shown.err
    assert isinstance(result.error_in_exec, TurnError)
    assert "pipeline('hello')" in shown and "return ask(p, model='demo+cut-text'" in shown  # the caller's frames
    assert "TurnError: turn incomplete: RemoteProtocolError" in shown and "(the full detail: %mmsp error)" in shown
    package = str(__import__("pathlib").Path(mmsp_notebook.__file__).parent)
    assert package not in shown and "httpx" not in shown and "direct cause" not in shown, shown
    exc = sys.last_value
    assert type(exc.__cause__).__name__ == "RemoteProtocolError" and exc.__cause__ is exc.turn.error
    assert exc.turn.status == "incomplete" and exc.turn.text and exc.turn.text in out.getvalue()
    assert fresh_session.last_error is exc.turn.error  # %mmsp error shows it whole


def test_strict_ask_s_shown_traceback_leaves_out_the_package_outside_a_shell_too(fresh_session):
    import traceback

    import mmsp_notebook
    from mmsp_notebook import ask

    with pytest.raises(TurnError) as info:
        ask("hello", model="demo+error", strict=True, stream=__import__("io").StringIO(), trace=False)
    shown = "\n".join(info.value._render_traceback_())
    package = str(__import__("pathlib").Path(mmsp_notebook.__file__).parent)
    assert "test_ask.py" in shown and package not in shown and "direct cause" not in shown
    assert shown.rstrip().endswith("(the full detail: %mmsp error)")
    assert package in "".join(traceback.format_exception(info.value))  # the error itself is unchanged
    assert info.value.__cause__ is info.value.turn.error
    # a comparison's too
    with pytest.raises(TurnError) as info:
        mmsp_notebook.compare("hello", "demo,demo+error", strict=True, trace=False)
    shown = "\n".join(info.value._render_traceback_())
    assert "test_ask.py" in shown and package not in shown and "comparison error" in shown
