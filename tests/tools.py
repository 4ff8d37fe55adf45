"""The tools the tests offer to models: one definition, used in-process and pasted into notebook cells."""

from __future__ import annotations

import inspect


def get_weather(city: str, unit: str = "celsius") -> str:
    """The current weather of a city.

    Args:
        city: The city's name.
        unit: celsius or fahrenheit.
    """
    return f"18 degrees {unit} and sunny in {city}"


def broken_tool(city: str) -> str:
    """Look up the weather, badly."""
    raise RuntimeError(f"weather service down for {city}")


def weather_in(city: str) -> str:
    """What get_weather answers for ``city``."""
    return get_weather(city)


# the same function as notebook source, for cells that run in a real kernel
WEATHER_SOURCE = inspect.getsource(get_weather)
