"""Python callables as tools: schemas from signatures and docstrings, and running a call."""

from __future__ import annotations

import asyncio
import enum
from typing import Literal

import pytest
from tools import broken_tool, get_weather

from mmsp_notebook import OptionError
from mmsp_notebook.core.items import ItemState
from mmsp_notebook.engine.tools import ToolSet, schema_of


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


def forecast(city: str, days: int = 3, unit: Unit = Unit.C, detail: Literal["short", "long"] = "short",
             hours: list[int] | None = None, rain: bool = False, scale: float = 1.0) -> dict:
    """The forecast of a city.

    Args:
        city: The city's name.
        days: How many days ahead.
    """
    return {"city": city, "days": days}


def test_a_schema_comes_from_the_signature_and_the_docstring():
    schema = schema_of(get_weather)
    assert schema["name"] == "get_weather" and schema["description"] == "The current weather of a city."
    props = schema["parameters"]["properties"]
    assert props["city"] == {"type": "string", "description": "The city's name."}
    assert schema["parameters"]["required"] == ["city"]
    f = schema_of(forecast)["parameters"]["properties"]
    assert f["days"]["type"] == "integer" and f["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert f["detail"]["enum"] == ["short", "long"] and f["hours"]["items"] == {"type": "integer"} and f["hours"]["type"] == "array"
    assert f["rain"]["type"] == "boolean" and f["scale"]["type"] == "number"


def test_tool_names_are_checked_once():
    with pytest.raises(OptionError, match="two tools are named 'get_weather'"):
        ToolSet([get_weather, get_weather])
    with pytest.raises(OptionError, match="a tool needs a name"):
        ToolSet([lambda city: city])
    named = ToolSet({"weather_now": lambda city: city})
    assert named.schemas[0]["name"] == "weather_now" and bool(named) and not ToolSet([])


def test_tools_given_as_a_dict_are_named_by_it_and_a_lone_function_or_name_is_refused(fresh_session):
    import io

    from mmsp_notebook import ask

    # the name the refusal of a lambda advises works from ask (and so Chat and compare)
    turn = ask("weather in Paris please", tools={"get_weather": lambda city: f"sunny in {city}"}, stream=io.StringIO())
    assert turn.tool_calls[0]["name"] == "get_weather" and turn.tool_calls[0]["output"] == "sunny in Paris"
    for bad, what in ((get_weather, "function"), ("get_weather", "str"), (5, "int")):
        with pytest.raises(OptionError, match=rf"tools takes a list of functions \(tools=\[f, g\]\) .*not {what}$"):
            ToolSet(bad)
        with pytest.raises(OptionError, match="tools takes a list of functions"):
            ask("hi", tools=bad)


def _call(name: str, arguments: dict) -> ItemState:
    item = ItemState(index=0, kind="tool_call", started=0.0, name=name, tool_call_id="call_1")
    item.done = {"type": "tool_call.done", "name": name, "tool_call_id": "call_1", "arguments": arguments}
    return item


def test_running_a_call_gives_its_value_or_its_error_as_text():
    tools = ToolSet([get_weather, broken_tool, forecast])
    changes = []
    run = asyncio.run(tools.run(_call("get_weather", {"city": "Oslo"}), lambda: changes.append(1)))
    assert run.ok and run.output == "18 degrees celsius and sunny in Oslo" and run.duration >= 0 and len(changes) == 2
    run = asyncio.run(tools.run(_call("forecast", {"city": "Oslo"})))
    assert run.value == {"city": "Oslo", "days": 3} and run.output == '{"city": "Oslo", "days": 3}'
    run = asyncio.run(tools.run(_call("broken_tool", {"city": "Oslo"})))
    assert not run.ok and run.error == "RuntimeError: weather service down for Oslo" and run.output.startswith("error: ")
    run = asyncio.run(tools.run(_call("nope", {})))
    assert "no tool named 'nope'" in run.error
    run = asyncio.run(tools.run(_call("get_weather", {"town": "Oslo"})))  # wrong arguments: an error the model sees
    assert run.error.startswith("TypeError")


def test_a_coroutine_tool_is_awaited_and_cancelled_with_its_turn():
    async def slow(seconds: float) -> str:
        """Wait."""
        await asyncio.sleep(seconds)
        return "done"

    tools = ToolSet([slow])

    async def go():
        task = asyncio.ensure_future(tools.run(_call("slow", {"seconds": 5})))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert asyncio.run(tools.run(_call("slow", {"seconds": 0}))).output == "done"


@pytest.mark.serial  # the watchdog's 2 s, the 3 s timeout, took < 10 s
def test_an_async_tool_that_blocks_the_loop_is_named_and_its_turn_ends_at_the_timeout(fresh_session, caplog):
    """A real streamed turn from the demo server whose async tool blocks the worker loop (time.sleep):
    the watchdog names the tool, the front door ends the turn at its timeout and keeps what arrived,
    and the loop serves the next turn once the tool returns."""
    import io
    import threading
    import time

    from mmsp_notebook import LoopBlockedError, ask
    from mmsp_notebook.engine import worker
    from mmsp_notebook.views.model import waiting_text

    release = threading.Event()
    seen = []

    async def slow_lookup(city: str) -> str:
        """Look up a city, blocking."""
        deadline = time.monotonic() + 30
        while not release.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)  # blocks the loop: no await
        return f"found {city}"

    said = []

    def watch():  # what stalled() and the live view say while the tool blocks
        while not release.is_set() and not said:
            stall = worker.stalled()
            if stall is not None and not seen:
                seen.append(stall)
            turn = fresh_session.turns[-1] if fresh_session.turns else None
            if turn is not None and turn.loop_blocked is not None:
                said.append(waiting_text(turn))
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True).start()
    out = io.StringIO()
    began = time.monotonic()
    try:
        with caplog.at_level("WARNING", logger="mmsp_notebook"):
            turn = ask("Look up Paris with slow_lookup", tools=[slow_lookup], timeout=3, stream=out, trace=False)
        took = time.monotonic() - began
    finally:
        release.set()
    assert took < 10, f"the front door waited {took:.1f} s for a blocked loop"
    assert turn.status == "error" and isinstance(turn.error, LoopBlockedError)
    assert turn.error.stall.tool == "slow_lookup" and not turn.error.interrupted
    assert "the async tool 'slow_lookup'" in str(turn.error) and "plain def tool" in str(turn.error)
    text = out.getvalue()
    assert "[tool call] slow_lookup" in text and "LoopBlockedError" in text  # partial output kept, marked
    assert turn.tool_calls and turn.tool_calls[0]["name"] == "slow_lookup"
    assert seen and seen[0].tool == "slow_lookup" and "in slow_lookup" in (seen[0].where or "")
    assert said and said[0].startswith("the async tool 'slow_lookup' (") and "is blocking the event loop… " in said[0]
    assert "plain def tool" in said[0] and "interrupt (■) ends the turn, or it ends after 3 s" in said[0]
    [warning] = [r for r in caplog.records if "slow_lookup" in r.getMessage()]
    assert "is blocking it" in warning.getMessage() and "plain def tool" in warning.getMessage()
    # the loop turns again once the tool returns, and serves the next turn
    after = ask("hello", stream=io.StringIO(), trace=False)
    assert after.status == "complete" and worker.stalled() is None


@pytest.mark.serial  # the watchdog (BLOCKED_AFTER) must see the loop turn
def test_a_loop_waiting_for_the_network_is_not_blocked():
    import time

    from mmsp_notebook.engine import worker

    async def nap():
        await asyncio.sleep(worker.BLOCKED_AFTER + 0.5)

    future = worker.submit(nap())
    time.sleep(worker.BLOCKED_AFTER + 0.2)
    assert worker.stalled() is None
    future.result(5)


def test_a_tool_whose_name_or_description_holds_a_lone_surrogate_is_refused_before_a_request():
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: The city.
        """
        return city

    lookup.__doc__ = "Look a city up\udcff."
    with pytest.raises(OptionError, match=r"the description of the tool 'lookup' holds a lone surrogate \('\\udcff'\)"):
        ToolSet([lookup])
    lookup.__doc__ = "Look a city up.\n\nArgs:\n    city: The c\udc80ity."
    with pytest.raises(OptionError, match=r"the description of 'city' in the tool 'lookup' holds a lone surrogate"):
        ToolSet([lookup])
    with pytest.raises(OptionError, match=r"the tool name 'x\\udcff' holds a lone surrogate"):
        ToolSet({"x\udcff": get_weather})
