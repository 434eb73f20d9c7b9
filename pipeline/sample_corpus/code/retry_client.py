"""A small HTTP client wrapper with jittered exponential backoff and a retry budget.

Follows the platform's retries design note: only transient errors are retried,
every call has an overall deadline, and a per-destination budget caps retries
at 10% of first attempts (with a floor of ten per minute).
"""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass, field

TRANSIENT_STATUS = frozenset({429, 502, 503, 504})


class PermanentError(Exception):
    """The request failed in a way that retrying cannot fix."""


class DeadlineExceeded(Exception):
    """The call ran out of time before it could succeed."""


@dataclass
class RetryBudget:
    """Sliding one-minute window of first attempts and retries."""

    ratio: float = 0.1
    floor: int = 10
    window_s: float = 60.0
    _firsts: deque[float] = field(default_factory=deque)
    _retries: deque[float] = field(default_factory=deque)

    def _trim(self, now: float) -> None:
        for q in (self._firsts, self._retries):
            while q and now - q[0] > self.window_s:
                q.popleft()

    def record_first(self, now: float) -> None:
        self._trim(now)
        self._firsts.append(now)

    def try_spend(self, now: float) -> bool:
        self._trim(now)
        if len(self._retries) < max(self.floor, self.ratio * len(self._firsts)):
            self._retries.append(now)
            return True
        return False


def backoff(attempt: int, base: float = 0.2, cap: float = 20.0) -> float:
    """Full-jitter backoff: uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0.0, min(cap, base * (2**attempt)))


def call_with_retries(send, *, deadline_s: float, budget: RetryBudget, max_attempts: int = 5):
    """Call ``send(timeout)`` until it succeeds, fails permanently, or time runs out.

    ``send`` returns ``(status, body)``. Returns ``body`` on a 2xx status.
    """
    start = time.monotonic()
    budget.record_first(start)
    last_status = None
    for attempt in range(max_attempts):
        remaining = deadline_s - (time.monotonic() - start)
        if remaining <= 0:
            break
        status, body = send(timeout=remaining)
        if 200 <= status < 300:
            return body
        if status not in TRANSIENT_STATUS:
            raise PermanentError(f"status {status}")
        last_status = status
        if attempt == max_attempts - 1:
            break
        pause = backoff(attempt)
        now = time.monotonic()
        if now - start + pause >= deadline_s or not budget.try_spend(now):
            break
        time.sleep(pause)
    raise DeadlineExceeded(f"gave up after {attempt + 1} attempts, last status {last_status}")


if __name__ == "__main__":
    outcomes = iter([(503, None), (503, None), (200, b"ok")])
    print(call_with_retries(lambda timeout: next(outcomes), deadline_s=5.0, budget=RetryBudget()))
