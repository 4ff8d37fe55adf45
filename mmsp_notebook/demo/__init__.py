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
``demo-embed`` (embeddings). ``parse_model(name)`` reads one; ``DEMO_MODELS`` describes the bases.

| option | effect |
|---|---|
| `instant` | no pacing at all (the server's `instant=True` does this for every model) |
| `tps=N` | N fragments per second (paces even on an instant server) |
| `delay=S` | first-token delay in seconds (paces even on an instant server) |
| `tokens=N` | answer with a Markdown text of N tokens (benchmarks; at most 1,000,000) |
| `rows=N` | answer with a Markdown table of N rows (benchmarks; at most 100,000) |
| `nothink` | no thinking (so does `thinking_level` "none" / Messages `thinking: disabled` / Responses effort "none") |
| `xss` | script payloads in thinking, text and tool arguments; with tools offered, the call names the first offered tool whose name contains markup, else the first offered tool |
| `dim=N` | embedding dimensions (`embedding_config.dimensions` wins; default 64, at most 65,536) |
| `silence[=S]` | S seconds (default 3) of heartbeats only, then the normal answer (kept in instant mode); a heartbeat every second, or at the server's `heartbeat` interval when shorter |
| fault | one of `cut-text`, `cut-args`, `error`, `nostop`, `bad-args`, `401`, `429[=S]` (S: Retry-After, default 1), `stall` |

Each option is given once (``demo+tps=200+tps=10`` is refused), with one fault; ``tokens`` and
``rows``, and ``instant`` with ``tps`` or ``delay``, undo each other and are refused together.

``demo`` answers deterministically (seeded from a hash of the conversation, tools and settings, so
every protocol gets the same text and usage): thinking first, with a signature-like fidelity, then
Markdown with a heading, a list, a table and a code block that mention the prompt. An offered tool
that the last user message names (its name, or a word of it split on ``_``, like "weather" for
``get_weather``) is called, with arguments built from its JSON schema and streamed in several
fragments (a string takes a capitalised word of the prompt, like "Paris"); several capitalised
words or several tools give parallel calls, finish reason ``tool_call``. After tool results it
quotes them. "draw" / "picture" / "image of" gives a PNG and a caption, "say" / "speak" 24 kHz
16-bit mono PCM (``audio/L16;codec=pcm;rate=24000``) in 40 ms chunks and a transcript.
A last user message holding a fenced Python block and a Python traceback (``Traceback (most recent
call last):``, or a line like ``ZeroDivisionError: division by zero``), as the notebook's "fix this
cell" request sends, gets one ```python block with that cell's code inside ``try``/``except`` for
the exception the traceback names (``Exception`` for one that is not a builtin), printing a note,
then one sentence; one that asks what the error means or why (``explain``, ``why``, ``mean`` before
the cell, as ``%mmsp explain`` does) gets one sentence naming the exception and Python's own
description of it. ``demo-embed`` embeds each user message after the model's last answer: the new
input of a conversation, every input of a request that holds only inputs.
``max_tokens`` caps the answer (thinking is not counted): text is cut, a tool call that does not
fit is dropped, finish reason ``length``. A token is one streamed fragment (a word with its
leading space, an argument piece, an audio chunk, an image); usage: prompt tokens from the input,
thoughts = thinking fragments, response = every other fragment, cached 0, in each protocol's own
usage shape so that mmsp maps them back into the same four numbers.

Endpoints
---------

| endpoint | mmsp client type | carries |
|---|---|---|
| `POST /v1/stream` | `mmsp` | thinking (+ `fidelity.signature`), text, tool calls, PNG image, PCM audio, embeddings; `: keep-alive` comments |
| `POST /v1/chat/completions` | `openai-chat` | thinking (`delta.reasoning_details[]`, then a `reasoning.encrypted` block), text, tool calls; no media (caption / transcript text only); `: heartbeat` |
| `POST /v1/responses` | `openai-responses` | reasoning summary (+ `encrypted_content`), text, function calls; no media; `: heartbeat` |
| `POST /v1/messages` | `ant-messages` (takes the root URL, without `/v1`) | thinking (+ `signature_delta`), text, tool_use; no media; `event: ping` |
| `POST /v1/embeddings` | `openai-embedding` | `demo-embed` vectors (float or base64) |
| `GET /v1/models` | all | `demo`, `demo-embed`; `GET /v1/models/{id}` is a 404 `NotFoundError` for an unknown model |
| `GET /v1/_demo/transcripts[/{id}]` | - | the records kept / the raw bytes sent for one request |

A Chat Completions or Responses request without ``"stream": true`` (``false``, or no ``stream``
key) and a Messages request without ``"stream": true`` get the protocol's non-streaming JSON body,
as the official SDKs' ``create()`` without ``stream=True`` and curl expect: a ``chat.completion``
(``choices[0].message`` with ``content``, ``tool_calls`` and ``reasoning_details``,
``finish_reason``, ``usage``), a ``response`` (``output`` items, ``status``, ``usage``) or a
``message`` (``thinking``/``text``/``tool_use`` blocks, ``stop_reason``, ``usage``). The body is
folded from the frames the same request with ``"stream": true`` gets (paced alike), so its text,
calls and usage are the stream's (``_whole``). Faults: ``401``/``429`` keep their status and error
body; ``error`` is an HTTP 404 with the in-stream error object; ``nostop`` is a 502 in the
protocol's error shape (``server_error`` / ``api_error``, ``demo_fault`` set), and so is
``bad-args`` on Messages, whose ``tool_use.input`` must be an object (Chat and Responses carry the
arguments string as streamed); ``cut-text``/``cut-args`` close the connection half way through
the JSON body; ``stall`` answers nothing until the client goes away; ``silence`` delays the body.
``POST /v1/stream`` always streams; a replay answers a request without ``"stream": true`` with
its transcript folded the same way (see Replay and transcripts).
Such a JSON answer is recorded, but ``save_transcript`` refuses it: it is not a stream.

A request body over ``max_body`` bytes (32 MiB by default, ``--max-body-mb``) is refused with HTTP
413 in the protocol's error shape (MMSP's ``InvalidRequestError``, OpenAI's ``request_too_large``
code, Anthropic's ``request_too_large`` type), and is not kept: it is read no further than four
times the limit and dropped as it arrives. A request record keeps the JSON (without keys) of a body
up to 1 MiB, only the size and model of a larger one. Reading and planning a request larger than
64 KiB runs in a worker thread, so that the server's other streams go on meanwhile.

Every response carries an ``x-demo-request-id`` header. An unknown model or model option is refused
with HTTP 404 before anything streams, in the protocol's error shape (``NotFoundError``,
``model_not_found``, ``not_found_error``), as an MMSP server and the providers' APIs refuse it; so
is ``demo-embed`` on the three vendor protocols. On the Responses protocol a tool call finishes
``stop``: the protocol has no tool-call status and mmsp maps ``completed`` to ``stop``.

``POST /v1/stream`` traces as a real MMSP server does: a request whose ``config.trace_id`` is set
is saved with mmsp's own ``Tracer`` into the server's ``MMSP_CACHE_DIR`` when its stream stops (the
request's messages, then the answer), so a plain mmsp program with ``client_type="mmsp"`` gets its
trace; a trace id that is not a relative path inside that directory is a 400. A notebook that
saves the trace of its mmsp-wire turns itself and hands the demo server it embeds the trace id too
rewrites the same file after the server's save, with the same history and config.

Faults and what each mmsp client raises
---------------------------------------

| fault | `mmsp` | `openai-chat` | `openai-responses` | `ant-messages` |
|---|---|---|---|---|
| `cut-text` | `httpx.RemoteProtocolError` | `openai.APIConnectionError` | `openai.APIConnectionError` | `httpx2.RemoteProtocolError` |
| `cut-args` | `httpx.RemoteProtocolError` | `openai.APIConnectionError` | `openai.APIConnectionError` | `httpx2.RemoteProtocolError` |
| `error` | `mmsp.UpstreamError` | `openai.APIError` | `mmsp.IncompleteStreamError` | `anthropic.APIStatusError` (status 200) |
| `nostop` | `mmsp.IncompleteStreamError` | `mmsp.IncompleteStreamError` | `mmsp.IncompleteStreamError` | `mmsp.IncompleteStreamError` |
| `bad-args` | `mmsp.UpstreamError` (`error_type` `ToolCallArgumentParseError`) | `mmsp.ToolCallArgumentParseError` | `mmsp.ToolCallArgumentParseError` | `mmsp.ToolCallArgumentParseError` |
| `401` | `mmsp.UpstreamError` (status 401) | `openai.AuthenticationError` | `openai.AuthenticationError` | `anthropic.AuthenticationError` |
| `429` | `mmsp.UpstreamError` (status 429) | `openai.RateLimitError` | `openai.RateLimitError` | `anthropic.RateLimitError` |
| `stall` | waits until aborted with `mmsp.abort_signal.AbortSignal` (`asyncio.CancelledError`) or the server stops | same | same | same |
| `silence` | no error: heartbeats only for S seconds, then the normal answer | same | same | same |

Every fault's error says it is one (``Injected fault +error of demo+error: ...``), and its error
object carries ``"demo_fault": "<fault>"`` next to the protocol's usual fields, so that a client
can tell an injected refusal from a real one (the demo checks no key at all).

``cut-text`` closes the connection mid-body a third of the way into the text; ``cut-args`` half
way through the first call's arguments. ``cut-args`` and ``bad-args`` call the first offered tool
(the pseudo tool ``demo_lookup`` when none is offered). ``error`` sends the protocol's in-stream
error a few text fragments in (before the first call of a tool-call answer): MMSP's
``{"error": {...}}`` then ``[DONE]``, Chat's ``{"error": {"code": "model_not_found", ...}}`` then
``[DONE]`` (the code a gateway sends when the model behind it goes away), Responses' ``event: error``, ``event: response.failed``, ``[DONE]`` (which mmsp's
Responses client does not read, so its stream ends without a stop), Messages' ``event: error``.
``nostop`` ends cleanly without the finish reason and usage (Chat and Responses still send
``[DONE]``). On the MMSP wire ``bad-args`` is the error object an MMSP server sends when its
upstream's arguments do not parse. ``401`` / ``429`` answer before the stream in the protocol's
error shape with ``x-should-retry: false`` (so the SDKs do not retry behind the caller) and, for
429, ``Retry-After``. ``stall`` sends its first fragment, then
only heartbeats (one each ``heartbeat`` interval, as for any silence) until the client goes away. A client that goes
away mid-stream ends the stream at once (its record's outcome is ``client_gone``).

Replay and transcripts
----------------------

``DemoServer(replay=PATH)`` / ``--replay FILE`` serves a captured SSE transcript verbatim (paced
one frame per token unless instant; a byte order mark at its start, an editor's, is dropped, and a
file re-saved as UTF-16 is served as the UTF-8 it was) to
every streamed request on its protocol's endpoint, whatever the model; the other endpoints keep serving
the live demo. A Chat Completions, Responses or Messages request without ``"stream": true`` gets
the protocol's JSON body folded from the transcript's frames, as the demo's own answers are
(``_whole``): its text, reasoning, tool calls and usage are the transcript's. An in-stream error in
the transcript is the same HTTP error as the ``error`` fault's (404 for ``model_not_found`` /
``not_found_error``, 500 for any other; a Responses ``response.failed`` alone too), and a transcript
that ends before its protocol's end (no finish reason and usage, no ``response.completed``, no
``message_stop``) or holds a frame that is not one of its events (cut mid-frame) is a 502 in the
protocol's error shape whose message names the file: a cut-short capture is never a success.
A file with no ``data:`` line (JSON, say) is refused: it is not a captured stream.
The protocol is recognised from the content (``event: message_start``: Messages, ``event: response.``: Responses, ``chat.completion.chunk``:
Chat, ``"event_type"``: MMSP) or named with ``replay_protocol`` / ``--replay-protocol``. Every
request is recorded in ``srv.transcripts`` (request id, endpoint, protocol, model, body without any
key, raw response bytes, per-chunk send times in ms); ``srv.save_transcript(id, path)`` writes a
replayable file. No header (Authorization, x-api-key) is ever stored.
"""

from __future__ import annotations

from ..wire.proxy import WireProxy, WireTranscript  # the recording proxy, offered here next to the server
from ._media import PCM_MIME_TYPE
from ._scenario import DEMO_MODELS, FAULTS, XSS_PAYLOADS, ModelSpec, parse_model
from ._server import DemoServer, Transcript

__all__ = [
    "DEMO_MODELS",
    "FAULTS",
    "PCM_MIME_TYPE",
    "XSS_PAYLOADS",
    "DemoServer",
    "ModelSpec",
    "Transcript",
    "WireProxy",
    "WireTranscript",
    "parse_model",
]
