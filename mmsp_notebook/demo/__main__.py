"""``python -m mmsp_notebook.demo``: run the offline demo model server until Ctrl-C."""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from .._errors import DemoServerError
from ..wire.proxy import WireProxy, mask_query
from ..wire.sse import PROTOCOLS
from ._server import DemoServer

__all__ = ["main", "run"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mmsp_notebook.demo",
        description=(
            "Offline demo model server: MMSP's wire (/v1/stream), Chat Completions, Responses, "
            "Messages and Embeddings, with the models demo and demo-embed."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; loopback only without --allow-remote)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default 0: a free port)")
    parser.add_argument("--replay", metavar="FILE", help="serve this captured SSE transcript to every request on its protocol's endpoint "
                        "(folded into one JSON body for a request without \"stream\": true)")
    parser.add_argument("--replay-protocol", choices=PROTOCOLS, help="the transcript's protocol (recognised from its content by default)")
    parser.add_argument("--instant", action="store_true", help="stream without any pacing")
    parser.add_argument("--tokens-per-second", type=float, default=40.0, help="fragments per second (default 40)")
    parser.add_argument("--first-token-delay", type=float, default=0.4, help="seconds before the first fragment (default 0.4)")
    parser.add_argument("--heartbeat", type=float, default=15.0, metavar="SECONDS", help="heartbeat interval while silent (default 15)")
    parser.add_argument("--allow-remote", action="store_true", help="allow binding a non-loopback address")
    parser.add_argument("--proxy", metavar="UPSTREAM_URL",
                        help="instead of the demo, run a recording loopback proxy in front of this base URL "
                             "(keys are forwarded, never stored or printed)")
    parser.add_argument("--save-dir", metavar="DIR",
                        help="with --proxy: write each streamed response to DIR/<id>.sse (replayable with --replay)")
    parser.add_argument("--max-body-mb", type=float, default=32.0, metavar="MB",
                        help="refuse request bodies larger than this with HTTP 413 (default 32)")
    return parser


class _Stop:
    """Whether SIGTERM came: a flag its handler sets, polled by the main loop.

    Not a ``threading.Event``: the handler runs in the main thread between two bytecodes, possibly
    while that thread holds the lock inside the Event's own ``wait()``, and ``set()`` would then
    wait forever for it (the process ignored SIGTERM now and then)."""

    def __init__(self) -> None:
        self.requested = False
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, *_: object) -> None:
        self.requested = True

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` (a signal's handler runs meanwhile); whether to stop."""
        if not self.requested:
            time.sleep(seconds)
        return self.requested


def _max_body(megabytes: float) -> int:
    """``--max-body-mb`` in bytes.

    Raises:
        DemoServerError: It is not a positive number.
    """
    if not 0 < megabytes < math.inf:
        raise DemoServerError(f"--max-body-mb must be a positive number of megabytes, not {megabytes!r}")
    return max(1, int(megabytes * 1024 * 1024))


def _save_dir(given: str | None) -> Path | None:
    """``--save-dir``: the directory, made (with its parents) and checked to take a file, before the
    proxy starts.

    Raises:
        DemoServerError: It cannot be made or written in (a file is there, a parent is a file, no
            permission, a read-only file system...), saying why in one line.
    """
    if given is None:
        return None
    if not given.strip():
        raise DemoServerError("--save-dir takes a directory, not an empty path")
    path = Path(given)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):  # (a directory it may not write in says so now, not at the first save)
            pass
    except FileExistsError:
        raise DemoServerError(f"--save-dir {given}: a file is there, not a directory") from None
    except NotADirectoryError:
        raise DemoServerError(f"--save-dir {given}: a part of the path is a file, not a directory") from None
    except OSError as exc:
        raise DemoServerError(f"--save-dir {given}: cannot make it or write a file in it: "
                              f"{exc.strerror or type(exc).__name__}") from None
    return path


def _saved(proxy: WireProxy, record_id: str, save_dir: Path) -> str:
    """What the line of a streamed request says of its saved file: where it went, or why it was not
    saved (the directory removed or full while the proxy runs: the proxy goes on)."""
    try:
        return f"saved {proxy.save_transcript(record_id, save_dir / f'{record_id}.sse')}"
    except OSError as exc:
        return f"not saved: {exc.strerror or type(exc).__name__} ({save_dir / f'{record_id}.sse'})"


def _run_proxy(args: argparse.Namespace) -> int:
    """``--proxy``: forward to the upstream, print one line per request, save the streams if asked."""
    from urllib.parse import urlsplit

    try:
        save_dir = _save_dir(args.save_dir)
        proxy = WireProxy(args.proxy, args.host, args.port, max_body=_max_body(args.max_body_mb)).start()
    except DemoServerError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    stopped = _Stop()
    # the upstream with its path and query, as the client would have been given it (a key in the
    # query or the user info masked: the user has the URL they gave)
    query = urlsplit(proxy.upstream).query
    upstream = mask_query(proxy.upstream_display + proxy.upstream_path + (f"?{query}" if query else ""))
    base_url = mask_query(proxy.base_url)
    print(f"mmsp wire proxy listening on {base_url} -> {upstream}", flush=True)
    print(f"  hand the client {base_url} in place of {upstream}"
          + (" (with the query's values as you gave them)" if query else "") + "; Ctrl-C stops.", flush=True)
    reported: set[str] = set()
    try:
        while not stopped.wait(0.2):
            for record in proxy.transcripts:
                if record.id in reported or record.outcome == "streaming":
                    continue
                reported.add(record.id)
                line = (f"{record.id} {record.method} {record.endpoint} -> {record.status} {record.protocol} "
                        f"{len(record.response)} bytes {record.outcome}")
                if save_dir is not None and record.status == 200 and record.protocol != "embeddings":
                    line += " " + _saved(proxy, record.id, save_dir)
                print(line, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until Ctrl-C (or SIGTERM).

    Args:
        argv: The command line arguments, ``sys.argv[1:]`` when None.

    Returns:
        The exit status: 0 after a clean stop, 2 when the server cannot start.
    """
    args = _parser().parse_args(argv)
    if args.proxy:
        return _run_proxy(args)
    if args.save_dir is not None:  # (the demo server saves nothing: its records are served at /_demo/transcripts)
        print("error: --save-dir goes with --proxy UPSTREAM_URL: it saves the streams the proxy forwards",
              file=sys.stderr, flush=True)
        return 2
    try:
        server = DemoServer(
            args.host,
            args.port,
            instant=args.instant,
            tokens_per_second=args.tokens_per_second,
            first_token_delay=args.first_token_delay,
            heartbeat=args.heartbeat,
            replay=args.replay,
            replay_protocol=args.replay_protocol,
            allow_remote=args.allow_remote,
            max_body=_max_body(args.max_body_mb),
        ).start()
    except DemoServerError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2

    stopped = _Stop()
    print(f"mmsp demo server listening on {server.base_url}", flush=True)
    print(
        "  POST /v1/stream (mmsp), /v1/chat/completions, /v1/responses, /v1/messages (root URL "
        f"{server.root_url}), /v1/embeddings; GET /v1/models. Models: demo, demo-embed. Ctrl-C stops.",
        flush=True,
    )
    if args.replay:
        print(f"  replaying {args.replay} on its protocol's endpoint", flush=True)
    try:
        while not stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def run() -> None:
    """The command (``python -m mmsp_notebook.demo``, ``mmsp-demo``): :func:`main`, then the process
    ends. The servers ran in daemon threads and have been stopped: nothing a library left behind (a
    thread, an exit handler) may keep a stopped server's process alive."""
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
