"""Reading each protocol's request body into a protocol-neutral :class:`DemoRequest`.

The same conversation sent through any of the four protocols reads into the same request, so
the demo model gives it the same answer (ids and media aside) whichever endpoint it reached.
A body the demo cannot read raises :class:`BadRequest`, which the server answers with a 400 in
the protocol's own error shape.
"""

from __future__ import annotations

import json
from typing import Any

from ._scenario import MAX_DIMENSIONS, DemoRequest, ToolSpec, Turn

__all__ = [
    "BadRequest",
    "read_chat",
    "read_embeddings",
    "read_messages",
    "read_mmsp",
    "read_responses",
    "seed_payload",
]


class BadRequest(ValueError):
    """A request body the demo cannot read; its message goes back in a 400."""


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model must be a non-empty string.")
    return body


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadRequest(f"{name} must be a list.")
    return value


def _int_or_none(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be an integer.")
    return value


def _dimensions(value: Any, name: str) -> int | None:
    dimensions = _int_or_none(value, name)
    if dimensions is not None and not 1 <= dimensions <= MAX_DIMENSIONS:
        raise BadRequest(f"{name} must be between 1 and {MAX_DIMENSIONS:,}.")
    return dimensions


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def _canonical_arguments(arguments: Any) -> str:
    """Arguments as sorted JSON, so that every protocol's copy of a call reads alike."""
    text = _arguments_text(arguments)
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, sort_keys=True)
    except ValueError:
        return text


def _add(turns: list[Turn], role: str) -> Turn:
    """The turn a message of `role` goes into: the last one if it has that role, else a new one."""
    if turns and turns[-1].role == role:
        return turns[-1]
    turn = Turn(role)
    turns.append(turn)
    return turn


def seed_payload(request: DemoRequest, base: str, xss: bool) -> dict[str, Any]:
    """What a request's seed hashes: the conversation, the tools and the settings, not the protocol.

    ``max_tokens`` is left out: it only cuts the answer (and the Messages API always sends one).
    """
    return {
        "base": base,
        "xss": xss,
        "system": request.system,
        "tools": [[tool.name, tool.description, tool.parameters] for tool in request.tools],
        "turns": [[turn.role, turn.texts, turn.tool_calls, turn.tool_results, turn.images] for turn in request.turns],
        "thinking": request.thinking,
        "dimensions": request.dimensions,
    }


# ---------------------------------------------------------------------------------------------
# MMSP


def read_mmsp(body: Any) -> DemoRequest:
    """Read a ``POST /v1/stream`` body: ``{"model", "messages", "config"}`` (UniMessages, UniConfig)."""
    body = _object(body)
    messages = _list(body.get("messages"), "messages")
    config = {} if body.get("config") is None else body["config"]
    if not isinstance(config, dict):
        raise BadRequest("config must be an object.")
    turns: list[Turn] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content_items"), list):
            raise BadRequest(f"messages[{index}] must be an object with a content_items list.")
        role = message["role"] if message.get("role") in ("user", "assistant") else "user"
        turn = Turn(role)
        for item in message["content_items"]:
            if not isinstance(item, dict):
                raise BadRequest(f"messages[{index}] has a content item that is not an object.")
            kind = str(item.get("type", "")).removesuffix(".done")
            if kind == "text":
                turn.texts.append(str(item.get("text", "")))
            elif kind in ("image_url", "inline_data"):
                turn.images += 1
            elif kind == "tool_call":
                turn.tool_calls.append(
                    (str(item.get("tool_call_id", "")), str(item.get("name", "")), _canonical_arguments(item.get("arguments", {})))
                )
            elif kind == "tool_result":
                turn.tool_results.append((str(item.get("tool_call_id", "")), str(item.get("text", ""))))
        turns.append(turn)
    tools = []
    for tool in config.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name"):
            tools.append(ToolSpec(str(tool["name"]), str(tool.get("description", "")), tool.get("parameters") or {}))
    thinking_level = config.get("thinking_level")
    dimensions = (config.get("embedding_config") or {}).get("dimensions")
    return DemoRequest(
        model=body["model"],
        turns=turns,
        tools=tools,
        system=str(config.get("system_prompt") or ""),
        max_tokens=_int_or_none(config.get("max_tokens"), "config.max_tokens"),
        thinking=thinking_level != "none",
        dimensions=_dimensions(dimensions, "config.embedding_config.dimensions"),
    )


# ---------------------------------------------------------------------------------------------
# Chat Completions and Responses content

# The part types each protocol's message content holds: (text parts, image parts)
_CHAT_PARTS = (("text",), ("image_url", "input_image", "image"))
_RESPONSES_PARTS = (("input_text", "output_text", "text"), ("input_image", "image_url"))


def _read_parts(content: Any, turn: Turn, parts: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    """Add a message's content (a string, or a list of typed parts) to `turn`: texts and images."""
    text_types, image_types = parts
    if isinstance(content, str):
        if content:
            turn.texts.append(content)
        return
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in text_types:
            turn.texts.append(str(part.get("text", "")))
        elif part.get("type") in image_types:
            turn.images += 1


# ---------------------------------------------------------------------------------------------
# Chat Completions


def read_chat(body: Any) -> DemoRequest:
    """Read a ``POST /v1/chat/completions`` body."""
    body = _object(body)
    messages = _list(body.get("messages"), "messages")
    turns: list[Turn] = []
    system: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"messages[{index}] must be an object.")
        role = message.get("role")
        if role in ("system", "developer"):
            probe = Turn("system")
            _read_parts(message.get("content"), probe, _CHAT_PARTS)
            system.extend(probe.texts)
        elif role == "tool":
            turn = _add(turns, "user")
            content = message.get("content")
            probe = Turn("tool")
            _read_parts(content, probe, _CHAT_PARTS)
            turn.tool_results.append((str(message.get("tool_call_id", "")), "".join(probe.texts)))
        elif role in ("user", "assistant"):
            # a user message right after tool messages is the rest of the same UniMessage
            if role == "user" and turns and turns[-1].role == "user" and turns[-1].tool_results and not turns[-1].texts:
                turn = turns[-1]
            else:
                turn = Turn(role)
                turns.append(turn)
            _read_parts(message.get("content"), turn, _CHAT_PARTS)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                turn.tool_calls.append(
                    (str(call.get("id", "")), str(function.get("name", "")), _canonical_arguments(function.get("arguments", "{}")))
                )
        else:
            raise BadRequest(f"messages[{index}] has an unknown role {role!r}.")
    tools = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            tools.append(ToolSpec(str(function["name"]), str(function.get("description", "")), function.get("parameters") or {}))
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return DemoRequest(
        model=body["model"],
        turns=turns,
        tools=tools,
        system="\n".join(system),
        max_tokens=_int_or_none(max_tokens, "max_completion_tokens"),
        thinking=body.get("reasoning_effort") != "none",
    )


# ---------------------------------------------------------------------------------------------
# Responses


def read_responses(body: Any) -> DemoRequest:
    """Read a ``POST /v1/responses`` body."""
    body = _object(body)
    raw = body.get("input")
    items = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else _list(raw, "input")
    turns: list[Turn] = []
    system: list[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"input[{index}] must be an object.")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                probe = Turn("system")
                _read_parts(item.get("content"), probe, _RESPONSES_PARTS)
                system.extend(probe.texts)
                continue
            turn = _add(turns, "assistant" if role == "assistant" else "user")
            _read_parts(item.get("content"), turn, _RESPONSES_PARTS)
        elif kind == "function_call":
            _add(turns, "assistant").tool_calls.append(
                (str(item.get("call_id", "")), str(item.get("name", "")), _canonical_arguments(item.get("arguments", "{}")))
            )
        elif kind == "function_call_output":
            output = item.get("output")
            probe = Turn("tool")
            _read_parts(output, probe, _RESPONSES_PARTS)
            turn = _add(turns, "user")
            turn.tool_results.append((str(item.get("call_id", "")), "".join(probe.texts)))
            turn.images += probe.images
        elif kind == "reasoning":
            _add(turns, "assistant")
    tools = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type", "function") == "function" and tool.get("name"):
            tools.append(ToolSpec(str(tool["name"]), str(tool.get("description", "")), tool.get("parameters") or {}))
    if body.get("instructions"):
        system.insert(0, str(body["instructions"]))
    reasoning = body.get("reasoning") or {}
    return DemoRequest(
        model=body["model"],
        turns=[turn for turn in turns if turn.texts or turn.tool_calls or turn.tool_results or turn.images],
        tools=tools,
        system="\n".join(system),
        max_tokens=_int_or_none(body.get("max_output_tokens"), "max_output_tokens"),
        thinking=(reasoning.get("effort") if isinstance(reasoning, dict) else None) != "none",
    )


# ---------------------------------------------------------------------------------------------
# Messages


def read_messages(body: Any) -> DemoRequest:
    """Read a ``POST /v1/messages`` body."""
    body = _object(body)
    messages = _list(body.get("messages"), "messages")
    turns: list[Turn] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise BadRequest(f"messages[{index}] must be an object with role user or assistant.")
        turn = Turn(message["role"])
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else _list(content, f"messages[{index}].content")
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                turn.texts.append(str(block.get("text", "")))
            elif kind == "image":
                turn.images += 1
            elif kind == "tool_use":
                turn.tool_calls.append(
                    (str(block.get("id", "")), str(block.get("name", "")), _canonical_arguments(block.get("input") or {}))
                )
            elif kind == "tool_result":
                result = block.get("content")
                probe = Turn("tool")
                if isinstance(result, str):
                    probe.texts.append(result)
                else:
                    for part in result or []:
                        if isinstance(part, dict) and part.get("type") == "text":
                            probe.texts.append(str(part.get("text", "")))
                        elif isinstance(part, dict) and part.get("type") == "image":
                            turn.images += 1
                turn.tool_results.append((str(block.get("tool_use_id", "")), "".join(probe.texts)))
        turns.append(turn)
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "\n".join(str(block.get("text", "")) for block in system if isinstance(block, dict))
    tools = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name"):
            tools.append(ToolSpec(str(tool["name"]), str(tool.get("description", "")), tool.get("input_schema") or {}))
    thinking = body.get("thinking") or {}
    return DemoRequest(
        model=body["model"],
        turns=turns,
        tools=tools,
        system=str(system),
        max_tokens=_int_or_none(body.get("max_tokens"), "max_tokens"),
        thinking=(thinking.get("type") if isinstance(thinking, dict) else None) != "disabled",
    )


# ---------------------------------------------------------------------------------------------
# Embeddings


def read_embeddings(body: Any) -> DemoRequest:
    """Read a ``POST /v1/embeddings`` body: one turn per input string."""
    body = _object(body)
    raw = body.get("input")
    inputs = [raw] if isinstance(raw, str) else _list(raw, "input")
    turns = []
    for index, text in enumerate(inputs):
        if isinstance(text, list):
            text = " ".join(str(token) for token in text)
        if not isinstance(text, str):
            raise BadRequest(f"input[{index}] must be a string.")
        turns.append(Turn("user", [text]))
    if not turns:
        raise BadRequest("input must not be empty.")
    return DemoRequest(
        model=body["model"], turns=turns, dimensions=_dimensions(body.get("dimensions"), "dimensions")
    )
