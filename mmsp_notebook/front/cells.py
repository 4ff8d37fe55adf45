"""The notebook around a turn: failed cells as prompt context (``{Err}``, ``%mmsp fix``) and answers'
code blocks offered as the next cell (``--to-cell``).

Failed cells are recorded with IPython's ``post_run_cell`` event (it sees the exception of every
cell, whatever custom exception handler another extension installed, and needs no chaining): each
becomes a :class:`CellError` in the notebook's ``Err`` mapping, keyed by execution count (cells that
are ``%mmsp`` themselves are not recorded: their errors are the magic's, not code to fix).
``{Err}`` in a prompt is the last one, ``{Err[5]}`` the one of ``In[5]``: the cell's source, then its
traceback (the last frames, at most :data:`TRACEBACK_LIMIT` characters), keys redacted.
"""

from __future__ import annotations

import builtins
import re
import traceback
from dataclasses import dataclass
from typing import Any

from .._errors import OptionError
from ..core.redact import redact, redact_secrets

__all__ = ["CellError", "ErrorLog", "record_errors", "forget_errors", "error_log", "reserved_name", "RESERVED_NAMES",
           "code_blocks", "pick_code", "check_to_cell", "FIX_SYSTEM", "fix_prompt", "explain_prompt"]

TRACEBACK_LIMIT = 4000  # characters of a traceback put in a prompt (its end, where the error is)
FRAMES = 8  # innermost frames kept


@dataclass(frozen=True)
class CellError:
    """A cell that raised: its execution count, source, and the exception as text."""

    execution_count: int | None
    source: str
    type: str
    message: str
    traceback: str

    def __str__(self) -> str:
        head = f"In [{self.execution_count}]:" if self.execution_count is not None else "The cell:"
        return (f"{head}\n```python\n{self.source.rstrip()}\n```\n\nIt raised:\n```\n{self.traceback.rstrip()}\n```")


class ErrorLog(dict):  # type: ignore[type-arg]
    """The failed cells of this kernel by execution count; as text, the last one (``{Err}``)."""

    @property
    def last(self) -> CellError | None:
        return self[max(self)] if self else None

    def __str__(self) -> str:
        last = self.last
        return str(last) if last is not None else "(no cell has failed in this kernel yet)"

    def __repr__(self) -> str:
        last = f"; last In[{max(self)}]" if self else ""
        return f"<Err: {len(self)} failed cell{'s' if len(self) != 1 else ''}{last}>"


def _cell_error(execution_count: int | None, source: str, exc: BaseException) -> CellError:
    frames = traceback.format_exception(exc, limit=-FRAMES)
    text = "".join(frames)
    if len(text) > TRACEBACK_LIMIT:
        text = "…" + text[-TRACEBACK_LIMIT:]
    message = str(exc)
    return CellError(execution_count, redact(source), type(exc).__name__, redact(message), redact(text))


_hooks: dict[int, Any] = {}
_logs: dict[int, ErrorLog] = {}

#: Names of the notebook's namespace the package keeps or reads, and IPython's own: ``-o NAME`` refuses them.
RESERVED_NAMES = {
    "Err": "this kernel's log of failed cells ({Err}, %mmsp fix)",
    "__session__": "the notebook's path, which names its traces",
    "In": "IPython's input history",
    "Out": "IPython's output history",
    "get_ipython": "IPython's shell",
    # (-o __builtins__: every later cell fails, its print(...) looked up in a Turn)
    "__builtins__": "the builtins every cell looks print, len... up in",
    "__builtin__": "the builtins module",
    "exit": "IPython's exit",
    "quit": "IPython's exit",
}
_IPYTHON_NAMES = re.compile(r"_{1,3}|_i{1,3}|_i?\d+|_[oid]h")  # _, __, ___, _i, _ii, _iii, _5, _i5, _oh, _ih, _dh


def reserved_name(name: str) -> str | None:
    """What the notebook's variable ``name`` holds when the package, IPython or Python relies on it (a
    builtin such as ``print``), else ``None``."""
    if name in RESERVED_NAMES:
        return RESERVED_NAMES[name]
    if _IPYTHON_NAMES.fullmatch(name):
        return "one of IPython's output and input history variables"
    if name in vars(builtins):  # -o print: every later print(...) would call the turn
        return f"Python's builtin {name}"
    return None


def error_log(shell: Any) -> ErrorLog | None:
    """The log of failed cells this package records for ``shell`` (whatever ``Err`` was rebound to)."""
    log = _logs.get(id(shell))
    if log is None:
        found = shell.user_ns.get("Err")
        log = found if isinstance(found, ErrorLog) else None
    return log


def record_errors(shell: Any) -> ErrorLog:
    """Start recording the failed cells of ``shell`` into its namespace's ``Err`` (kept if already one)."""
    log = shell.user_ns.get("Err")
    if not isinstance(log, ErrorLog):
        log = ErrorLog()
        shell.user_ns["Err"] = log
        shell.user_ns_hidden["Err"] = log  # not listed by %who, not part of the user's variables

    def post_run_cell(result: Any) -> None:
        exc = result.error_in_exec or result.error_before_exec
        if exc is None or isinstance(exc, KeyboardInterrupt):  # (an interrupted turn's too: no code to fix)
            return
        source = getattr(getattr(result, "info", None), "raw_cell", "") or ""
        if source.lstrip().startswith("%mmsp") or source.lstrip().startswith("%%mmsp"):
            return  # the magic's own complaints and strict turns are not code to fix
        log[result.execution_count] = _cell_error(result.execution_count, source, exc)

    forget_errors(shell)
    shell.events.register("post_run_cell", post_run_cell)
    _hooks[id(shell)] = post_run_cell
    _logs[id(shell)] = log
    return log


def forget_errors(shell: Any) -> None:
    """Stop recording (``%unload_ext``)."""
    hook = _hooks.pop(id(shell), None)
    _logs.pop(id(shell), None)
    if hook is not None:
        try:
            shell.events.unregister("post_run_cell", hook)
        except ValueError:
            pass


FIX_SYSTEM = ("You fix Python cells of a Jupyter notebook. Answer with the corrected cell as one ```python code "
              "block that runs on its own, then one sentence on what was wrong.")


def fix_prompt(error: CellError) -> str:
    return f"This notebook cell failed. Correct it.\n\n{error}"


def explain_prompt(error: CellError) -> str:
    return f"This notebook cell failed. Explain why, briefly, and how to fix it.\n\n{error}"


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """The fenced and indented code blocks of a Markdown answer: ``(language, code)`` in order."""
    from markdown_it import MarkdownIt

    out = []
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type in ("fence", "code_block"):
            language = (token.info or "").strip().split(" ")[0].lower()
            out.append((language, token.content))
    return out


def check_to_cell(which: str) -> None:
    """Refuse a block number below 1 (``--to-cell 0``, ``--to-cell -1``) before the request: N counts from 1."""
    if re.fullmatch(r"[+-]?\d+", which.strip()) and int(which) < 1:
        raise OptionError(f"--to-cell {which}: N counts the answer's code blocks from 1 (--to-cell 1 is the "
                          "first); give a language (--to-cell python) or no value for all of them")


def pick_code(markdown: str, which: str = "all") -> str | None:
    """The code to offer as the next cell: all blocks (``all``), the n-th (``2``) or those of a language
    (``python``); ``None`` when the answer has no such block."""
    blocks = code_blocks(redact_secrets(markdown))  # a cell the project writes never carries a configured key
    if which.isdigit():
        n = int(which)
        chosen = [blocks[n - 1][1]] if 1 <= n <= len(blocks) else []
    elif which == "all":
        chosen = [code for _, code in blocks]
    else:
        chosen = [code for language, code in blocks if language == which.lower()]
    if not chosen:
        return None
    return "\n\n".join(code.rstrip("\n") for code in chosen)
