"""The items frame of :mod:`mmsp_notebook.traces` (``load_items``): one row per content item of
every message, user and assistant; with ``payloads=True`` enough to rebuild each message exactly.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pandas as pd

from ..core.stamps import created_ms
from ._build import Window, own_records, split_sidecar
from ._columns import (
    _NAN,
    INT_NA,
    Cat,
    as_ms,
    as_str,
    as_text,
    data_url_info,
    dumps,
    int_col,
    keep_rows,
    obj_col,
    obj_series,
    payload_size,
    str_col,
    time_col,
)

#: fields that get their own column in the items frame; anything else lands in ``extra``
_ITEM_FIELDS = frozenset(
    {
        "type",
        "text",
        "thinking",
        "arguments",
        "name",
        "tool_call_id",
        "mime_type",
        "data",
        "embedding",
        "images",
        "image_url",
        "fidelity",
    }
)


def turn_context(
    history: list[dict[str, Any]],
    cfg_model: str | None,
    done: dict[int, dict[str, Any]],
) -> tuple[list[int], list[float | None], list[str | None]]:
    """Per message: its turn index; per turn: its start (Unix ms) and model.

    A user message belongs to the turn it feeds (the number of assistant messages before it).
    """
    turn_of: list[int] = []
    starts: list[float | None] = []
    models: list[str | None] = []
    turn = 0
    prev: Any = None
    for msg in history:
        turn_of.append(turn)
        if msg.get("role") == "assistant":
            rec = done.get(turn)
            started = as_ms(rec.get("started_at")) if rec else None
            if started is None and prev is not None and prev.get("role") == "user":
                started = created_ms(prev.get("created_at"))
            starts.append(started)
            models.append((as_str(rec.get("model")) if rec else None) or cfg_model)
            turn += 1
        prev = msg
    return turn_of, starts, models


class ItemBuilder(Window):
    """Collects one row per content item of every message (user and assistant)."""

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
        payloads: bool = False,
        dedupe: bool = True,
    ) -> None:
        super().__init__(since_ms, until_ms, models)
        self.payloads = payloads
        #: fingerprint -> (preference, first row, rows) of the copy of a message kept so far (no rows:
        #: filtered out); None without de-duplication
        self.seen: dict[int, tuple[int, int, int]] | None = {} if dedupe else None
        self.dropped: list[tuple[int, int]] = []  # (first row, rows) of copies that lost to a later one
        self.duplicates = 0
        self.trace_id: list[str] = []
        self.strs: dict[str, list[str | None]] = {
            k: []
            for k in ("text", "thinking", "arguments", "name", "tool_call_id", "mime_type", "image_url", "extra")
        }
        self.ints = {k: array("q") for k in ("message_index", "turn", "item_index", "size", "embedding_dims", "n_images")}
        self.created = array("d")
        self.has_fidelity = bytearray()
        self.cats = {k: Cat() for k in ("role", "type", "model")}
        self.data: list[Any] = []
        self.embedding: list[Any] = []
        self.images: list[Any] = []
        self.fidelity: list[str | None] = []

    def add(self, trace_id: str, data: dict[str, Any], records: list[dict[str, Any]] | None) -> None:
        """Add every content item of one trace."""
        history = data["history"]
        cfg_model = as_str(data["config"].get("model"))
        done = own_records(split_sidecar(records)[0], history) if records else {}
        turn_of, starts, models = turn_context(history, cfg_model, done)
        n_turns = len(starts)
        filtered, payloads = self.filtered, self.payloads
        N, S, C = self.ints, self.strs, self.cats
        answer_at, answer_fp = -1, None  # the fingerprint of the answer to the last user message, found with it
        for mi, msg in enumerate(history):
            t = turn_of[mi]
            created = created_ms(msg.get("created_at"))
            if t < n_turns:
                anchor, model = starts[t], models[t]
            else:  # trailing user message with no answer (yet)
                anchor, model = created, cfg_model
            items = msg.get("content_items")
            if items.__class__ is not list:
                continue
            role = msg.get("role")
            role = role if role.__class__ is str else None
            # de-duplicate first, then filter: a filter must not change which copy is kept. The
            # copy kept is the turns frame's: the one whose sidecar times its turn, else the first
            fp = None
            if self.seen is not None and created is not None:
                fp = answer_fp if answer_at == mi else _message_fingerprint(role, created, msg, items)
                if fp is not None and role == "user":
                    answer_at, answer_fp = mi + 1, _answer_fingerprint(history, mi + 1)
                    if answer_fp is not None:
                        fp = hash((fp, answer_fp))
                if fp is not None:
                    pref = int(t in done)
                    kept = self.seen.get(fp)
                    if kept is not None:
                        self.duplicates += 1
                        if pref <= kept[0]:
                            continue
                        if kept[2]:
                            self.dropped.append(kept[1:])
            start = len(self.trace_id)
            if filtered and not self._keep(anchor, model):
                if fp is not None:
                    self.seen[fp] = (pref, start, 0)  # type: ignore[index]
                continue
            for ii, it in enumerate(items):
                if it.__class__ is not dict:
                    it = {"type": None, "value": it}
                typ = it.get("type")
                text = it.get("text")
                thinking = it.get("thinking")
                args = it.get("arguments")
                data_ = it.get("data")
                emb = it.get("embedding")
                img = it.get("image_url")
                images = it.get("images")
                mime = it.get("mime_type")
                size: int | None = None
                dims: int | None = None
                n_images: int | None = None
                if text.__class__ is str:
                    size = len(text)
                elif thinking.__class__ is str:
                    size = len(thinking)
                if args is not None:
                    args = dumps(args)
                    if size is None:
                        size = len(args)
                if data_ is not None:
                    size = payload_size(data_)
                if emb.__class__ is list:
                    dims = len(emb)
                    if size is None:
                        size = dims
                if images.__class__ is list:
                    n_images = len(images)
                if img.__class__ is str and img.startswith("data:"):
                    m, sz = data_url_info(img)
                    if mime is None:
                        mime = m
                    if size is None:
                        size = sz
                    if not payloads:
                        img = None
                extra = {k: v for k, v in it.items() if k not in _ITEM_FIELDS}
                self.trace_id.append(trace_id)
                N["message_index"].append(mi)
                N["turn"].append(t)
                N["item_index"].append(ii)
                N["size"].append(INT_NA if size is None else size)
                N["embedding_dims"].append(INT_NA if dims is None else dims)
                N["n_images"].append(INT_NA if n_images is None else n_images)
                C["role"].append(role)
                C["type"].append(typ if typ.__class__ is str else (None if typ is None else str(typ)))
                C["model"].append(model)
                self.created.append(_NAN if created is None else created)
                self.has_fidelity.append("fidelity" in it)
                S["text"].append(text if text.__class__ is str else None)
                S["thinking"].append(thinking if thinking.__class__ is str else None)
                S["arguments"].append(args)
                nm = it.get("name")
                S["name"].append(nm if nm.__class__ is str else None)
                tc = it.get("tool_call_id")
                S["tool_call_id"].append(tc if tc.__class__ is str else None)
                S["mime_type"].append(mime if mime.__class__ is str else None)
                S["image_url"].append(img if img.__class__ is str else None)
                S["extra"].append(dumps(extra) if extra else None)
                if payloads:
                    self.data.append(data_)
                    self.embedding.append(emb)
                    self.images.append(images)
                    self.fidelity.append(dumps(it["fidelity"]) if "fidelity" in it else None)
            if fp is not None:
                self.seen[fp] = (pref, start, len(self.trace_id) - start)  # type: ignore[index]

    def frame(self) -> pd.DataFrame:
        """Build the items DataFrame."""
        N, S, C = self.ints, self.strs, self.cats
        cols: dict[str, Any] = {
            "trace_id": str_col(self.trace_id),
            "message_index": int_col(N["message_index"]),
            "turn": int_col(N["turn"]),
            "role": C["role"].build(),
            "item_index": int_col(N["item_index"]),
            "type": C["type"].build(),
            "model": C["model"].build(),
            "created_at": time_col(self.created),
            "text": str_col(S["text"]),
            "thinking": str_col(S["thinking"]),
            "arguments": str_col(S["arguments"]),
            "name": str_col(S["name"]),
            "tool_call_id": str_col(S["tool_call_id"]),
            "mime_type": str_col(S["mime_type"]),
            "size": int_col(N["size"]),
            "embedding_dims": int_col(N["embedding_dims"]),
            "n_images": int_col(N["n_images"]),
            "image_url": str_col(S["image_url"]),
            "has_fidelity": np.frombuffer(bytes(self.has_fidelity), dtype=np.bool_).copy(),
            "extra": str_col(S["extra"]),
        }
        if self.payloads:
            cols["data"] = str_col([as_text(v) for v in self.data])
            cols["embedding"] = obj_series(obj_col(self.embedding))
            cols["images"] = obj_series(obj_col(self.images))
            cols["fidelity"] = str_col(self.fidelity)
        df = pd.DataFrame(cols, copy=False)
        if self.dropped:
            keep = np.ones(len(df), dtype=bool)
            for start, n in self.dropped:
                keep[start:start + n] = False
            df = keep_rows(df, keep)
        df.attrs["duplicates"] = self.duplicates
        return df


def _slen(v: Any) -> int | None:
    return len(v) if v.__class__ is str else None


def _answer_fingerprint(history: list[dict[str, Any]], i: int) -> int | None:
    """The fingerprint of ``history[i]`` when it is an assistant message (the answer to the user
    message before it), else None. A user message's fingerprint is joined with its answer's: a
    prompt sent to several models at once (a comparison, each model its own trace) is the same
    message in each trace, but not a copy of the others."""
    answer = history[i] if i < len(history) else None
    if answer.__class__ is not dict or answer.get("role") != "assistant":
        return None
    items, created = answer.get("content_items"), created_ms(answer.get("created_at"))
    if items.__class__ is not list or created is None:
        return None
    return _message_fingerprint("assistant", created, answer, items)


def message_key(role: str | None, created: float, msg: dict[str, Any], items: list[Any]) -> tuple[Any, ...]:
    """The fields that tell one message apart across trace files that repeat a conversation's
    history: role, ``created_at`` (Unix ms), finish reason, usage and the shape of each item. A
    dataset digests the same key (``_convert._message_fps``)."""
    usage = msg.get("usage_metadata")
    return (
        role,
        created,
        msg.get("finish_reason"),
        tuple(usage.values()) if usage.__class__ is dict else None,
        tuple(
            (it.get("type"), _slen(it.get("text")), _slen(it.get("thinking")), _slen(it.get("data")), it.get("tool_call_id"))
            if it.__class__ is dict
            else repr(it)
            for it in items
        ),
    )


def _message_fingerprint(role: str | None, created: float, msg: dict[str, Any], items: list[Any]) -> int | None:
    """A hash identifying one message across trace files that repeat a conversation's history."""
    try:
        return hash(message_key(role, created, msg, items))
    except TypeError:  # an unhashable value in a foreign file: no de-duplication for it
        return None
