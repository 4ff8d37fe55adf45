"""What the demo model answers: a request and a parsed model name in, a :class:`~._scenario.Plan` out.

The wording (thinking, Markdown that mentions the prompt, a long text for benchmarks, quoted tool
results), the tool calls (arguments built from each tool's JSON schema), the image and the audio,
the usage, and where a fault cuts in. Every random choice comes from the request's seed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from typing import Any, Literal

from ._fix import cell_fix
from ._media import PCM_MIME_TYPE, embedding, make_pcm_chunks, make_png
from ._scenario import (
    DEFAULT_DIMENSIONS,
    IMAGE_PROMPT_TOKENS,
    PSEUDO_TOOL,
    XSS_PAYLOADS,
    Block,
    DemoRequest,
    ModelSpec,
    Plan,
    ToolSpec,
    Turn,
    Usage,
    tokenize,
)

__all__ = ["build_plan"]

_MAX_CALLS = 4  # parallel tool calls in one answer, at most
#: characters of the prompt the planner reads at most (see :func:`_head`)
PLAN_CHARS = 1 << 18


# ---------------------------------------------------------------------------------------------
# wording

_STOP = {
    "a", "an", "the", "and", "or", "but", "if", "then", "so", "of", "in", "on", "at", "to", "for", "from",
    "with", "by", "about", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that",
    "these", "those", "i", "me", "my", "you", "your", "we", "our", "what", "whats", "what's", "how", "why",
    "when", "where", "who", "which", "please", "can", "could", "would", "will", "should", "tell", "show",
    "give", "draw", "say", "speak", "do", "does", "did", "write", "make", "get", "hello", "hi", "hey",
    "thanks", "thank", "explain", "describe", "compare", "use", "call", "check", "find", "look", "picture",
    "image", "some", "any", "all", "there", "here", "now", "today", "also", "just", "like", "let", "let's",
    "out", "up", "into", "over", "than", "very", "much", "many", "more", "most", "not", "no", "yes",
}
_GENERIC_NAME_PARTS = {
    "get", "set", "list", "create", "update", "delete", "fetch", "make", "run", "do", "the", "of", "for",
    "by", "to", "and", "with", "tool", "func", "fn", "api", "current", "new", "info", "data",
}
_SENTENCES = (
    "it helps to start from a small, concrete example",
    "the details depend on the context you are working in",
    "a quick experiment often settles the question faster than theory",
    "the simplest version is usually the easiest one to test",
    "each step can be checked on its own before moving on",
    "good names make the result much easier to read later",
    "measuring before and after shows whether a change helped",
    "edge cases deserve a line of their own in the notes",
    "the same idea scales from a notebook cell to a full service",
    "writing the assumptions down keeps the discussion honest",
    "a table is often clearer than a paragraph for comparisons",
    "short feedback loops make exploration pleasant",
)
_FILLER = (
    "The demo model streams deterministic text so that every run of a notebook looks the same.",
    "Each word arrives as one token, paced like a real model unless instant mode is on.",
    "Long answers are useful to benchmark renderers, parsers and progress bars.",
    "Nothing here leaves the machine: the server answers from a fixed recipe.",
    "Markdown keeps the structure readable both as source and as rendered output.",
    "Streaming lets the reader start before the writer has finished.",
    "A stable seed turns a random choice into a reproducible one.",
    "Tables, lists and code blocks exercise different parts of a renderer.",
)


#: a word of a prompt
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’-]*")
#: the key words an answer uses at most (its heading takes three, its table four)
KEY_WORDS = 4


def _significant(text: str, limit: int = KEY_WORDS) -> list[str]:
    """The first ``limit`` distinct significant words of ``text`` (lower case, in order). The text
    is read only as far as they go: a prompt of megabytes costs what its first words do (read
    whole, it held the server over half a second a megabyte)."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text):
        lowered = match.group().lower()
        if len(lowered) > 2 and lowered not in _STOP:
            seen.setdefault(lowered)
            if len(seen) >= limit:
                break
    return list(seen)


def _capitalized(text: str, exclude: set[str]) -> list[str]:
    seen: dict[str, None] = {}
    for word in re.findall(r"\b[A-Z][A-Za-z-]*[a-z][A-Za-z-]*\b|\b[A-Z]{2,}\b", text):
        lowered = word.lower()
        if lowered not in _STOP and lowered not in exclude:
            seen.setdefault(word)
    return list(seen)


def _snippet(text: str, limit: int = 80) -> str:
    """The start of ``text``, its runs of white space made single spaces, cut at ``limit``
    characters; read only as far as that."""
    parts: list[str] = []
    size = -1
    for match in _NON_SPACE.finditer(text):
        parts.append(match.group())
        size += len(parts[-1]) + 1
        if size > limit:
            break
    flat = " ".join(parts)
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


#: a run of characters that are not white space (as ``str.split`` has it)
_NON_SPACE = re.compile(r"\S+")


def _head(text: str, limit: int = PLAN_CHARS) -> str:
    """What the planner reads of a prompt: its first ``limit`` characters, the word they cut into
    left out. A fix's cell, a tool's name, "draw" or "say" are looked for there: read whole, a
    prompt of 20 MB held the server (every request it serves) for seconds."""
    if len(text) <= limit or text[limit].isspace() or text[limit - 1].isspace():
        return text[:limit]
    kept = text[:limit].rsplit(None, 1)
    return kept[0] if len(kept) == 2 else text[:limit]  # (one word: cut where the limit falls)


def _name_parts(name: str) -> list[str]:
    parts = re.split(r"[_\-\s.]+|(?<=[a-z])(?=[A-Z])", name)
    return [part.lower() for part in parts if len(part) >= 3 and part.lower() not in _GENERIC_NAME_PARTS]


def _mentioned_tools(prompt: str, tools: list[ToolSpec]) -> list[ToolSpec]:
    lowered = prompt.lower()
    mentioned = []
    for tool in tools:
        if tool.name and (
            tool.name.lower() in lowered
            or any(re.search(rf"\b{re.escape(part)}", lowered) for part in _name_parts(tool.name))
        ):
            mentioned.append(tool)
    return mentioned


def _has_markup(name: str) -> bool:
    return any(char in name for char in "<>\"'&()[]")


# ---------------------------------------------------------------------------------------------
# tool arguments

_QUERY_NAMES = {"query", "q", "text", "prompt", "question", "input", "message", "content", "search", "topic"}


def _schema_type(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((entry for entry in kind if entry != "null"), None)
    if kind is None and isinstance(schema.get("properties"), dict):
        return "object"
    return kind


def _argument(schema: Any, pname: str, word: str, prompt: str, depth: int = 0) -> Any:
    """A sensible value for one parameter of a tool's JSON schema."""
    if not isinstance(schema, dict):
        return word
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        lowered = prompt.lower()
        return next((value for value in schema["enum"] if str(value).lower() in lowered), schema["enum"][0])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _argument(schema[key][0], pname, word, prompt, depth + 1)
    kind = _schema_type(schema)
    lowered_name = pname.lower()
    if kind == "string" or kind is None:
        if lowered_name in _QUERY_NAMES:
            value = _snippet(prompt, 60)
        elif "unit" in lowered_name:
            value = "celsius"
        elif "date" in lowered_name:
            value = "2025-01-01"
        elif "url" in lowered_name or "uri" in lowered_name:
            value = "https://example.com"
        elif "email" in lowered_name:
            value = "demo@example.com"
        elif "lang" in lowered_name:
            value = "en"
        else:
            value = word
        return value
    if "default" in schema:
        return schema["default"]
    if kind == "integer":
        whole = 3
        if isinstance(schema.get("minimum"), (int, float)):
            whole = max(whole, int(schema["minimum"]))
        if isinstance(schema.get("maximum"), (int, float)):
            whole = min(whole, int(schema["maximum"]))
        return whole
    if kind == "number":
        number = 1.5
        if isinstance(schema.get("minimum"), (int, float)):
            number = max(number, float(schema["minimum"]))
        if isinstance(schema.get("maximum"), (int, float)):
            number = min(number, float(schema["maximum"]))
        return number
    if kind == "boolean":
        return True
    if kind == "array":
        if depth > 4:
            return []
        return [_argument(schema.get("items") or {"type": "string"}, pname, word, prompt, depth + 1)]
    if kind == "object":
        if depth > 4:
            return {}
        properties = schema.get("properties") or {}
        return {key: _argument(sub, key, word, prompt, depth + 1) for key, sub in properties.items()}
    if kind == "null":
        return None
    return word


def _arguments(tool: ToolSpec, word: str, prompt: str, xss: bool) -> dict[str, Any]:
    properties = (tool.parameters or {}).get("properties") or {}
    arguments = {}
    first_string = True
    for pname, schema in properties.items():
        value = _argument(schema, pname, word, prompt)
        if xss and isinstance(value, str) and first_string:
            value = f"{value} {' '.join(XSS_PAYLOADS)}"
            first_string = False
        arguments[pname] = value
    if xss and first_string:
        arguments["note"] = " ".join(XSS_PAYLOADS)
    return arguments


def _split_json(text: str, rng: random.Random) -> list[str]:
    """Cut an arguments JSON text into several fragments of a few characters each."""
    if len(text) <= 3:
        return [text]
    pieces: list[str] = []
    start = 0
    while start < len(text):
        size = rng.randint(4, 9)
        pieces.append(text[start : start + size])
        start += size
    return pieces


# ---------------------------------------------------------------------------------------------
# plans


def _signature(seed: str, thinking: str) -> str:
    digest = hashlib.sha256(f"{seed}:{thinking}".encode()).digest()
    return base64.b64encode(b"demo-signature:" + digest).decode("ascii")


def _call_id(seed: str, index: int) -> str:
    return hashlib.sha256(f"{seed}:call:{index}".encode()).hexdigest()[:24]


def _count_tokens(text: str, step: int = 1 << 20) -> int:
    """``len(tokenize(text))`` without the list of tokens: the runs of characters that are not
    white space (counted ``step`` characters at a time, a word cut in two counted once), plus
    the white space ending the text."""
    count = 0
    for start in range(0, len(text), step):
        part = text[start : start + step]
        count += len(part.split())
        if start and not part[0].isspace() and not text[start - 1].isspace():
            count -= 1
    return count + (text[-1:].isspace())


def _prompt_tokens(request: DemoRequest) -> int:
    count = _count_tokens(request.system)
    for tool in request.tools:
        count += _count_tokens(f"{tool.name} {tool.description} {json.dumps(tool.parameters, sort_keys=True)}")
    for turn in request.turns:
        count += 3  # role and separators
        for text in turn.texts:
            count += _count_tokens(text)
        for _, name, arguments in turn.tool_calls:
            count += 1 + _count_tokens(name) + max(1, len(arguments) // 4)
        for _, text in turn.tool_results:
            count += 1 + _count_tokens(text)
        count += IMAGE_PROMPT_TOKENS * turn.images
    return max(count, 1)


def _last_user(request: DemoRequest) -> Turn | None:
    for turn in reversed(request.turns):
        if turn.role == "user":
            return turn
    return None


def _title(words: list[str]) -> str:
    return " ".join(word.capitalize() for word in words[:3]) or "Your Question"


def _markdown(prompt: str, rng: random.Random, xss: bool) -> str:
    words = _significant(prompt) or ["demo"]
    topic = " ".join(words[:3])
    sentences = rng.sample(_SENTENCES, 3)
    rows = words[:4] if len(words) >= 2 else [*words, "example"]
    table = "\n".join(f"| {word} | {len(word)} | {rng.randint(10, 99) / 100:.2f} |" for word in rows)
    heading = f"## {_title(words)}"
    if xss:
        heading += f" {XSS_PAYLOADS[0]}"
    bullet_extra = [f" {XSS_PAYLOADS[1]}", f" {XSS_PAYLOADS[2]}", f" {XSS_PAYLOADS[3]}"] if xss else ["", "", ""]
    snippet = _snippet(prompt, 60).replace('"', "'")
    return (
        f"{heading}\n\n"
        f"You asked about **{topic}**: “{_snippet(prompt)}”. Here is a short overview from the offline demo model.\n\n"
        f"- **First**, {sentences[0]}.{bullet_extra[0]}\n"
        f"- **Second**, {sentences[1]}.{bullet_extra[1]}\n"
        f"- **Third**, {sentences[2]}.{bullet_extra[2]}\n\n"
        "| Word | Length | Score |\n"
        "|------|-------:|------:|\n"
        f"{table}\n\n"
        "```python\n"
        "def summarize(prompt: str) -> str:\n"
        '    """Return the first words of a prompt."""\n'
        "    return \" \".join(prompt.split()[:5])\n"
        "\n"
        f'print(summarize("{snippet}"))\n'
        "```\n\n"
        "That is all the demo model knows about it."
    )


def _table_text(prompt: str, rows: int, rng: random.Random) -> str:
    """A heading, a Markdown table of ``rows`` rows (number, word, length, score) and a sentence."""
    words = _significant(prompt) or ["demo"]
    pool = [*words, *(w.strip(".,").lower() for s in _SENTENCES for w in s.split())]
    lines = [f"## {_title(words)}\n\n", "| # | Word | Length | Score |\n", "|--:|:-----|-------:|------:|\n"]
    for n in range(1, rows + 1):
        word = rng.choice(pool)
        lines.append(f"| {n} | {word} | {len(word)} | {rng.randint(10, 99) / 100:.2f} |\n")
    lines.append(f"\n{rows} rows: that is the whole table.")
    return "".join(lines)


def _long_text(prompt: str, tokens: int, rng: random.Random) -> list[str]:
    words = _significant(prompt) or ["demo"]
    fragments = tokenize(f"## {_title(words)}\n\n")
    count = 0
    while len(fragments) < tokens:
        count += 1
        fragments.extend(tokenize(rng.choice(_FILLER) + ("\n\n" if count % 4 == 0 else " ")))
    return fragments[:tokens]


def _after(prompt: str, markers: tuple[str, ...]) -> str:
    lowered = prompt.lower()
    for marker in markers:
        index = lowered.find(marker)
        if index >= 0:
            rest = prompt[index + len(marker) :].strip(" :,.!?\"'“”")
            if rest:
                return _snippet(rest, 60)
    return _snippet(prompt, 60)


def _quote_results(request: DemoRequest, results: list[tuple[str, str]], xss: bool) -> str:
    """The answer after tool results: each result quoted under its tool's name, then a summary line."""
    names = {call_id: name for turn in request.turns for call_id, name, _ in turn.tool_calls}
    lines = [f"Here is what the tool{'s' if len(results) > 1 else ''} returned:", ""]
    for call_id, text in results:
        quoted = "\n> ".join(text.splitlines() or [""])
        lines += [f"> **{names.get(call_id, 'tool')}** (`{call_id}`): {quoted}", ""]
    lines.append(f"In short: “{_snippet(results[0][1], 60)}”.")
    if xss:
        lines.append(" ".join(XSS_PAYLOADS))
    return "\n".join(lines)


def _calls(prompt: str, tools: list[ToolSpec], mentioned: list[ToolSpec]) -> list[tuple[ToolSpec, str]]:
    """The calls to make: one per mentioned tool, or one per capitalised word for a tool taking a string."""
    exclude = {part for tool in tools for part in _name_parts(tool.name)} | {tool.name.lower() for tool in tools}
    capitals = _capitalized(prompt, exclude)
    fallback = capitals[0] if capitals else (_significant(prompt) or ["demo"])[0].capitalize()
    calls: list[tuple[ToolSpec, str]] = []
    for tool in mentioned:
        properties = (tool.parameters or {}).get("properties") or {}
        takes_string = any(
            isinstance(schema, dict) and _schema_type(schema) in ("string", None) and "enum" not in schema
            for schema in properties.values()
        )
        calls.extend((tool, word) for word in (capitals if takes_string and capitals else [fallback]))
    return calls[:_MAX_CALLS]


_DRAW = re.compile(r"\b(draw|drawing|picture|image of|sketch|paint)\b", re.IGNORECASE)
_SPEAK = re.compile(r"\b(say|speak|pronounce|read aloud)\b", re.IGNORECASE)


def build_plan(request: DemoRequest, spec: ModelSpec, *, media: bool, seed: str) -> Plan:
    """The answer the demo model streams for a request.

    The answer reads the last user message as far as :data:`PLAN_CHARS` characters (see
    :func:`_head`); the usage counts every token of the request.

    Args:
        request: The request, read out of its protocol.
        spec: The model name, parsed.
        media: Whether the protocol carries images and audio (only the MMSP wire does).
        seed: The request's seed (:func:`request_seed`).

    Returns:
        The plan.
    """
    rng = random.Random(seed)
    if spec.base == "demo-embed":
        return _embedding_plan(request, spec, seed)

    last = request.turns[-1] if request.turns else Turn("user")
    user = _last_user(request) or last
    prompt = _head(user.text, PLAN_CHARS) or "hello"  # (the words past PLAN_CHARS change nothing of the answer)
    thinking_on = request.thinking and spec.thinking
    xss = spec.xss
    blocks: list[Block] = []
    thinking: list[str] = []
    answer: list[Block] = []

    forced_tool = spec.fault in ("cut-args", "bad-args")
    tools = request.tools
    mentioned = _mentioned_tools(prompt, tools) if spec.fault != "cut-text" else []
    if xss and tools and spec.fault != "cut-text":
        marked = [tool for tool in tools if _has_markup(tool.name)]
        mentioned = mentioned or [marked[0] if marked else tools[0]]
    if forced_tool and not mentioned:
        pseudo = ToolSpec(PSEUDO_TOOL, "", {"type": "object", "properties": {"query": {"type": "string"}}})
        mentioned = [tools[0]] if tools else [pseudo]

    # the answer to tool results, unless a new prompt came with them (a turn that followed one
    # stopped by its step limit: its calls answered "not run", then the user's next question)
    results = last.tool_results if last.role == "user" and not last.texts else []
    fix = None if results or forced_tool else cell_fix(prompt)
    if results and not forced_tool:
        thinking.append(
            f"The tool{'s' if len(results) > 1 else ''} answered. "
            f"I will quote {'them' if len(results) > 1 else 'it'} and sum up in a sentence."
        )
        answer.append(Block("text", tokenize(_quote_results(request, results, xss))))
    elif fix is not None:
        thinking.append(fix.thinking())
        answer.append(Block("text", tokenize(fix.answer())))
    elif mentioned:
        calls = _calls(prompt, tools, mentioned)
        thinking.append(
            f"The user asks: “{_snippet(prompt)}”. "
            + " ".join(f"I should call {tool.name} for {word}." for tool, word in calls)
        )
        for index, (tool, word) in enumerate(calls):
            arguments = json.dumps(_arguments(tool, word, prompt, xss), ensure_ascii=False)
            if spec.fault == "bad-args" and index == 0:
                arguments = arguments[:-1] + ', "extra": }'
            answer.append(Block("tool_call", _split_json(arguments, rng), name=tool.name, call_id=_call_id(seed, index)))
    elif spec.tokens is not None:
        thinking.append(f"The user wants a long answer about “{_snippet(prompt)}”. I will write about {spec.tokens} tokens.")
        answer.append(Block("text", _long_text(prompt, spec.tokens, rng)))
    elif spec.rows is not None:
        thinking.append(f"The user wants a table about “{_snippet(prompt)}”. I will write {spec.rows} rows.")
        answer.append(Block("text", tokenize(_table_text(prompt, spec.rows, rng))))
    elif _DRAW.search(prompt):
        subject = _after(prompt, ("image of", "picture of", "drawing of", "draw", "sketch", "paint"))
        image, description = make_png(int(seed[:8], 16))
        thinking.append(f"The user wants a picture of {subject}. I will draw {description}.")
        caption = f"Here is a picture of {subject}: {description}."
        if not media:
            caption += " (Images stream on the MMSP endpoint /v1/stream only; this protocol carries the caption.)"
        answer.append(Block("text", tokenize(caption)))
        if media:
            answer.append(Block("image", [image], mime_type="image/png"))
    elif _SPEAK.search(prompt):
        utterance = _after(prompt, ("say", "speak", "pronounce", "read aloud"))
        chunks = make_pcm_chunks(int(seed[:8], 16))
        thinking.append(f"The user wants me to say “{utterance}”. I will synthesize a short chime.")
        text = f"Speaking: “{utterance}”"
        if not media:
            text += " (Audio streams on the MMSP endpoint /v1/stream only; this protocol carries the transcript.)"
        answer.append(Block("text", tokenize(text)))
        if media:
            answer.append(Block("audio", chunks, mime_type=PCM_MIME_TYPE))
    else:
        words = _significant(prompt)
        thinking.append(
            f"The user wrote: “{_snippet(prompt)}”. "
            f"Key words: {', '.join(words[:4]) or 'none'}. "
            f"I will answer with a heading, a list, a table and a code sample; {rng.choice(_SENTENCES)}."
        )
        answer.append(Block("text", tokenize(_markdown(prompt, rng, xss))))

    if thinking_on:
        text = " ".join(thinking)
        if xss:
            text += " " + " ".join(XSS_PAYLOADS)
        blocks.append(Block("thinking", tokenize(text), signature=_signature(seed, text)))

    # max_tokens caps the answer (thinking is not counted): text is cut, a call that does not fit is dropped
    cut = False
    if request.max_tokens is not None:
        budget = max(1, request.max_tokens)
        kept: list[Block] = []
        for block in answer:
            size = len(block.fragments)
            if block.kind == "text" and size > budget:
                if budget > 0:
                    kept.append(Block("text", block.fragments[:budget]))
                budget = 0
                cut = True
            elif size <= budget:
                kept.append(block)
                budget -= size
            else:
                cut = True
        if not kept:
            first_text = next((block for block in answer if block.kind == "text"), None)
            kept = [Block("text", first_text.fragments[:1] if first_text else ["…"])]
        answer = kept
    blocks.extend(answer)

    finish: Literal["stop", "length", "tool_call"] = (
        "length" if cut else "tool_call" if any(block.kind == "tool_call" for block in blocks) else "stop"
    )
    thoughts = sum(len(block.fragments) for block in blocks if block.kind == "thinking")
    response = sum(len(block.fragments) for block in blocks if block.kind != "thinking")
    usage = Usage(prompt=_prompt_tokens(request), cached=0, thoughts=thoughts, response=response)
    return Plan(blocks, finish, usage, spec, seed, _fault_at(blocks, spec.fault))


def _fault_at(blocks: list[Block], fault: str | None) -> int | None:
    """After how many fragments a mid-stream fault fires."""
    if fault not in ("cut-text", "cut-args", "error", "stall"):
        return None
    offset = 0
    first_answer: int | None = None
    for block in blocks:
        if block.kind != "thinking" and first_answer is None:
            first_answer = offset
        if block.kind == "text" and fault == "cut-text":
            return offset + max(2, len(block.fragments) // 3) if len(block.fragments) > 2 else offset + 1
        if block.kind == "tool_call" and fault == "cut-args":
            return offset + max(1, len(block.fragments) // 2)
        offset += len(block.fragments)
    if fault == "stall":
        return 1
    if fault == "error":
        # a few fragments into a text answer; before the first call of a tool-call answer
        if first_answer is None:
            return max(1, offset)
        first = next(block for block in blocks if block.kind != "thinking")
        if first.kind == "text":
            return first_answer + min(3, len(first.fragments))
        return max(1, first_answer)
    return max(1, offset // 2)


def _new_inputs(request: DemoRequest) -> list[Turn]:
    """What an embedding model embeds: the user messages after the last answer.

    Several inputs in one request are each embedded (as the Embeddings API does with a list); in a
    conversation, only what the user sent since the model last answered is new, so the history
    (earlier questions, the vectors already returned) is not embedded again.
    """
    answered = max((index for index, turn in enumerate(request.turns) if turn.role == "assistant"), default=-1)
    return [turn for turn in request.turns[answered + 1:] if turn.role == "user"]


def _embedding_plan(request: DemoRequest, spec: ModelSpec, seed: str) -> Plan:
    dimensions = request.dimensions or spec.dimensions or DEFAULT_DIMENSIONS
    inputs = _new_inputs(request)
    blocks = [Block("embedding", [embedding(turn.text, dimensions)]) for turn in inputs]
    usage = Usage(prompt=sum(max(1, _count_tokens(turn.text)) for turn in inputs), cached=0)
    return Plan(blocks, "stop", usage, spec, seed, None)
