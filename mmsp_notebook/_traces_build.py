"""Column builders for :mod:`mmsp_notebook.traces`: one pass over parsed traces, plain Python
containers (``array.array`` for numbers, lists for strings), one DataFrame construction at the end.

Integers use ``INT_NA`` (the smallest int64) as the missing-value sentinel while building; it turns
into a nullable ``Int64`` mask when the frame is made, so a missing usage bucket stays ``<NA>`` and
never becomes 0. Floats use NaN. Category columns are built as codes (``-1`` = missing).
"""

from __future__ import annotations

import json
import math
from array import array
from typing import Any

import numpy as np
import pandas as pd

INT_NA = -(2**63)
_NAN = math.nan

# Content item types as mmsp writes them, and the names used before mmsp 0.5 (still found in
# older trace files; the Tracer's own viewer accepts both).
_TEXT = frozenset({"text.done", "text"})
_THINKING = frozenset({"thinking.done", "thinking"})
_TOOL_CALL = frozenset({"tool_call.done", "tool_call"})
_INLINE = frozenset({"inline_data.done", "inline_data"})
_INLINE_THINKING = frozenset({"inline_thinking.done", "inline_thinking"})
_EMBEDDING = frozenset({"embedding.done", "embedding"})
_TOOL_RESULT = frozenset({"tool_result.done", "tool_result"})
_IMAGE_URL = frozenset({"image_url.done", "image_url"})

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


# --------------------------------------------------------------------------- small coercions


def as_int(v: Any) -> int | None:
    """An integer count from JSON, or None (bools, strings and non-integral floats are not counts)."""
    if v.__class__ is int:
        return v
    if v.__class__ is float and v == v and v not in (math.inf, -math.inf) and v.is_integer():
        return int(v)
    return None


def as_num(v: Any) -> float | None:
    """A finite number from JSON, or None."""
    c = v.__class__
    if c is int or c is float:
        f = float(v)
        return f if f == f and f not in (math.inf, -math.inf) else None
    return None


def as_str(v: Any) -> str | None:
    """A non-empty string, or None."""
    return v if v.__class__ is str and v else None


def b64_size(s: str) -> int:
    """Decoded byte length of base64 text, computed from its length (the payload is never decoded)."""
    n = len(s)
    if n == 0:
        return 0
    pad = 2 if s.endswith("==") else (1 if s.endswith("=") else 0)
    return n * 3 // 4 - pad


def payload_size(data: Any) -> int | None:
    """Byte size of an inline payload as stored by the Tracer (base64 text), or of raw bytes."""
    if data.__class__ is str:
        return b64_size(data)
    if isinstance(data, (bytes, bytearray)):
        return len(data)
    return None


def _data_url_info(url: str) -> tuple[str | None, int | None]:
    # "data:image/png;base64,AAAA" -> ("image/png", decoded size)
    head, sep, body = url.partition(",")
    if not sep:
        return None, None
    meta = head[5:]
    mime = meta.split(";", 1)[0] or None
    return mime, (b64_size(body) if meta.endswith(";base64") else len(body))


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


try:  # compact JSON for tool arguments and fidelity; orjson when installed
    import orjson as _orjson

    def dumps(v: Any) -> str:
        """Compact JSON text of a parsed value (orjson, falling back to the stdlib)."""
        try:
            return _orjson.dumps(v).decode()
        except (TypeError, ValueError):
            return _dumps(v)

except ImportError:  # pragma: no cover
    dumps = _dumps


# --------------------------------------------------------------------------- column kinds


class Cat:
    """A categorical column built as codes."""

    __slots__ = ("codes", "index", "cats")

    def __init__(self) -> None:
        self.codes = array("i")
        self.index: dict[Any, int] = {}
        self.cats: list[Any] = []

    def code(self, v: Any) -> int:
        if v is None:
            return -1
        c = self.index.get(v)
        if c is None:
            c = self.index[v] = len(self.cats)
            self.cats.append(v)
        return c

    def append(self, v: Any) -> None:
        self.codes.append(self.code(v))

    def build(self) -> pd.Categorical:
        codes = np.frombuffer(self.codes, dtype=np.int32) if len(self.codes) else np.empty(0, np.int32)
        return pd.Categorical.from_codes(codes, categories=pd.Index(self.cats, dtype=object))


def int_col(a: array) -> pd.arrays.IntegerArray:
    """A nullable Int64 array from an ``array('q')`` holding ``INT_NA`` for missing values."""
    v = np.array(a, dtype=np.int64)
    mask = v == INT_NA
    v[mask] = 0
    return pd.arrays.IntegerArray(v, mask)


def float_col(a: array) -> np.ndarray:
    """A float64 array (NaN = missing)."""
    return np.array(a, dtype=np.float64)


def time_col(a: array) -> pd.DatetimeIndex:
    """Tz-aware UTC timestamps (microsecond resolution) from Unix milliseconds (NaN = NaT)."""
    ms = np.array(a, dtype=np.float64)
    us = np.full(ms.shape, np.iinfo(np.int64).min, dtype=np.int64)
    ok = ~np.isnan(ms)
    us[ok] = np.round(ms[ok] * 1000.0).astype(np.int64)
    return pd.DatetimeIndex(us.view("M8[us]")).tz_localize("UTC")


def obj_col(values: list[Any]) -> np.ndarray:
    """An object array holding the values as they are (tuples and lists are not unpacked)."""
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def str_col(values: list[str | None]) -> Any:
    """A string column in pandas' default string dtype (missing = NA)."""
    return pd.array(values, dtype="str") if pd.__version__ >= "3" else pd.array(values, dtype=object)


# --------------------------------------------------------------------------- pricing


def price_tables() -> tuple[dict[tuple[str, str], tuple[float, ...]], dict[str, tuple[float, ...]]]:
    """Per-token prices from ``mmsp.registry.list_supported_models`` (USD).

    Returns ``(by_model_and_client, by_model)`` mapping to ``(cached, prompt, thoughts, response)``
    prices per token. A model listed by several platforms is priced, when the turn's client type is
    unknown, at its first registry entry (the vendor's official endpoint comes first). A missing
    cache-hit price means the platform publishes no discount: cached tokens cost the prompt price.
    """
    from mmsp.registry import list_supported_models

    by_pair: dict[tuple[str, str], tuple[float, ...]] = {}
    by_model: dict[str, tuple[float, ...]] = {}
    for entry in list_supported_models("USD"):
        p = entry.get("pricing")
        if not p:
            continue
        prompt = float(p["prompt_tokens"])
        t = (
            float(p.get("cached_tokens", prompt)) / 1e6,
            prompt / 1e6,
            float(p["thoughts_tokens"]) / 1e6,
            float(p["response_tokens"]) / 1e6,
        )
        by_pair.setdefault((entry["model"], entry["client"]), t)
        by_model.setdefault(entry["model"], t)
    return by_pair, by_model


# --------------------------------------------------------------------------- per-file context


def config_fields(config: dict[str, Any]) -> tuple[Any, ...]:
    """(model, temperature, max_tokens, thinking_level, n_tools, tool_names) of a trace's config."""
    tools = config.get("tools")
    if isinstance(tools, list):
        names = tuple(
            t.get("name") if isinstance(t, dict) and isinstance(t.get("name"), str) else str(t) for t in tools
        )
        n_tools: int | None = len(names)
    else:
        names, n_tools = None, None
    level = config.get("thinking_level")
    return (
        as_str(config.get("model")),
        as_num(config.get("temperature")),
        as_int(config.get("max_tokens")),
        str(level) if level is not None and level != "" else None,
        n_tools,
        names,
    )


def split_sidecar(records: list[dict[str, Any]]) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """Sidecar records of one trace: ``({turn: record}, [records of turns that recorded nothing])``.

    A turn recorded twice keeps the last record (the file is append-only). Records without an
    integer ``turn`` are ignored.
    """
    done: dict[int, dict[str, Any]] = {}
    failed: list[dict[str, Any]] = []
    for r in records:
        t = as_int(r.get("turn"))
        if t is None:
            continue
        if r.get("message_index") is None:
            failed.append(r)
        else:
            done[t] = r
    failed.sort(key=lambda r: (as_int(r.get("turn")), as_num(r.get("started_at")) or 0.0))
    return done, failed


def _error_fields(rec: dict[str, Any]) -> tuple[str | None, str | None]:
    err = rec.get("error")
    if isinstance(err, dict):
        t, m = err.get("type"), err.get("message")
        return (str(t) if t is not None else None), (str(m) if m is not None else None)
    if err is None:
        return None, None
    return None, str(err)


def _sum(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


# --------------------------------------------------------------------------- turns


class TurnBuilder:
    """Collects one row per assistant turn (plus sidecar-only failed turns)."""

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
    ) -> None:
        self.since_ms, self.until_ms, self.models = since_ms, until_ms, models
        self.by_pair, self.by_model = price_tables()
        self.trace_id: list[str] = []
        self.tool_names: list[Any] = []
        self.thinking_level: list[str | None] = []
        self.error_type: list[str | None] = []
        self.error_message: list[str | None] = []
        self.cats = {k: Cat() for k in ("model", "client_type", "status", "source", "finish_reason")}
        self.ints = {
            k: array("q")
            for k in (
                "turn",
                "message_index",
                "cached_tokens",
                "prompt_tokens",
                "thoughts_tokens",
                "response_tokens",
                "input_tokens",
                "output_tokens",
                "total_tokens",
                "n_items",
                "n_text",
                "n_thinking",
                "n_tool_calls",
                "n_images",
                "n_audio",
                "text_chars",
                "thinking_chars",
                "max_tokens",
                "n_tools",
            )
        }
        self.floats = {
            k: array("d")
            for k in ("started", "ended", "latency", "ttft", "tokens_per_s", "cost", "temperature")
        }
        self.cost_missing = bytearray()

    # one row ---------------------------------------------------------------------------------
    def _row(
        self,
        trace_id: str,
        cfg: tuple[Any, ...],
        turn: int,
        message_index: int | None,
        model: str | None,
        client: str | None,
        status: str,
        source: str,
        started: float | None,
        ended: float | None,
        latency: float | None,
        ttft: float | None,
        finish: str | None,
        usage: Any,
        counts: tuple[int, ...] | None,
        error: tuple[str | None, str | None],
    ) -> None:
        if self.since_ms is not None and (started is None or started < self.since_ms):
            return
        if self.until_ms is not None and (started is None or started >= self.until_ms):
            return
        if self.models is not None and model not in self.models:
            return
        I, F, C = self.ints, self.floats, self.cats
        if usage.__class__ is dict:
            ca, pr, th, re_ = (
                usage.get("cached_tokens"),
                usage.get("prompt_tokens"),
                usage.get("thoughts_tokens"),
                usage.get("response_tokens"),
            )
            if ca is not None and ca.__class__ is not int:
                ca = as_int(ca)
            if pr is not None and pr.__class__ is not int:
                pr = as_int(pr)
            if th is not None and th.__class__ is not int:
                th = as_int(th)
            if re_ is not None and re_.__class__ is not int:
                re_ = as_int(re_)
        else:
            ca = pr = th = re_ = None
        inp = _sum(ca, pr)
        out = _sum(th, re_)
        tot = _sum(inp, out)
        price = self.by_pair.get((model, client)) if client is not None else None
        if price is None:
            price = self.by_model.get(model)  # type: ignore[arg-type]
        if price is None or tot is None:
            cost = _NAN
        else:
            cost = (ca or 0) * price[0] + (pr or 0) * price[1] + (th or 0) * price[2] + (re_ or 0) * price[3]
        if latency is None and started is not None and ended is not None:
            latency = (ended - started) / 1000.0
        tps = _NAN
        if ttft is not None and latency is not None and out is not None and latency > ttft:
            tps = out / (latency - ttft)

        self.trace_id.append(trace_id)
        I["turn"].append(turn)
        I["message_index"].append(INT_NA if message_index is None else message_index)
        C["model"].append(model)
        C["client_type"].append(client)
        C["status"].append(status)
        C["source"].append(source)
        C["finish_reason"].append(finish)
        F["started"].append(_NAN if started is None else started)
        F["ended"].append(_NAN if ended is None else ended)
        F["latency"].append(_NAN if latency is None else latency)
        F["ttft"].append(_NAN if ttft is None else ttft)
        F["tokens_per_s"].append(tps)
        F["cost"].append(cost)
        self.cost_missing.append(price is None)
        I["cached_tokens"].append(INT_NA if ca is None else ca)
        I["prompt_tokens"].append(INT_NA if pr is None else pr)
        I["thoughts_tokens"].append(INT_NA if th is None else th)
        I["response_tokens"].append(INT_NA if re_ is None else re_)
        I["input_tokens"].append(INT_NA if inp is None else inp)
        I["output_tokens"].append(INT_NA if out is None else out)
        I["total_tokens"].append(INT_NA if tot is None else tot)
        if counts is None:
            for k in ("n_items", "n_text", "n_thinking", "n_tool_calls", "n_images", "n_audio"):
                I[k].append(INT_NA)
            I["text_chars"].append(INT_NA)
            I["thinking_chars"].append(INT_NA)
        else:
            I["n_items"].append(counts[0])
            I["n_text"].append(counts[1])
            I["n_thinking"].append(counts[2])
            I["n_tool_calls"].append(counts[3])
            I["n_images"].append(counts[4])
            I["n_audio"].append(counts[5])
            I["text_chars"].append(counts[6])
            I["thinking_chars"].append(counts[7])
        _model, temp, max_tokens, level, n_tools, names = cfg
        F["temperature"].append(_NAN if temp is None else temp)
        I["max_tokens"].append(INT_NA if max_tokens is None else max_tokens)
        I["n_tools"].append(INT_NA if n_tools is None else n_tools)
        self.thinking_level.append(level)
        self.tool_names.append(names)
        self.error_type.append(error[0])
        self.error_message.append(error[1])

    def _sidecar_row(self, trace_id: str, cfg: tuple[Any, ...], rec: dict[str, Any], source: str) -> None:
        started = as_num(rec.get("started_at"))
        total = as_num(rec.get("total_ms"))
        ttft = as_num(rec.get("ttft_ms"))
        status = rec.get("status")
        self._row(
            trace_id,
            cfg,
            as_int(rec.get("turn")) or 0,
            as_int(rec.get("message_index")),
            as_str(rec.get("model")) or cfg[0],
            as_str(rec.get("client_type")),
            status if isinstance(status, str) and status else "unknown",
            source,
            started,
            started + total if started is not None and total is not None else None,
            total / 1000.0 if total is not None else None,
            ttft / 1000.0 if ttft is not None else None,
            as_str(rec.get("finish_reason")),
            rec.get("usage"),
            None,
            _error_fields(rec),
        )

    # one file --------------------------------------------------------------------------------
    def add(self, trace_id: str, data: dict[str, Any] | None, records: list[dict[str, Any]] | None) -> None:
        """Add the turns of one trace (``data`` None: sidecar only) joined with its sidecar records."""
        history = data["history"] if data is not None else []
        config = data["config"] if data is not None else {}
        cfg = config_fields(config)
        cfg_model = cfg[0]
        done, failed = split_sidecar(records) if records else ({}, [])
        fi, nf = 0, len(failed)
        source_plain = "trace"
        turn = 0
        prev: Any = None
        for i, msg in enumerate(history):
            if msg.get("role") != "assistant":
                prev = msg
                continue
            while fi < nf and as_int(failed[fi].get("turn")) <= turn:  # type: ignore[operator]
                self._sidecar_row(trace_id, cfg, failed[fi], "sidecar")
                fi += 1
            # content counts
            items = msg.get("content_items")
            n_items = n_text = n_think = n_tool = n_img = n_aud = text_chars = think_chars = 0
            if items.__class__ is list:
                n_items = len(items)
                for it in items:
                    if it.__class__ is not dict:
                        continue
                    t = it.get("type")
                    if t in _TEXT:
                        n_text += 1
                        s = it.get("text")
                        if s.__class__ is str:
                            text_chars += len(s)
                    elif t in _THINKING:
                        n_think += 1
                        s = it.get("thinking")
                        if s.__class__ is str:
                            think_chars += len(s)
                    elif t in _TOOL_CALL:
                        n_tool += 1
                    elif t in _INLINE:
                        mt = it.get("mime_type")
                        if mt.__class__ is str:
                            if mt.startswith("image/"):
                                n_img += 1
                            elif mt.startswith("audio/"):
                                n_aud += 1
            ended = msg.get("created_at")
            if ended is not None and ended.__class__ is not int:
                ended = as_num(ended)
            rec = done.pop(turn, None)
            finish = msg.get("finish_reason")
            if finish is not None and finish.__class__ is not str:
                finish = str(finish)
            if rec is None:
                started = None
                if prev is not None and prev.get("role") == "user":
                    started = prev.get("created_at")
                    if started is not None and started.__class__ is not int:
                        started = as_num(started)
                model, client, latency, ttft, source = cfg_model, None, None, None, source_plain
            else:
                started = as_num(rec.get("started_at"))
                if started is None and prev is not None and prev.get("role") == "user":
                    started = as_num(prev.get("created_at"))
                model = as_str(rec.get("model")) or cfg_model
                client = as_str(rec.get("client_type"))
                total = as_num(rec.get("total_ms"))
                ttft_ms = as_num(rec.get("ttft_ms"))
                latency = total / 1000.0 if total is not None else None
                ttft = ttft_ms / 1000.0 if ttft_ms is not None else None
                source = "trace+sidecar"
            self._row(
                trace_id,
                cfg,
                turn,
                i,
                model,
                client,
                "complete",
                source,
                started,
                ended,
                latency,
                ttft,
                finish or None,
                msg.get("usage_metadata"),
                (n_items, n_text, n_think, n_tool, n_img, n_aud, text_chars, think_chars),
                (None, None),
            )
            turn += 1
            prev = msg
        while fi < nf:
            self._sidecar_row(trace_id, cfg, failed[fi], "sidecar")
            fi += 1
        # turns the sidecar saw complete but the trace file does not (yet) hold
        for t in sorted(done):
            self._sidecar_row(trace_id, cfg, done[t], "sidecar")

    # the frame -------------------------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        """Build the turns DataFrame (columns in documented order)."""
        I, F, C = self.ints, self.floats, self.cats
        cols: dict[str, Any] = {
            "trace_id": str_col(self.trace_id),
            "turn": int_col(I["turn"]),
            "message_index": int_col(I["message_index"]),
            "model": C["model"].build(),
            "client_type": C["client_type"].build(),
            "status": C["status"].build(),
            "source": C["source"].build(),
            "started": time_col(F["started"]),
            "ended": time_col(F["ended"]),
            "latency": float_col(F["latency"]),
            "ttft": float_col(F["ttft"]),
            "tokens_per_s": float_col(F["tokens_per_s"]),
            "finish_reason": C["finish_reason"].build(),
        }
        for k in (
            "cached_tokens",
            "prompt_tokens",
            "thoughts_tokens",
            "response_tokens",
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "n_items",
            "n_text",
            "n_thinking",
            "n_tool_calls",
            "n_images",
            "n_audio",
            "text_chars",
            "thinking_chars",
        ):
            cols[k] = int_col(I[k])
        cols["cost"] = float_col(F["cost"])
        cols["cost_missing"] = np.frombuffer(bytes(self.cost_missing), dtype=np.bool_).copy()
        cols["temperature"] = float_col(F["temperature"])
        cols["max_tokens"] = int_col(I["max_tokens"])
        cols["thinking_level"] = str_col(self.thinking_level)
        cols["n_tools"] = int_col(I["n_tools"])
        cols["tool_names"] = obj_col(self.tool_names)
        cols["error_type"] = str_col(self.error_type)
        cols["error_message"] = str_col(self.error_message)
        return pd.DataFrame(cols, copy=False)


# --------------------------------------------------------------------------- items


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
            started = as_num(rec.get("started_at")) if rec else None
            if started is None and prev is not None and prev.get("role") == "user":
                started = as_num(prev.get("created_at"))
            starts.append(started)
            models.append((as_str(rec.get("model")) if rec else None) or cfg_model)
            turn += 1
        prev = msg
    return turn_of, starts, models


class ItemBuilder:
    """Collects one row per content item of every message (user and assistant)."""

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
        payloads: bool = False,
    ) -> None:
        self.since_ms, self.until_ms, self.models, self.payloads = since_ms, until_ms, models, payloads
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
        done = split_sidecar(records)[0] if records else {}
        turn_of, starts, models = turn_context(history, cfg_model, done)
        n_turns = len(starts)
        since, until, wanted, payloads = self.since_ms, self.until_ms, self.models, self.payloads
        I, S, C = self.ints, self.strs, self.cats
        for mi, msg in enumerate(history):
            t = turn_of[mi]
            created = as_num(msg.get("created_at"))
            if t < n_turns:
                anchor, model = starts[t], models[t]
            else:  # trailing user message with no answer (yet)
                anchor, model = created, cfg_model
            if since is not None and (anchor is None or anchor < since):
                continue
            if until is not None and (anchor is None or anchor >= until):
                continue
            if wanted is not None and model not in wanted:
                continue
            items = msg.get("content_items")
            if items.__class__ is not list:
                continue
            role = msg.get("role")
            role = role if role.__class__ is str else None
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
                    m, sz = _data_url_info(img)
                    if mime is None:
                        mime = m
                    if size is None:
                        size = sz
                    if not payloads:
                        img = None
                extra = {k: v for k, v in it.items() if k not in _ITEM_FIELDS}
                self.trace_id.append(trace_id)
                I["message_index"].append(mi)
                I["turn"].append(t)
                I["item_index"].append(ii)
                I["size"].append(INT_NA if size is None else size)
                I["embedding_dims"].append(INT_NA if dims is None else dims)
                I["n_images"].append(INT_NA if n_images is None else n_images)
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

    def frame(self) -> pd.DataFrame:
        """Build the items DataFrame."""
        I, S, C = self.ints, self.strs, self.cats
        cols: dict[str, Any] = {
            "trace_id": str_col(self.trace_id),
            "message_index": int_col(I["message_index"]),
            "turn": int_col(I["turn"]),
            "role": C["role"].build(),
            "item_index": int_col(I["item_index"]),
            "type": C["type"].build(),
            "model": C["model"].build(),
            "created_at": time_col(self.created),
            "text": str_col(S["text"]),
            "thinking": str_col(S["thinking"]),
            "arguments": str_col(S["arguments"]),
            "name": str_col(S["name"]),
            "tool_call_id": str_col(S["tool_call_id"]),
            "mime_type": str_col(S["mime_type"]),
            "size": int_col(I["size"]),
            "embedding_dims": int_col(I["embedding_dims"]),
            "n_images": int_col(I["n_images"]),
            "image_url": str_col(S["image_url"]),
            "has_fidelity": np.frombuffer(bytes(self.has_fidelity), dtype=np.bool_).copy(),
            "extra": str_col(S["extra"]),
        }
        if self.payloads:
            cols["data"] = obj_col(self.data)
            cols["embedding"] = obj_col(self.embedding)
            cols["images"] = obj_col(self.images)
            cols["fidelity"] = str_col(self.fidelity)
        return pd.DataFrame(cols, copy=False)


# --------------------------------------------------------------------------- events


class EventBuilder:
    """Collects one row per streamed event recorded in the timing sidecars."""

    def __init__(
        self,
        since_ms: float | None = None,
        until_ms: float | None = None,
        models: frozenset[str] | None = None,
    ) -> None:
        self.since_ms, self.until_ms, self.models = since_ms, until_ms, models
        self.trace_id: list[str] = []
        self.ints = {k: array("q") for k in ("turn", "message_index", "event_index", "size")}
        self.floats = {k: array("d") for k in ("t", "at", "started")}
        self.cats = {k: Cat() for k in ("model", "client_type", "status", "type", "kind", "phase")}

    def add(self, trace_id: str, records: list[dict[str, Any]], cfg_model: str | None = None) -> None:
        """Add the events of one trace's sidecar records."""
        since, until, wanted = self.since_ms, self.until_ms, self.models
        I, F, C = self.ints, self.floats, self.cats
        for rec in records:
            events = rec.get("events")
            if events.__class__ is not list:
                continue
            started = as_num(rec.get("started_at"))
            if since is not None and (started is None or started < since):
                continue
            if until is not None and (started is None or started >= until):
                continue
            model = as_str(rec.get("model")) or cfg_model
            if wanted is not None and model not in wanted:
                continue
            turn = as_int(rec.get("turn"))
            mi = as_int(rec.get("message_index"))
            client = as_str(rec.get("client_type"))
            status = as_str(rec.get("status"))
            cm, cc, cs = C["model"].code(model), C["client_type"].code(client), C["status"].code(status)
            for ei, ev in enumerate(events):
                if ev.__class__ is not list or len(ev) < 2:
                    continue
                ms = as_num(ev[0])
                typ = ev[1] if ev[1].__class__ is str else str(ev[1])
                size = as_int(ev[2]) if len(ev) > 2 else None
                kind, _, phase = typ.partition(".")
                if not phase:
                    phase = "stop" if typ == "stop" else None
                self.trace_id.append(trace_id)
                I["turn"].append(INT_NA if turn is None else turn)
                I["message_index"].append(INT_NA if mi is None else mi)
                I["event_index"].append(ei)
                I["size"].append(INT_NA if size is None else size)
                F["t"].append(_NAN if ms is None else ms / 1000.0)
                F["at"].append(_NAN if ms is None or started is None else started + ms)
                F["started"].append(_NAN if started is None else started)
                C["model"].codes.append(cm)
                C["client_type"].codes.append(cc)
                C["status"].codes.append(cs)
                C["type"].append(typ)
                C["kind"].append(kind)
                C["phase"].append(phase)

    def frame(self) -> pd.DataFrame:
        """Build the events DataFrame."""
        I, F, C = self.ints, self.floats, self.cats
        return pd.DataFrame(
            {
                "trace_id": str_col(self.trace_id),
                "turn": int_col(I["turn"]),
                "message_index": int_col(I["message_index"]),
                "model": C["model"].build(),
                "client_type": C["client_type"].build(),
                "status": C["status"].build(),
                "started": time_col(F["started"]),
                "event_index": int_col(I["event_index"]),
                "t": float_col(F["t"]),
                "at": time_col(F["at"]),
                "type": C["type"].build(),
                "kind": C["kind"].build(),
                "phase": C["phase"].build(),
                "size": int_col(I["size"]),
            },
            copy=False,
        )
