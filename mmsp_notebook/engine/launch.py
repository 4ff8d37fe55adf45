"""Starting a turn: the prompt made a UniMessage, the options checked, the turn submitted to the worker loop.

Every front door (the magic, ``ask``/``aask``, the chat) starts its turns with :func:`launch`.
"""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import inspect
import re
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from mmsp.credentials import routed_client_type

from .._errors import OptionError, OptionTypeError
from ..core.chars import refuse_lone_surrogate
from ..core.flags import check_flag, refuse_unknown
from ..core.redact import redact
from ..core.run import TurnRun
from ..core.store import SIDECAR_SUFFIX, tracer_path
from ..core.turn import Turn
from . import worker as _worker
from .messages import check_prompt_message, data_url_item
from .options import TurnOptions, idle_limit
from .session import Lease, Session, image_item, is_demo_model, session
from .stream import record_refused, run_turn
from .tools import ToolSet

__all__ = ["launch", "interpolate", "user_message", "check_trace_id", "check_chat_name", "door_options", "refuse_unknown"]


def interpolate(template: str, namespace: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """Expand ``{expr}`` from ``namespace``; ``{{``/``}}`` are literal braces.

    An expression is a name with attributes, indexes, slices and arithmetic (``{df.shape}``,
    ``{rows[0]}``, ``{text[:200]}``, ``{n + 1}``): nothing that calls. A ``{...}`` that is not one
    that evaluates (JSON, a name that is not defined) stays as it was written, so a prompt full of
    JSON never fails; so does one whose value is a function, a class or a module (``{print}`` in
    pasted code). One that calls (``{items.pop()}`` in a pasted f-string) is never run, since
    running it could change the notebook's data: it is sent as written, with a warning naming it
    when its names are all defined. A value that is an image (a PIL image, PNG/JPEG bytes, a path
    to one) becomes an image item and ``[image N]`` in the text.
    """
    out: list[str] = []
    images: list[dict[str, Any]] = []
    not_run: list[str] = []
    i, n = 0, len(template)
    while i < n:
        ch = template[i]
        if ch == "{" and template.startswith("{{", i):
            out.append("{")
            i += 2
            continue
        if ch == "}" and template.startswith("}}", i):
            out.append("}")
            i += 2
            continue
        if ch == "{":
            depth, j = 0, i
            while j < n:
                if template[j] == "{":
                    depth += 1
                elif template[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= n:  # unbalanced: the rest is literal
                out.append(template[i:])
                break
            expr = template[i + 1 : j]
            value, ok = _evaluate(expr, namespace, not_run)
            if ok and (inspect.isroutine(value) or inspect.isclass(value) or inspect.ismodule(value)):
                ok = False  # {print} or {json}: pasted code, not a value to put in the prompt
            if ok:
                try:
                    item = image_item(value)
                except OptionError as exc:  # an image that cannot be sent: say which of the prompt's values
                    raise OptionError(f"{{{expr.strip()}}}: {exc}") from None
                if item is not None:
                    images.append(item)
                    out.append(f"[image {len(images)}]")
                else:
                    try:
                        out.append(str(value))
                    except Exception as exc:
                        raise OptionError(f"{{{expr.strip()}}} cannot be put in the prompt: its str() raised "
                                          f"{type(exc).__name__}: {exc}") from None
            else:
                out.append(template[i : j + 1])
            i = j + 1
            continue
        out.append(ch)
        i += 1
    if not_run:
        shown = ", ".join("{" + redact(e if len(e) <= 60 else e[:59] + "…") + "}" for e in not_run[:3])
        more = f" and {len(not_run) - 3} more" if len(not_run) > 3 else ""
        warnings.warn(f"sent as written, not run: {shown}{more}. A prompt expands names, attributes, indexes and "
                      "arithmetic, never a call (set a variable first, e.g. n = len(df), then {n})",
                      UserWarning, stacklevel=3)
    return "".join(out), images


#: what an expression in a prompt may hold: names, attributes, indexes, slices, constants, arithmetic
_VALUE_NODES = (ast.Expression, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.Slice, ast.Constant,
                ast.Tuple, ast.UnaryOp, ast.BinOp, ast.unaryop, ast.operator)


def _evaluate(expr: str, namespace: Mapping[str, Any], not_run: list[str]) -> tuple[Any, bool]:
    """``(value, True)``, or ``(None, False)`` for a ``{...}`` left as written; one that calls and
    names only what is defined is added to ``not_run``."""
    expr = expr.strip()
    if not expr or not re.match(r"^[A-Za-z_]", expr):
        return None, False
    try:
        tree = ast.parse(expr, "<prompt>", "eval")
    except (SyntaxError, ValueError):
        return None, False
    nodes = list(ast.walk(tree))
    if not all(isinstance(node, _VALUE_NODES) for node in nodes):
        builtins = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
        if any(isinstance(node, ast.Call) for node in nodes) and all(
                node.id in namespace or node.id in builtins for node in nodes if isinstance(node, ast.Name)):
            not_run.append(expr)
        return None, False
    try:
        return eval(compile(tree, "<prompt>", "eval"), {"__builtins__": __builtins__}, dict(namespace)), True
    except Exception:
        return None, False


def user_message(text: str, images: Sequence[Any] = ()) -> dict[str, Any]:
    """A user UniMessage: the text, then each image (items, PIL images, bytes, paths or data URLs)."""
    items: list[dict[str, Any]] = []
    if not isinstance(text, str):
        raise OptionError(f"the prompt is text, not {type(text).__name__}")
    refuse_lone_surrogate("the prompt", text)
    if text.strip():
        items.append({"type": "text.done", "text": text})
    if isinstance(images, (str, bytes, bytearray, PurePath)) or hasattr(images, "save"):
        images = [images]  # one image, not a sequence of its characters (images="cat.png")
    for image in images:
        if isinstance(image, dict) and image.get("type") == "image_url.done":
            url = image.get("image_url")
            items.append({**image, **data_url_item(url)} if isinstance(url, str) and url[:5].lower() == "data:"
                         else image)
        elif isinstance(image, str) and image[:5].lower() == "data:":
            items.append(data_url_item(image))
        else:
            if isinstance(image, str) and len(image) < 1024 and Path(image).expanduser().is_file():
                image = Path(image).expanduser()  # named as an image: read whatever its name ends with
            item = image_item(image)
            if item is None:
                raise OptionError(_not_an_image(image))
            items.append(item)
    if not items:
        raise OptionError("the prompt is empty: write something to send")
    return {"role": "user", "content_items": items}


def _not_an_image(image: Any) -> str:
    """Why ``image`` cannot be sent as one: a path to no file, a file of another kind, or another value."""
    usage = "give a PIL image, PNG/JPEG/GIF/WebP bytes or the path to such a file"
    if isinstance(image, (str, PurePath)):
        path = Path(image).expanduser()
        shown = redact(repr(str(image)))[:200]
        if len(str(image)) < 1024 and path.is_file():
            return f"not an image: {shown} is not a PNG, JPEG, GIF or WebP file ({usage})"
        if len(str(image)) < 1024 and path.exists():
            return f"not an image: {shown} is not a file ({usage})"
        return f"not an image: no file {shown} ({usage})"
    if isinstance(image, (bytes, bytearray)):
        return f"not an image: these {len(image):,} bytes are not PNG, JPEG, GIF or WebP data ({usage})"
    return f"not an image: {type(image).__name__} ({usage})"


def launch(
    prompt: str | dict[str, Any],
    *,
    model: str | None = None,
    client_type: str | None = None,
    base_url: str | None = None,
    api_key_env: str | None = None,
    system: str | None = None,
    thinking: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    tools: Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]] | ToolSet | None = None,
    max_steps: int | None = None,
    timeout: float | None = None,
    chat: str | None = None,
    new: bool = False,
    trace: bool | str | None = None,
    images: Sequence[Any] = (),
    sess: Session | None = None,
    listeners: Sequence[Callable[[dict[str, Any]], None]] = (),
    wire: bool = False,
    comparison: str | None = None,
) -> tuple[TurnRun, concurrent.futures.Future[Turn]]:
    """Start a turn on the worker loop; returns the run (to watch or abort) and its future.

    ``wire=True`` sends the turn through the session's recording wire proxy and sets ``turn.wire``
    (the raw SSE frames next to their UniEvents, see :mod:`mmsp_notebook.wire.capture`) when it ends.
    ``timeout`` is the idle limit in seconds (default the kernel's, 120): a step whose server sends
    no byte and no event for that long ends with "no data for N s" (``"none"`` or ``math.inf``: no
    limit).
    """
    check_flag("new", new)
    check_flag("wire", wire)
    sess = sess or session()
    settings = sess.settings
    opts = TurnOptions(model=model, client_type=client_type, base_url=base_url, api_key_env=api_key_env,
                       system=system, thinking=thinking, max_tokens=max_tokens, temperature=temperature,
                       max_steps=max_steps, timeout=timeout).resolve(settings)
    if isinstance(trace, str):
        check_trace_id(trace)  # (an empty one too: it is no trace id, and no way to say "no trace")
    if chat is not None:
        check_chat_name(chat)
    model, client_type, base_url, api_key_env = opts.model or "demo", opts.client_type, opts.base_url, opts.api_key_env
    steps = opts.max_steps or 1
    toolset = tools if isinstance(tools, ToolSet) else ToolSet(tools)
    conv = sess.conversation(chat)
    if new:
        conv.reset()
    traced = settings.trace if trace is None else bool(trace)
    trace_id = trace if isinstance(trace, str) and trace else (sess.trace_id(conv) if traced else None)
    config = opts.config(tools=toolset, trace_id=trace_id)
    message = check_prompt_message(prompt) if isinstance(prompt, dict) else user_message(prompt, images)
    # the client type the turn really goes through: named, the demo server's wire, or the model's family
    routed = client_type or ("mmsp" if is_demo_model(model) and not base_url else routed_client_type(model))
    turn = Turn(message, model=model, client_type=routed, chat=conv.name, trace_id=trace_id, config=config,
                api_key_env=api_key_env, comparison=comparison)
    conv.add_turn(turn)
    sess.turns.append(turn)
    sess.usage.start(turn)
    run = TurnRun(turn, idle_timeout=idle_limit(opts.timeout))
    run.listeners.extend(listeners)

    async def go() -> Turn:
        lease: Lease | None = None
        try:
            ready = False
            try:
                if wire:
                    from .wiretap import wire_client

                    tap = await wire_client(sess, conv, model, client_type, base_url, api_key_env)
                    lease = tap.lease
                else:
                    lease = await sess.lease_client(model, client_type, base_url, api_key_env)
                client = lease.client
                conv.endpoint = lease.key
                ready = True
            except Exception as exc:  # a refused configuration: no step ever started
                turn.fail_before_stream(exc)
                if trace_id:  # (the attempt in the trace's rows, as a failed request's)
                    await record_refused(turn, trace_id, conv.messages())
                return turn
            except asyncio.CancelledError:  # stopped while its client was made (a first turn's imports): nothing sent
                turn.mark_cancelled()
                raise
            finally:
                if not ready:  # the turn ended before its first step: its watchers are told (run_turn tells them after)
                    run.notify()
                    run.finished.set()
            done = await run_turn(run, client, conv, message, config, toolset, steps, trace=bool(trace_id))
            if wire:  # captured before the future resolves: a front door showing the wire finds it
                from .wiretap import capture_wire

                await capture_wire(done, tap)
            return done
        finally:
            sess.usage.end(turn)
            if lease is not None:
                await lease.release()

    return run, _worker.submit(go())


def check_chat_name(name: str, option: str = "chat") -> None:
    """Refuse a conversation name that is not text or is empty (``None``, not ``''``, is the default one)."""
    if not isinstance(name, str):
        raise OptionTypeError(f"{option} takes a conversation's name (text), not {name!r}")
    if not name.strip():
        raise OptionError(f"{option} {name!r}: a conversation's name cannot be empty (leave it out for the "
                          "default conversation)")


#: launch's keywords that are the engine's own, not options a front door passes on
_ENGINE_ONLY = frozenset({"prompt", "sess", "listeners", "comparison"})


def door_options(*own: str, without: Collection[str] = ()) -> list[str]:
    """The options a front door takes: its own keywords, then those it passes on to :func:`launch`."""
    passed = [n for n in inspect.signature(launch).parameters if n not in _ENGINE_ONLY and n not in without]
    return [*own, *(n for n in passed if n not in own)]


#: The longest file name most file systems take, in bytes (a trace id's parts are ASCII).
NAME_MAX = 255
_TRACE_PART = re.compile(r"[A-Za-z0-9_\-~]+(\.[A-Za-z0-9_\-~]+)*")


def check_trace_id(trace_id: str) -> None:
    """Refuse a trace id mmsp's tracer cannot keep apart: it becomes a path under ``MMSP_CACHE_DIR``.

    Parts separated by ``/``, each of letters, digits, ``_``, ``-``, ``~`` and inner dots, short
    enough to be a file name (:data:`NAME_MAX`, with the sidecar's suffix for the last); and the
    trace file must be named after the whole id (:func:`~mmsp_notebook.core.store.tracer_path`
    replaces what follows a dot in the last part with ``.json``: ``exp.1`` and ``exp.2`` would
    both be saved as ``exp.json``).
    """
    if not isinstance(trace_id, str):
        raise OptionTypeError(f"a trace id is a string such as 'nb/x', not {trace_id!r}")
    parts = trace_id.split("/")
    if not all(_TRACE_PART.fullmatch(part) for part in parts) or any(part.strip(".") != part for part in parts):
        raise OptionError(f"trace id {trace_id!r}: use parts of letters, digits, _ - ~ separated by / "
                          "(no empty part, no leading slash, no ..)")
    longest = max(len(part) + (len(SIDECAR_SUFFIX) if n == len(parts) - 1 else 0) for n, part in enumerate(parts))
    if longest > NAME_MAX:
        raise OptionError(f"trace id {trace_id[:40]!r}…: a part is too long for a file name (each part at most "
                          f"{NAME_MAX} characters, the last {NAME_MAX - len(SIDECAR_SUFFIX)}, as its sidecar "
                          f"adds {SIDECAR_SUFFIX})")
    saved = tracer_path(trace_id, "")
    if saved is None or saved.as_posix() != f"{trace_id}.json":
        where = saved.name if saved is not None else "another file"
        raise OptionError(f"trace id {trace_id!r}: no dot in its last part (mmsp's tracer would save "
                          f"it as {where}); try {trace_id.replace('.', '_')!r}")
