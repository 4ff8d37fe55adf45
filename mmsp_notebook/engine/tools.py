"""Python callables as tools: a JSON schema from the signature, and running a call."""

from __future__ import annotations

import asyncio
import enum
import inspect
import json
import re
import time
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._errors import OptionError
from ..core.chars import refuse_lone_surrogate
from ..core.state import ItemState, ToolRun
from ..core.store import TOOL_ERROR_PREFIX
from .worker import blocking_suspect

__all__ = ["ToolSet", "schema_of"]


def _json_type(annotation: Any) -> dict[str, Any]:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _json_type(non_none[0])
        return {"anyOf": [_json_type(a) for a in non_none]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": _json_type(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object"}
    if isinstance(annotation, type):
        if issubclass(annotation, bool):
            return {"type": "boolean"}
        if issubclass(annotation, int):
            return {"type": "integer"}
        if issubclass(annotation, float):
            return {"type": "number"}
        if issubclass(annotation, str):
            return {"type": "string"}
        if issubclass(annotation, enum.Enum):
            return {"enum": [m.value for m in annotation]}
        if issubclass(annotation, (list, tuple)):
            return {"type": "array"}
        if issubclass(annotation, dict):
            return {"type": "object"}
    return {}


def _doc_params(doc: str) -> tuple[str, dict[str, str]]:
    """The description and the per-parameter descriptions of a Google- or Sphinx-style docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section = None
    for line in lines:
        stripped = line.strip()
        if re.match(r"^(Args|Arguments|Parameters|Params):\s*$", stripped):
            section = "args"
            continue
        if re.match(r"^(Returns|Raises|Yields|Examples?|Notes?):\s*$", stripped):
            section = "other"
            continue
        sphinx = re.match(r"^:param\s+(?:\w+\s+)?(\w+):\s*(.*)$", stripped)
        if sphinx:
            params[sphinx.group(1)] = sphinx.group(2)
            continue
        if section == "args":
            m = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if m:
                params[m.group(1)] = m.group(2)
            continue
        if section is None:
            description.append(line)
    return " ".join(" ".join(description).split()), params


def schema_of(func: Callable[..., Any]) -> dict[str, Any]:
    """The mmsp ``ToolSchema`` of a callable: name, description, JSON-schema parameters."""
    if not callable(func):
        raise OptionError(f"{func!r} is not callable, so it cannot be a tool")
    name = getattr(func, "__name__", None) or type(func).__name__
    description, param_docs = _doc_params(inspect.getdoc(func) or "")
    try:
        signature = inspect.signature(func)
        hints = typing.get_type_hints(func)
    except (TypeError, ValueError, NameError):
        signature, hints = None, {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    if signature is not None:
        for pname, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or pname in ("self", "cls"):
                continue
            prop = _json_type(hints.get(pname, param.annotation))
            if pname in param_docs:
                prop["description"] = param_docs[pname]
            if param.default is inspect.Parameter.empty:
                required.append(pname)
            elif isinstance(param.default, (str, int, float, bool)) or param.default is None:
                prop["default"] = param.default
            properties[pname] = prop
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {"name": name, "description": description or f"The Python function {name}.", "parameters": parameters}


def _output_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


class ToolSet:
    """Callables by name, their schemas, and how to run a call of one."""

    def __init__(self, funcs: Iterable[Callable[..., Any]] | Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.funcs: dict[str, Callable[..., Any]] = {}
        self.schemas: list[dict[str, Any]] = []
        if isinstance(funcs, (str, bytes)) or callable(funcs) or not isinstance(funcs, (Iterable, type(None))):
            raise OptionError(f"tools takes a list of functions (tools=[f, g]) or a dict naming them "
                              f"(tools={{'name': f}}), not {type(funcs).__name__}")
        items = list(funcs.items()) if isinstance(funcs, Mapping) else [(None, f) for f in (funcs or [])]
        for name, func in items:
            schema = schema_of(func)
            if name:
                schema["name"] = name
            if not name and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}", schema["name"]):
                raise OptionError(f"a tool needs a name of letters, digits, _ or - (providers refuse others), not "
                                  f"{schema['name']!r}: pass tools={{'name': func}} to name it")
            refuse_lone_surrogate(f"the tool name {schema['name']!a}", schema["name"])  # (one given in a dict)
            what = f"the tool {schema['name']!r}"
            refuse_lone_surrogate(f"the description of {what}", schema["description"])
            for pname, prop in schema["parameters"]["properties"].items():
                refuse_lone_surrogate(f"the description of {pname!r} in {what}", prop.get("description", ""))
            if schema["name"] in self.funcs:
                raise OptionError(f"two tools are named {schema['name']!r}")
            self.funcs[schema["name"]] = func
            self.schemas.append(schema)

    def __bool__(self) -> bool:
        return bool(self.funcs)

    async def run(self, item: ItemState, on_change: Callable[[], None] | None = None) -> ToolRun:
        """Run the function a ``tool_call`` item names; its exception becomes the result's error.

        A plain function runs in a thread; a coroutine function runs on the worker loop itself, so it
        may use what lives there (asyncio objects made in earlier calls, clients, ``aask``) and a
        cancel reaches it at its next ``await``.
        """
        args = item.arguments or {}
        run = ToolRun(name=item.name, tool_call_id=item.tool_call_id, arguments=args, started=time.monotonic())
        item.tool_run = run
        if on_change:
            on_change()
        func = self.funcs.get(item.name)
        try:
            if func is None:
                raise LookupError(f"no tool named {item.name!r} (offered: {', '.join(self.funcs) or 'none'})")
            # a coroutine runs on the worker loop, with the streams: one that blocks holds them all,
            # which the loop's watchdog reports naming the tool (see engine.worker)
            if inspect.iscoroutinefunction(func):
                coro = func(**args)
                with blocking_suspect(coro, f"the async tool {item.name!r}", item.name):
                    value = await coro
            else:
                value = await asyncio.to_thread(func, **args)
                if inspect.isawaitable(value):
                    with blocking_suspect(value, f"the awaitable the tool {item.name!r} returned", item.name):
                        value = await value
            run.value = value
            run.output = _output_text(value)
        except asyncio.CancelledError:  # the turn was stopped while the tool ran
            run.error = "cancelled: the turn was stopped while the tool ran"
            run.output = f"{TOOL_ERROR_PREFIX}{run.error}"
            run.ended = time.monotonic()
            raise
        except BaseException as exc:
            run.error = f"{type(exc).__name__}: {exc}"
            run.output = f"{TOOL_ERROR_PREFIX}{run.error}"
        run.ended = time.monotonic()
        if on_change:
            on_change()
        return run
