"""Per-principal request throttling: fixed windows, counted in memory per
process and shared through the database in batches.

A request costs no database write. Each process counts a principal's requests
of the current window in memory; once its uncounted share reaches a tenth of
the rate (:data:`SHARE_EVERY`), the request that reaches it adds the share to
the window's row (one atomic upsert that returns the total of every process)
and the process learns what the others counted. At the default 6000/min that
is one write per 600 requests of a principal per process; at rates below 20
per window every admitted request is shared at once (refused ones never are).

What it guarantees (over the rate: 429 ``throttled`` with ``Retry-After``):

- a principal is never refused below its rate;
- in one process (any number of threads) it is refused exactly above it;
- across P processes (uvicorn ``--workers``, hosts) each may admit up to a
  tenth of the rate the others have not yet seen: at most about
  rate * (1 + P/10) requests per window. The counts a process had not shared
  when it exits are lost (the window forgets them anyway).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from rest_framework.throttling import BaseThrottle

from principals import sql
from queueproject import rawsql

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
SHARE_EVERY = 0.1  # of the rate: what a process may count before it shares its count
PRUNE_SECONDS = 300.0  # how often a process forgets windows that ended long ago


def parse_rate(rate: str | None) -> tuple[int | None, int | None]:
    """``"100/min"`` -> (100, 60); None -> (None, None) (throttling off)."""
    if not rate:
        return None, None
    num, period = rate.split("/")
    return int(num), _PERIODS[period.strip()[0]]


@dataclass
class _Window:
    """One principal's count in one window, as this process knows it."""

    start: int
    shared: int = 0  # the total of every process, as the last upsert returned it
    sharing: int = 0  # sent in an upsert that has not returned yet
    pending: int = 0  # admitted here, not sent yet

    @property
    def known(self) -> int:
        return self.shared + self.sharing + self.pending


class _Counts:
    """This process's windows (one per principal and rate), behind one lock:
    the check-and-count is exact among threads; the upsert runs outside it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.windows: dict[tuple[str, int, int], _Window] = {}
        self.pruned_at = time.time()

    def admit(self, slot: tuple[str, int, int], start: int, limit: int) -> tuple[bool, int]:
        """Count one request if the window has room: (admitted, how many to
        share now; 0 for none)."""
        batch = max(1, int(limit * SHARE_EVERY))
        with self.lock:
            window = self.windows.get(slot)
            if window is None or window.start != start:
                window = self.windows[slot] = _Window(start)
            if window.known >= limit:
                return False, 0
            window.pending += 1
            if window.pending < batch:
                return True, 0
            share, window.pending = window.pending, 0
            window.sharing += share
            return True, share

    def shared(self, slot: tuple[str, int, int], start: int, sent: int, total: int | None) -> None:
        """An upsert of ``sent`` returned the window's ``total`` (None: it
        failed, and ``sent`` waits for the next one)."""
        with self.lock:
            window = self.windows.get(slot)
            if window is None or window.start != start:
                return
            window.sharing -= sent
            if total is None:
                window.pending += sent
            else:
                window.shared = max(window.shared, total)

    def forget_ended(self, now: float) -> bool:
        """Drop windows that have ended; True at most once per PRUNE_SECONDS
        (then the caller prunes the database rows too)."""
        with self.lock:
            if now - self.pruned_at < PRUNE_SECONDS:
                return False
            self.pruned_at = now
            self.windows = {slot: w for slot, w in self.windows.items() if w.start + slot[2] > now}
            return True


_counts = _Counts()


def reset() -> None:
    """Forget this process's counts (tests: their database rows roll back)."""
    global _counts
    _counts = _Counts()


class PrincipalRateThrottle(BaseThrottle):
    scope = "principal"

    def __init__(self) -> None:
        from rest_framework.settings import api_settings

        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        # The stubs type these rates as numbers; DRF's are strings such as "100/min".
        self.num_requests, self.duration = parse_rate(rate)  # type: ignore[arg-type]
        self._wait: float | None = None

    @staticmethod
    def key_for(request: Any) -> str | None:
        auth = getattr(request, "auth", None)
        if auth is not None and getattr(auth, "pk", None) is not None:
            return f"token:{auth.pk}"
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and user.pk is not None:
            return f"user:{user.pk}"
        return None  # anonymous requests are refused by authentication anyway

    def allow_request(self, request: Any, view: Any) -> bool:
        if not self.num_requests or not self.duration:
            return True
        key = self.key_for(request)
        if key is None:
            return True
        now = time.time()
        start = int(now // self.duration) * self.duration
        slot = (key, self.num_requests, self.duration)
        counts = _counts
        admitted, share = counts.admit(slot, start, self.num_requests)
        if share:
            total = None
            try:
                params = {"key": key, "window_start": start, "n": share}
                (total,) = rawsql.fetch_one(sql.RATE_COUNTER_ADD, params)
            finally:
                counts.shared(slot, start, share, total)
            if counts.forget_ended(now):
                rawsql.execute(sql.RATE_COUNTER_PRUNE, {"before": start - 2 * self.duration})
        if not admitted:
            self._wait = start + self.duration - now
        return admitted

    def wait(self) -> float | None:
        return self._wait
