"""A turn in flight: the turn, the abort signal that stops it, and how its watchers are woken."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mmsp.abort_signal import AbortSignal

from .turn import Turn

__all__ = ["TurnRun"]


class TurnRun:
    """A turn in flight: the turn, its abort signal, and an event set on every change.

    The engine calls :meth:`notify` after each change it made under the turn's lock; a thread that
    repaints waits on :attr:`changed`, an event loop that repaints registers a waker
    (:meth:`add_waker`), called from whichever thread notified when ``changed`` goes from clear to
    set. ``listeners`` get every UniEvent as it is fed (on the worker loop).
    """

    def __init__(self, turn: Turn) -> None:
        self.turn = turn
        self.signal = AbortSignal()
        self.changed = threading.Event()
        self.finished = threading.Event()
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.listener_errors: set[int] = set()  # listeners already reported as raising (see the engine)
        self._wakers: list[Callable[[], None]] = []

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

    def abort(self, reason: str = "cancelled by the user") -> None:
        self.signal.abort(reason)
