"""A turn in flight: the turn, the abort signal that stops it, and how its watchers are woken."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mmsp.abort_signal import AbortSignal

from .turn import Turn

__all__ = ["TurnRun", "Watched", "Stall"]


@dataclass(frozen=True)
class Stall:
    """The worker event loop blocked: running one piece of code for ``seconds``, since ``since``
    (its last turn, ``time.monotonic()``).

    ``culprit`` names what blocks it when known ("the async tool 'get_weather'"), ``tool`` the
    tool, ``where`` the code running ("nb.py:7 in get_weather").
    """

    seconds: float
    since: float
    culprit: str | None = None
    tool: str | None = None
    where: str | None = None

    @property
    def who(self) -> str:
        """What blocks the loop, in words."""
        who = self.culprit or "code running on it"
        return f"{who} ({self.where})" if self.where else who

    @property
    def advice(self) -> str:
        """What to do about it."""
        calls = "await non-blocking calls (asyncio.sleep, an async HTTP client, await asyncio.to_thread(f, ...))"
        if self.tool:
            return f"Make {self.tool} a plain def tool (it then runs in a thread), or {calls} in it."
        return f"Code that runs on the worker loop must {calls} instead of blocking."

    def overdue(self, limit: float | None, waited: float) -> bool:
        """Whether a turn with the idle limit ``limit`` (``None``: none) that has waited ``waited``
        seconds ends: its limit counts from the block or from the turn's start, the later."""
        return limit is not None and min(self.seconds, waited) >= limit

    def message(self) -> str:
        return (f"the worker event loop has not turned for {self.seconds:.0f} s: {self.who} is blocking it, so "
                f"every stream, chat and comparison of this kernel waits. {self.advice}")


class Watched:
    """Something that changes while watchers repaint it: an event set on every change, and wakers.

    A thread that repaints waits on :attr:`changed`; an event loop that repaints registers a waker
    (:meth:`add_waker`), called from whichever thread notified when ``changed`` goes from clear to set.
    """

    def __init__(self) -> None:
        self.changed = threading.Event()
        self._wakers: list[Callable[[], None]] = []
        #: set by the front door that waited for it when an interrupt (■, Ctrl-C) stopped the wait
        self.interrupted = False

    def notify(self) -> None:
        if not self.changed.is_set():
            self.changed.set()
            for wake in list(self._wakers):
                wake()

    def add_waker(self, wake: Callable[[], None]) -> None:
        self._wakers.append(wake)

    def remove_waker(self, wake: Callable[[], None]) -> None:
        if wake in self._wakers:
            self._wakers.remove(wake)


class TurnRun(Watched):
    """A turn in flight: the turn, its abort signal, and an event set on every change.

    The engine calls :meth:`notify` after each change it made under the turn's lock; a thread that
    repaints waits on :attr:`changed`, an event loop that repaints registers a waker
    (:meth:`add_waker`), called from whichever thread notified when ``changed`` goes from clear to
    set. ``listeners`` get every UniEvent as it is fed (on the worker loop).

    Waiting for data
        While a step's request is open, :attr:`waiting_since` is the ``time.monotonic()`` of the
        last sign of life from the server (the request sent, then every byte or event received),
        and ``None`` otherwise (before the first request, while a tool runs, once the turn ended);
        :attr:`retrying_after` is the HTTP status (429, 5xx…) a provider SDK answered with and is
        retrying after. :attr:`idle_timeout` is the turn's limit in seconds (``None``: no limit): a
        step whose server stays silent that long ends with "no data for N s". All three are kept on
        the turn, so its views say "waiting for the first token… 12 s" from the turn alone.
    """

    def __init__(self, turn: Turn, idle_timeout: float | None = None) -> None:
        super().__init__()
        self.turn = turn
        self.signal = AbortSignal()
        self.finished = threading.Event()
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.listener_errors: set[int] = set()  # listeners already reported as raising (see the engine)
        turn.idle_timeout = idle_timeout
        turn.waiting_since = None
        turn.retrying_after = None
        self.pulse = 0  # chunks of response bodies received (counted by the engine; bytes are signs of life)
        self.pulse_at: float | None = None  # the time.monotonic() of the last of them
        self.content_type: str | None = None  # the Content-Type of the step's last response (counted as bytes are)
        self.tail: deque[bytes] = deque()  # the last chunks of a Responses stream's body (see the engine)
        self.tail_size = 0

    @property
    def idle_timeout(self) -> float | None:
        return self.turn.idle_timeout

    @property
    def waiting_since(self) -> float | None:
        return self.turn.waiting_since

    @waiting_since.setter
    def waiting_since(self, value: float | None) -> None:
        self.turn.waiting_since = value
        if value is None:
            self.turn.retrying_after = None

    def waiting_for(self, now: float | None = None) -> float | None:
        """Seconds since the server last sent anything while a request is open; ``None`` when none is."""
        since = self.waiting_since
        if since is None:
            return None
        return max(0.0, (time.monotonic() if now is None else now) - since)

    def abort(self, reason: str = "cancelled by the user") -> None:
        self.signal.abort(reason)
