"""The explorer's pickers (model, status, finish): the values a page offers them, bounded.

Each picker offers the :data:`FACET_LIMIT` most frequent values of its column with their counts,
and says how many values it leaves out (one of them is typed in the picker's "type a value…", or
found by search, ``model:name``). A value is shown cut to :data:`LABEL_CHARS` characters (its
title, the tooltip, has more); one longer than :data:`VALUE_CHARS` crosses to the browser as a
stand-in (its first characters and its length), which the kernel turns back into the value when
the front end picks it. A page's bytes grow neither with the number of distinct values nor with
their length.

A value holding a key (a model id with ``?key=...`` in it, a provider URL with a password) crosses
as a stand-in too: the value redacted as the explorer's cells are (:func:`~mmsp_notebook.core.redact.redact`),
so that neither an option nor the query a page echoes holds the key. Each value has a stand-in of
its own (``#2``, ``#3``... after those alike, and after a value of the column that reads the same),
so two values that redact alike stay two options, each picking its own rows.

So does the search text: a word of it holding a key (given to ``filter()``) is echoed as a name, the
word redacted (``model:[redacted]``, ``#2``... after those alike), which the kernel turns back into
the word when the front end sends the text again, edited around it or not.
"""

from __future__ import annotations

import shlex
from typing import Any

import pandas as pd

from ..core.redact import redact
from ..views import format as fmt
from ._query import FACETS, terms

__all__ = ["FACET_LIMIT", "LABEL_CHARS", "VALUE_CHARS", "Facets"]

#: values offered by each picker, most frequent first
FACET_LIMIT = 100
#: characters of a value shown in a picker
LABEL_CHARS = 80
#: a value longer than this crosses to the browser as a stand-in of this many characters and its length
VALUE_CHARS = 200


def label(value: str) -> str:
    """A value as an option's text: cut to :data:`LABEL_CHARS`, a bidi control isolated (one line), "" said."""
    text = redact(value) or "(empty)"
    return fmt.isolate(text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…")


class Facets:
    """The offered values of each picker, and the stand-ins of the long ones (see the module docstring)."""

    def __init__(self, df: pd.DataFrame) -> None:
        self._offered: dict[str, list[tuple[str, int]]] = {}
        self._left: dict[str, int] = {}  # facet -> distinct values not offered
        self._token: dict[str, dict[str, str]] = {k: {} for k in FACETS}  # value -> stand-in
        self._value: dict[str, dict[str, str]] = {k: {} for k in FACETS}  # stand-in -> value
        self._distinct: dict[str, Any] = {}  # facet -> every value of its column (an Index)
        self._known: dict[str, set[str]] = {}  # facet -> the same as text, made when a stand-in is
        self._words: dict[str, str] = {}  # name -> word holding a key, of the search text last echoed
        for facet, col in FACETS.items():
            counts = df[col].value_counts(dropna=True) if col in df else pd.Series(dtype="int64")
            counts = counts[counts > 0]
            self._distinct[facet] = counts.index
            self._offered[facet] = [(str(v), int(n)) for v, n in counts.iloc[:FACET_LIMIT].items()]
            self._left[facet] = max(0, len(counts) - FACET_LIMIT)
        # the offered options, made once
        self._options = {f: [self._option(f, v, f" ({fmt.integer(n)})") for v, n in offered]
                         for f, offered in self._offered.items()}

    def token(self, facet: str, value: str) -> str:
        """What crosses to the browser for ``value``: itself, or its stand-in when it is long or holds a
        key (see the module docstring): no stand-in is another's, nor a value of the column."""
        shown = redact(value)
        if len(value) <= VALUE_CHARS and shown == value:
            return value
        found = self._token[facet].get(value)
        if found is None:
            base = (shown if len(value) <= VALUE_CHARS and len(shown) <= VALUE_CHARS
                    else f"{shown[:VALUE_CHARS]}… ({len(value):,} characters)")
            known = self._known.get(facet)
            if known is None:
                known = self._known[facet] = set(map(str, self._distinct[facet]))
            found, n = base, 1
            while found in self._value[facet] or found in known:  # values alike once redacted or cut
                n += 1
                found = f"{base} #{n}"
            self._token[facet][value], self._value[facet][found] = found, value
        return found

    def resolve(self, patch: dict[str, Any]) -> dict[str, Any]:
        """A front end's query patch with the stand-ins it picked turned back into their values."""
        out = dict(patch)
        text = out.get("text")
        if isinstance(text, str) and self._words:
            words = terms(text)
            if any(w in self._words for w in words):
                out["text"] = " ".join(_quoted(self._words.get(w, w)) for w in words)
        for facet in FACETS:
            values = out.get(facet)
            if isinstance(values, list):
                out[facet] = [self._value[facet].get(v, v) if isinstance(v, str) else v for v in values]
        return out

    def items(self, facet: str, picked: list[str]) -> list[list[str]]:
        """The picker's options: ``[sent value, label]``, and a title where the label cuts the value (the
        value, or its stand-in): the offered values with their counts, then a picked value they do not
        hold (by filter() or typed), still shown."""
        offered = {v for v, _ in self._offered[facet]}
        return self._options[facet] + [self._option(facet, v) for v in dict.fromkeys(picked[:FACET_LIMIT])
                                       if v not in offered]

    def _option(self, facet: str, value: str, count: str = "") -> list[str]:
        """``[sent value, label + count(, title)]``: the label, and the title where the label cuts it, are
        those of what is sent (a stand-in's ``#2`` tells apart values that redact alike)."""
        sent = self.token(facet, value)
        text = label(sent) + count
        return [sent, text, sent] if len(sent) > LABEL_CHARS else [sent, text]

    def other(self) -> dict[str, dict[str, str]]:
        """``{"facet_other": {facet: label}}`` for the pickers that leave values out (else nothing): the
        label of their last option, which asks for a value to type and says how many there are (a
        picker that leaves none out says "type a value…")."""
        other = {f: f"type a value… ({fmt.integer(n)} more value{'s' if n != 1 else ''})"
                 for f, n in self._left.items() if n}
        return {"facet_other": other} if other else {}

    def query(self, q: dict[str, Any]) -> dict[str, Any]:
        """The query as a page echoes it: a picked value as its stand-in, at most :data:`FACET_LIMIT` of
        them; a word of the search text holding a key as its name (see the module docstring)."""
        return {**q, "text": self.text(q.get("text") or ""),
                **{f: [self.token(f, v) for v in q[f][:FACET_LIMIT]] for f in FACETS if f in q}}

    def text(self, text: str) -> str:
        """The search text as a page echoes it: itself, or with each word holding a key named."""
        if redact(text) == text:
            self._words = {}
            return text
        words: dict[str, str] = {}  # word -> its name
        self._words = {}
        for word in terms(text):
            if redact(word) != word and word not in words:
                shown = redact(word)
                base = shown if len(shown) <= VALUE_CHARS else f"{shown[:VALUE_CHARS]}… ({len(word):,} characters)"
                name, n = base, 1
                while name in self._words:  # words alike once redacted or cut
                    n += 1
                    name = f"{base} #{n}"
                words[word], self._words[name] = name, word
        shown = " ".join(_quoted(words.get(w, w)) for w in terms(text))
        return shown if redact(shown) == shown else redact(text)  # (a key across words: said redacted)


def _quoted(word: str) -> str:
    """A word as the search text holds it: quoted when it has a space or a quote in it."""
    return shlex.quote(word) if not word or any(c.isspace() or c in "'\"\\" for c in word) else word
