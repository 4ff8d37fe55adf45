"""The demo models and what an answer is made of: model names, requests, plans of streamed blocks.

Nothing here speaks HTTP. A protocol's request is first read into a :class:`DemoRequest`
(``_requests``); ``_answer.build_plan`` turns it and the parsed model name (:func:`parse_model`)
into a :class:`Plan`: the blocks to stream (thinking, text, tool calls, an image, audio,
embeddings), each already cut into the fragments that go out one by one, the finish reason, the
usage and the fault to inject. The plan is deterministic: its random choices are seeded from a
hash of the request (:func:`request_seed`), so the same request always gets the same answer.

A "token" is one streamed fragment: a word with the whitespace before it, a piece of tool
arguments, an audio chunk, an image.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from .._errors import DemoServerError

__all__ = [
    "DEMO_MODELS",
    "FAULTS",
    "SILENCE_HEARTBEAT",
    "XSS_PAYLOADS",
    "Block",
    "DemoRequest",
    "ModelSpec",
    "Plan",
    "ToolSpec",
    "Turn",
    "Usage",
    "parse_model",
    "request_seed",
    "tokenize",
]

DEMO_MODELS: dict[str, dict[str, Any]] = {
    "demo": {
        "description": (
            "Offline chat model: thinks, then answers in Markdown (heading, list, table, code); calls an "
            "offered tool the prompt mentions; quotes tool results; draws a PNG ('draw', 'picture', "
            "'image of') and speaks 24 kHz PCM ('say', 'speak') on the MMSP endpoint."
        ),
        "capabilities": ["text", "thinking", "tools", "image_output", "audio_output"],
        "endpoints": ["/v1/stream", "/v1/chat/completions", "/v1/responses", "/v1/messages"],
    },
    "demo-embed": {
        "description": "Offline embedding model: one deterministic unit vector per new input (64 dimensions by default).",
        "capabilities": ["embedding"],
        "endpoints": ["/v1/stream", "/v1/embeddings"],
    },
}

# Faults that end or replace the normal answer; at most one per model name. `silence` is a
# prelude, not a fault of its own, and combines with any of them.
FAULTS = ("cut-text", "cut-args", "error", "nostop", "bad-args", "401", "429", "stall")

# options that are on when named and take no value
_FLAGS = ("instant", "xss", "nothink")

XSS_PAYLOADS = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "<svg onload=alert(1)>",
)

DEFAULT_SILENCE = 3.0
SILENCE_HEARTBEAT = 1.0  # seconds between the heartbeats of a +silence, at most
DEFAULT_RETRY_AFTER = 1
DEFAULT_DIMENSIONS = 64
#: The most an answer's ``+tokens=N`` and an embedding's dimensions may ask for: a plan is built
#: whole before it streams, so a few zeros too many would fill the memory of the process serving it
#: (the kernel, for the embedded server) and hold every other request meanwhile.
MAX_TOKENS = 1_000_000
#: The most rows an answer's ``+rows=N`` table may have (a row streams as ~10 fragments).
MAX_ROWS = 100_000
MAX_DIMENSIONS = 65_536
IMAGE_PROMPT_TOKENS = 258
PSEUDO_TOOL = "demo_lookup"

_TOKEN = re.compile(r"\s*\S+|\s+")


def tokenize(text: str) -> list[str]:
    """Cut text into the fragments it streams as: each word with the whitespace before it.

    ``"".join(tokenize(text)) == text`` always holds.
    """
    return _TOKEN.findall(text)


# ---------------------------------------------------------------------------------------------
# model names


@dataclass(frozen=True)
class ModelSpec:
    """A model name read: its base model and the options appended with ``+``.

    Attributes:
        name: The name as requested.
        base: ``demo`` or ``demo-embed``.
        instant: No pacing at all (``+instant``).
        tokens: Answer with a text of about this many tokens (``+tokens=N``).
        rows: Answer with a Markdown table of this many rows (``+rows=N``).
        tps: Tokens per second (``+tps=N``).
        delay: First-token delay in seconds (``+delay=S``).
        xss: Put script payloads into thinking, text and tool arguments (``+xss``).
        thinking: Whether to think first (``+nothink`` turns it off).
        fault: One of :data:`FAULTS`, or None.
        retry_after: The Retry-After seconds of ``+429`` (``+429=S``).
        silence: Seconds of silence (heartbeats only) before the answer (``+silence[=S]``).
        dimensions: Embedding dimensions (``+dim=N``).
    """

    name: str
    base: str
    instant: bool = False
    tokens: int | None = None
    rows: int | None = None
    tps: float | None = None
    delay: float | None = None
    xss: bool = False
    thinking: bool = True
    fault: str | None = None
    retry_after: int = DEFAULT_RETRY_AFTER
    silence: float | None = None
    dimensions: int | None = None


def _number(name: str, option: str, value: str | None, kind: type, minimum: float,
            maximum: float = float("inf")) -> Any:
    if value is None:
        raise DemoServerError(f"model {name!r}: option +{option} needs a value, e.g. +{option}=10")
    try:
        number = kind(value)
    except ValueError:
        raise DemoServerError(f"model {name!r}: +{option}={value} is not a number") from None
    if not math.isfinite(number):
        raise DemoServerError(f"model {name!r}: +{option}={value} is not a finite number")
    if number < minimum:
        raise DemoServerError(f"model {name!r}: +{option} must be at least {minimum}")
    if number > maximum:
        raise DemoServerError(f"model {name!r}: +{option} must be at most {maximum:,}")
    return number


def parse_model(name: str) -> ModelSpec:
    """Read a demo model name: a base (``demo``, ``demo-embed``) and ``+option[=value]`` parts.

    Options: ``instant``, ``tokens=N``, ``rows=N``, ``tps=N``, ``delay=S``, ``xss``, ``nothink``, ``dim=N``,
    ``silence[=S]`` and one fault of :data:`FAULTS` (``429`` takes ``=S``, its Retry-After).

    Args:
        name: The model name of a request, e.g. ``demo+tps=200+cut-text``.

    Returns:
        The parsed :class:`ModelSpec`.

    Raises:
        DemoServerError: For an unknown base model, an unknown option, a bad value, an option given
            twice, two faults, ``tokens`` with ``rows``, or ``instant`` with ``tps`` or ``delay``.
    """
    base, *options = name.strip().split("+")
    if base not in DEMO_MODELS:
        raise DemoServerError(f"Model not found: {name} (the demo serves {', '.join(DEMO_MODELS)})")
    fields: dict[str, Any] = {}
    given: dict[str, str] = {}  # key -> the option as written
    for option in options:
        key, has_value, value = option.partition("=")
        value_or_none = value if has_value else None
        if key in given:  # (the last one silently won: demo+tps=200+tps=10 ran at 10)
            said = "" if given[key] == option == key else f" (+{given[key]}, then +{option})"
            raise DemoServerError(f"model {name!r}: +{key} given twice{said}: give it once")
        given[key] = option
        if key in _FLAGS and has_value:
            # (the value was ignored: +xss=0 and +instant=no turned the option on)
            raise DemoServerError(f"model {name!r}: +{key} takes no value; write +{key} to turn it on, "
                                  "or leave it out")
        if key == "instant":
            fields["instant"] = True
        elif key == "tokens":
            fields["tokens"] = _number(name, key, value_or_none, int, 1, MAX_TOKENS)
        elif key == "rows":
            fields["rows"] = _number(name, key, value_or_none, int, 1, MAX_ROWS)
        elif key == "tps":
            fields["tps"] = _number(name, key, value_or_none, float, 0.01)
        elif key == "delay":
            fields["delay"] = _number(name, key, value_or_none, float, 0)
        elif key == "xss":
            fields["xss"] = True
        elif key == "nothink":
            fields["thinking"] = False
        elif key == "dim":
            fields["dimensions"] = _number(name, key, value_or_none, int, 1, MAX_DIMENSIONS)
        elif key == "silence":
            fields["silence"] = DEFAULT_SILENCE if value_or_none is None else _number(name, key, value, float, 0)
        elif key in FAULTS:
            if "fault" in fields:
                raise DemoServerError(f"model {name!r}: choose one fault, not +{fields['fault']} and +{key}")
            fields["fault"] = key
            if key == "429" and value_or_none is not None:
                fields["retry_after"] = _number(name, key, value, int, 0)
            elif value_or_none is not None:
                raise DemoServerError(f"model {name!r}: +{key} takes no value")
        else:
            raise DemoServerError(f"Model not found: {name} (unknown option +{key})")
    # options that undo each other (one of them was silently dropped)
    if "tokens" in fields and "rows" in fields:
        raise DemoServerError(f"model {name!r}: choose +tokens=N (a text) or +rows=N (a table), not both")
    for paced in ("tps", "delay"):
        if fields.get("instant") and paced in fields:
            raise DemoServerError(f"model {name!r}: +instant is no pacing at all and +{paced} paces; choose one")
    return ModelSpec(name=name, base=base, **fields)


# ---------------------------------------------------------------------------------------------
# requests and plans


@dataclass
class ToolSpec:
    """A tool the request offers."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class Turn:
    """One message of the conversation, whatever protocol carried it."""

    role: str
    texts: list[str] = field(default_factory=list)
    # (tool_call_id, name, arguments as JSON text)
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)
    # (tool_call_id, result text)
    tool_results: list[tuple[str, str]] = field(default_factory=list)
    images: int = 0

    @property
    def text(self) -> str:
        """The message's text items joined."""
        return "\n".join(self.texts)


@dataclass
class DemoRequest:
    """A request, read out of whichever protocol carried it."""

    model: str
    turns: list[Turn]
    tools: list[ToolSpec] = field(default_factory=list)
    system: str = ""
    max_tokens: int | None = None
    thinking: bool = True
    dimensions: int | None = None


@dataclass
class Block:
    """One item of the answer, cut into the fragments it streams as.

    ``kind`` is ``thinking``, ``text``, ``tool_call`` (fragments of the arguments JSON),
    ``image`` (one fragment: the PNG), ``audio`` (PCM chunks) or ``embedding`` (one fragment:
    the vector).
    """

    kind: Literal["thinking", "text", "tool_call", "image", "audio", "embedding"]
    fragments: list[Any]
    name: str = ""
    call_id: str = ""
    signature: str = ""
    mime_type: str = ""

    @property
    def joined(self) -> Any:
        """The whole content: the text, the arguments JSON, the bytes or the vector."""
        if self.kind in ("image", "audio"):
            return b"".join(self.fragments)
        if self.kind == "embedding":
            return [value for chunk in self.fragments for value in chunk]
        return "".join(self.fragments)


@dataclass
class Usage:
    """Token counts in MMSP's four buckets."""

    prompt: int
    cached: int = 0
    thoughts: int = 0
    response: int = 0

    def as_uni(self) -> dict[str, int]:
        """The usage_metadata of an MMSP stop event."""
        return {
            "cached_tokens": self.cached,
            "prompt_tokens": self.prompt,
            "thoughts_tokens": self.thoughts,
            "response_tokens": self.response,
        }


@dataclass
class Plan:
    """What a stream will carry.

    ``fault_at`` is the number of fragments (counted over all blocks) after which ``fault`` fires,
    for the faults that fire mid-stream (``cut-text``, ``cut-args``, ``error``, ``stall``).
    """

    blocks: list[Block]
    finish_reason: Literal["stop", "length", "tool_call"]
    usage: Usage
    spec: ModelSpec
    seed: str
    fault_at: int | None = None

    @property
    def fault(self) -> str | None:
        """The model's fault, if any."""
        return self.spec.fault


def request_seed(payload: Any) -> str:
    """A hex digest of a request's JSON, the seed of everything random in its answer."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
