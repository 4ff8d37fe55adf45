"""The demo model's answer to "this notebook cell failed, correct it": the cell's code made to run.

A prompt asks for a fix when it holds a fenced Python block (the cell) and a Python traceback
(``Traceback (most recent call last):`` or a final line such as ``ZeroDivisionError: division by
zero``). The answer is one fenced Python block, the cell's code inside ``try``/``except`` for the
exception the traceback names (``except Exception`` when that is not a builtin one, which the
cell could not name without its import), printing a note instead of failing, then one sentence.
A prompt that asks what the error means or why it happened (``explain``, ``why``, ``mean`` before
the cell, as ``%mmsp explain`` or "what does this error mean? {Err}" ask) gets one sentence instead:
the exception, Python's own description of a builtin one, and where to go from there.
The demo does not understand code: the fix makes the cell run, it does not repair its logic.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

__all__ = ["CellFix", "cell_fix"]

_FENCE = re.compile(r"```[ \t]*(?:python3?|py|ipython3?)[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
# the last line of a traceback: an exception's (dotted) class name, then its message
_RAISED = re.compile(
    r"^[ \t]*((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Exit|Interrupt|StopIteration|Timeout))"
    r"(?:[ \t]*:[ \t]*(.*?))?[ \t]*$",
    re.MULTILINE,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# a request for an explanation rather than a corrected cell (looked for before the cell's code)
_WHY = re.compile(r"\b(?:explain|why|mean|means|meaning)\b", re.IGNORECASE)


@dataclass(frozen=True)
class CellFix:
    """What a fix answer is made of.

    Attributes:
        code: The cell's code as the prompt quoted it.
        exception: The exception's class name as the traceback gave it (dotted when it was).
        message: The exception's message (may be empty).
        caught: The name the fixed code catches: the builtin class, else ``Exception``.
        explain: The prompt asks what the error means (one sentence), not for a corrected cell.
    """

    code: str
    exception: str
    message: str
    caught: str
    explain: bool = False

    @property
    def fixed(self) -> str:
        """The cell's code inside ``try``/``except``, printing a note when the exception comes."""
        body = "\n".join(f"    {line}" if line.strip() else "" for line in self.code.splitlines())
        comment = "" if self.caught == self.exception else f"  # {self.exception}"
        return (
            "try:\n"
            f"{body}\n"
            f"except {self.caught} as exc:{comment}\n"
            '    print(f"Note: the cell raised {type(exc).__name__}: {exc}; it was caught so that the rest runs.")'
        )

    def answer(self) -> str:
        """The whole answer: the fixed cell in one Python block, then one sentence (or the explanation)."""
        said = f"{self.exception}: {self.message}" if self.message else self.exception
        if self.explain:
            described = getattr(builtins, self.exception).__doc__ if self.caught == self.exception else None
            meaning = (f"Python describes {self.exception} as “{described.strip().splitlines()[0]}”"
                       if described else f"{self.exception} is not a builtin exception: its module's documentation "
                       "says what it means")
            return (f"The cell stopped at the line that raised {said}; {meaning} — fix that line's cause, "
                    "or ask for a corrected cell that catches it.")
        return (
            f"```python\n{self.fixed}\n```\n\n"
            f"The cell raised {said}, so this version catches it and prints a note instead of stopping; "
            "fix the cause in the code when you can."
        )

    def thinking(self) -> str:
        """What the model thinks before answering."""
        return (
            f"The cell failed with {self.exception}"
            + (f" ({self.message})" if self.message else "")
            + (". I will say what it means in one sentence." if self.explain else
               f". I will wrap its code in try/except {self.caught} so that it runs, and say so in one sentence.")
        )


def _builtin_exception(name: str) -> bool:
    value = getattr(builtins, name, None)
    return isinstance(value, type) and issubclass(value, BaseException)


def cell_fix(prompt: str) -> CellFix | None:
    """The fix a prompt asks for, or None when it holds no Python block and traceback.

    The first fenced Python block is the cell; the exception is the last exception line after it
    (a traceback's last line names what was raised), ``Exception`` when only the ``Traceback``
    header is there.
    """
    text = _ANSI.sub("", prompt)
    fence = _FENCE.search(text)
    if fence is None or not fence.group(1).strip():
        return None
    after = text[fence.end():]
    raised = list(_RAISED.finditer(after))
    if raised:
        name, message = raised[-1].group(1), (raised[-1].group(2) or "").strip()
    elif _TRACEBACK.search(after):  # a traceback whose last line was left out: its type is unknown
        name, message = "Exception", ""
    else:
        return None
    caught = name if "." not in name and _builtin_exception(name) else "Exception"
    return CellFix(code=fence.group(1).rstrip("\n"), exception=name, message=message, caught=caught,
                   explain=bool(_WHY.search(text[:fence.start()])))
