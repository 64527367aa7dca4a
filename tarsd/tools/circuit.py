"""A circuit breaker per server: after ``failures_to_open`` failed calls in a row (a timeout, a
server gone mid-call, one that cannot be reached) calls are answered "unavailable" at once for
``open_seconds``, without reaching the server, so a model does not spend its turn waiting on a
server that is down; then one call is let through (half-open): its success closes the circuit,
its failure opens it again. A tool that answers with an error of its own (bad arguments, a
not-found) is a working server and counts as a success.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CircuitState:
    state: str  # closed | open | half_open
    failures: int  # in a row
    reason: str  # the last failure
    retry_at: float  # unix time the open circuit lets a call through again (0: not open)


class Circuit:
    def __init__(self, failures_to_open: int, open_seconds: float, clock=time.monotonic):
        self.failures_to_open = max(1, failures_to_open)
        self.open_seconds = open_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._reason = ""
        self._opened_at: float | None = None
        self._trial = False  # a half-open trial call is under way

    def admit(self) -> str | None:
        """None when a call may go to the server; else why not (for the model and status)."""
        with self._lock:
            if self._opened_at is None:
                return None
            left = self._opened_at + self.open_seconds - self._clock()
            if left > 0:
                return f"unavailable for {left:.0f} s more after {self._failures} failed calls in a row (last: {self._reason})"
            if self._trial:
                return f"unavailable: a trial call is under way after {self._failures} failed calls in a row (last: {self._reason})"
            self._trial = True
            return None

    def succeeded(self) -> None:
        with self._lock:
            self._failures, self._reason, self._opened_at, self._trial = 0, "", None, False

    def failed(self, reason: str) -> None:
        with self._lock:
            self._failures += 1
            self._reason = reason
            self._trial = False
            if self._failures >= self.failures_to_open:
                self._opened_at = self._clock()

    def describe(self) -> CircuitState:
        with self._lock:
            if self._opened_at is None:
                return CircuitState("closed", self._failures, self._reason, 0.0)
            left = self._opened_at + self.open_seconds - self._clock()
            state = "open" if left > 0 else "half_open"
            return CircuitState(state, self._failures, self._reason, time.time() + max(0.0, left))
