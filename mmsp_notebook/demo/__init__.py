"""An offline demo model server that the real mmsp clients talk to.

``python -m mmsp_notebook.demo [--port 0]`` prints ``mmsp demo server listening on
http://127.0.0.1:PORT/v1`` and serves until Ctrl-C. In code::

    from mmsp_notebook.demo import DemoServer

    with DemoServer(instant=True) as srv:
        client = srv.client("demo")                       # mmsp.AutoLLMClient on /v1/stream
        chat = srv.client("demo+tps=200", "openai-chat")  # or openai-responses, ant-messages
        async for event in client.streaming_response(messages, {}):
            ...

Models and options
------------------

A model name is a base model and options appended with ``+``: ``demo+instant``,
``demo+tokens=20000``, ``demo+tps=200+cut-text``. Bases: ``demo`` (thinks, then answers) and
``demo-embed`` (embeddings). Options:

=================  ==============================================================================
``instant``        no pacing at all (the server's ``instant=True`` does this for every model)
``tps=N``          N fragments per second (paces even on an instant server)
``delay=S``        first-token delay in seconds (paces even on an instant server)
``tokens=N``       answer with a Markdown text of N tokens (benchmarks)
``nothink``        no thinking (so does ``thinking_level`` "none" / ``thinking: disabled``)
``xss``            script payloads in thinking, text and tool arguments; the call names the first
                   offered tool whose name contains markup, else the first offered tool
``dim=N``          embedding dimensions (``embedding_config.dimensions`` wins; default 64)
``silence[=S]``    S seconds (default 3) of heartbeats only before the answer (kept in instant mode)
fault              one of ``cut-text``, ``cut-args``, ``error``, ``nostop``, ``bad-args``,
                   ``401``, ``429[=S]`` (S: Retry-After, default 1), ``stall``
=================  ==============================================================================

``demo`` answers deterministically (seeded from a hash of the conversation, tools and settings):
thinking first (with a signature), then Markdown with a heading, a list, a table and a code block.
An offered tool that the last user message names (its name, or a word of it split on ``_``, like
"weather" for ``get_weather``) is called, with arguments from its JSON schema streamed in several
fragments; several capitalised words or several tools give parallel calls. After tool results it
quotes them. "draw"/"picture"/"image of" gives a PNG, "say"/"speak" 24 kHz 16-bit mono PCM
(``audio/L16;codec=pcm;rate=24000``) in 40 ms chunks. ``max_tokens`` caps the answer (thinking is
not counted): text is cut, a tool call that does not fit is dropped, finish reason ``length``.
A token is one streamed fragment; usage: prompt tokens from the input, thoughts = thinking
fragments, response = every other fragment, cached 0.

Endpoints
---------

==========================  ================  ===========================================================
endpoint                    mmsp client type  carries
==========================  ================  ===========================================================
``POST /v1/stream``         ``mmsp``          thinking (+ ``fidelity.signature``), text, tool calls, PNG
                                              image, PCM audio, embeddings; ``: keep-alive`` comments
``POST /v1/chat/completions``  ``openai-chat``  thinking (``reasoning_details``, encrypted block), text,
                                              tool calls; no media (caption text only); ``: heartbeat``
``POST /v1/responses``      ``openai-responses``  reasoning summary (+ ``encrypted_content``), text, function
                                              calls; no media; ``: heartbeat``
``POST /v1/messages``       ``ant-messages``  thinking (+ ``signature_delta``), text, tool_use; no media;
                                              ``event: ping``; the client takes the root URL
``POST /v1/embeddings``     ``openai-embedding``  ``demo-embed`` vectors (float or base64)
``GET /v1/models``          all               ``demo``, ``demo-embed``; ``/v1/models/{id}`` 404 if unknown
``GET /v1/_demo/transcripts/{id}``  -         the raw bytes sent for a request (``x-demo-request-id``)
==========================  ================  ===========================================================

An unknown model is a 404 ``NotFoundError`` on ``/v1/stream`` (as an MMSP server answers) and an
in-stream ``model_not_found`` error on the three vendor protocols (as a gateway reports it).
On the Responses protocol a tool call finishes ``stop``: the protocol has no tool-call status and
mmsp maps ``completed`` to ``stop``.

Faults and what each mmsp client raises
---------------------------------------

===========  ===========================  ===========================  ===========================  ===========================
fault        ``mmsp``                     ``openai-chat``              ``openai-responses``         ``ant-messages``
===========  ===========================  ===========================  ===========================  ===========================
cut-text     ``httpx.RemoteProtocolError``  ``openai.APIConnectionError``  ``openai.APIConnectionError``  ``httpx2.RemoteProtocolError``
cut-args     ``httpx.RemoteProtocolError``  ``openai.APIConnectionError``  ``openai.APIConnectionError``  ``httpx2.RemoteProtocolError``
error        ``mmsp.UpstreamError``       ``openai.APIError``          ``mmsp.IncompleteStreamError``  ``anthropic.APIStatusError``
nostop       ``mmsp.IncompleteStreamError``  ``mmsp.IncompleteStreamError``  ``mmsp.IncompleteStreamError``  ``mmsp.IncompleteStreamError``
bad-args     ``mmsp.UpstreamError``       ``mmsp.ToolCallArgumentParseError``  ``mmsp.ToolCallArgumentParseError``  ``mmsp.ToolCallArgumentParseError``
401          ``mmsp.UpstreamError`` (401)  ``openai.AuthenticationError``  ``openai.AuthenticationError``  ``anthropic.AuthenticationError``
429          ``mmsp.UpstreamError`` (429)  ``openai.RateLimitError``    ``openai.RateLimitError``    ``anthropic.RateLimitError``
stall        waits until aborted (``mmsp.abort_signal.AbortSignal``) or the server stops
silence      heartbeats only for S seconds, then the normal answer
===========  ===========================  ===========================  ===========================  ===========================

``cut-*`` close the connection mid-body after some text (after half the first call's argument
fragments for ``cut-args``, which calls the first offered tool, or the pseudo tool
``demo_lookup`` when none is offered; so does ``bad-args``). ``error`` sends the protocol's
in-stream error after a little content: MMSP's ``{"error": {...}}`` then ``[DONE]``, Chat's
``{"error": {"code": "model_not_found", ...}}`` then ``[DONE]``, Responses' ``event: error`` then
``response.failed`` then ``[DONE]`` (which mmsp's Responses client does not read, so the stream
ends without its stop), Messages' ``event: error``. ``nostop`` ends cleanly without the finish
and usage (Chat and Responses still send ``[DONE]``). On the MMSP wire ``bad-args`` is the error
object an MMSP server sends when its upstream's arguments do not parse (``type``
``ToolCallArgumentParseError``), which the mmsp client raises as ``UpstreamError``.
``401``/``429`` answer before the stream in the protocol's error shape, with
``x-should-retry: false`` so the SDKs do not retry (and ``Retry-After`` for 429).

Replay and transcripts
----------------------

``DemoServer(replay=PATH)`` / ``--replay FILE`` serves a captured SSE transcript verbatim (paced
one frame per token unless instant) to every request on its protocol's endpoint, whatever the
model; the protocol is recognised from the content or named with ``replay_protocol``. Every
request is recorded in ``srv.transcripts`` (id, endpoint, protocol, model, body without any key,
raw response bytes, per-chunk send times in ms); ``srv.save_transcript(id, path)`` writes a
replayable file. No header (Authorization, x-api-key) is ever stored.
"""

from __future__ import annotations

from ._scenario import DEMO_MODELS, FAULTS, XSS_PAYLOADS, ModelSpec, parse_model
from ._media import PCM_MIME_TYPE
from ._server import DemoServer, Transcript

__all__ = [
    "DEMO_MODELS",
    "FAULTS",
    "PCM_MIME_TYPE",
    "XSS_PAYLOADS",
    "DemoServer",
    "ModelSpec",
    "Transcript",
    "parse_model",
]
