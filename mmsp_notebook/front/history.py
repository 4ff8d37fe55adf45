"""A chat's transcript from UniMessages: a history set from Python (``Chat.history``)."""

from __future__ import annotations

from typing import Any

from ..core.redact import redact
from ..views.model import view_model

__all__ = ["transcript_of"]


def transcript_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A transcript for the front end from UniMessages (a history set from Python).

    One assistant entry per turn, as a turn streamed in the chat has: an assistant message and the
    steps that follow it through tool results, each call showing the result the next message gave it
    (the grouping and the drawing of the trace explorer, :func:`~mmsp_notebook.views.conversation.message_turn`).
    The history holds no timing: its turns show none.
    """
    from ..views.conversation import message_turn

    out: list[dict[str, Any]] = []
    steps: list[tuple[dict[str, Any], None]] = []
    results: list[dict[str, str]] = []

    def answer() -> None:
        if steps:
            turn, _notes, untimed = message_turn(steps, results)
            vm = view_model(turn)
            for item in vm["items"]:  # a result without a measured run shows no duration
                if item.get("i") in untimed and isinstance(item.get("result"), dict):
                    item["result"]["took"] = ""
            out.append({"role": "assistant", "turn": vm})
            steps.clear()
            results.clear()

    for message in messages:
        items = message.get("content_items", [])
        if message.get("role") == "user":
            if items and all(item.get("type") == "tool_result.done" for item in items):
                if steps and len(results) < len(steps):  # the results of the last step's calls
                    results.append({item["tool_call_id"]: item["text"] for item in items})
                    continue
                answer()
                continue
            answer()
            text = "".join(item.get("text", "") for item in items if item.get("type") == "text.done")
            srcs = [item["image_url"] for item in items if item.get("type") == "image_url.done"]
            out.append({"role": "user", "text": redact(text), "images": srcs})
        else:
            if steps and len(results) < len(steps):  # an answer that follows an answer: a turn of its own
                answer()
            steps.append((message, None))
    answer()
    return out
