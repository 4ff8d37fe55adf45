"""The JSON bodies the demo answers with instead of a stream: a refusal, and the Embeddings API's answer."""

from __future__ import annotations

import base64
import struct
from typing import Any

from ._scenario import Plan

__all__ = ["embeddings_body", "faulted", "http_error"]

# The error each refusal travels as: (MMSP type, OpenAI type, OpenAI code, Anthropic type)
_ERROR_KINDS = {
    "invalid_request": ("InvalidRequestError", "invalid_request_error", None, "invalid_request_error"),
    "authentication": ("AuthenticationError", "invalid_request_error", "invalid_api_key", "authentication_error"),
    "rate_limit": ("RateLimitError", "requests", "rate_limit_exceeded", "rate_limit_error"),
    "not_found": ("NotFoundError", "invalid_request_error", "model_not_found", "not_found_error"),
    # HTTP 413: the MMSP server's type for it, the Messages API's request_too_large
    "too_large": ("InvalidRequestError", "invalid_request_error", "request_too_large", "request_too_large"),
}


def faulted(error: dict[str, Any], fault: str | None) -> dict[str, Any]:
    """An error object, naming the injected fault that caused it (``demo_fault``) when one did."""
    return {**error, "demo_fault": fault} if fault else error


def http_error(protocol: str, kind: str, message: str, fault: str | None = None) -> dict[str, Any]:
    """The JSON body of a request refused before streaming, in the protocol's usual shape.

    Args:
        protocol: ``mmsp``, ``chat``, ``responses``, ``embeddings`` or ``messages``.
        kind: ``invalid_request``, ``authentication``, ``rate_limit``, ``not_found`` or ``too_large``.
        message: What went wrong.
        fault: The injected fault (``401``, ``429``) that refused the request, if one did: the
            error object names it in a ``demo_fault`` field (so a client can tell it from a real refusal).

    Returns:
        ``{"error": {"type", "message"}}`` for MMSP, OpenAI's ``{"error": {"message", "type",
        "param", "code"}}`` for Chat, Responses and Embeddings, Anthropic's ``{"type": "error",
        "error": {"type", "message"}}`` for Messages.
    """
    mmsp_type, openai_type, openai_code, anthropic_type = _ERROR_KINDS[kind]
    if protocol == "mmsp":
        return {"error": faulted({"type": mmsp_type, "message": message}, fault)}
    if protocol == "messages":
        return {"type": "error", "error": faulted({"type": anthropic_type, "message": message}, fault)}
    return {"error": faulted({"message": message, "type": openai_type, "param": None, "code": openai_code}, fault)}


def embeddings_body(plan: Plan, model: str, encoding_format: str | None) -> dict[str, Any]:
    """The JSON answer of ``POST /v1/embeddings``: one vector per input, floats or base64 float32."""
    data = []
    for index, block in enumerate(plan.blocks):
        vector = block.joined
        if encoding_format == "base64":
            value: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        else:
            value = vector
        data.append({"object": "embedding", "index": index, "embedding": value})
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": plan.usage.prompt, "total_tokens": plan.usage.prompt},
    }
