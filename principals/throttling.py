"""Per-principal request throttling, counted in the database.

A fixed window per token (or user) counted with an atomic upsert, so the count
is right under concurrent requests from any number of processes. Over the rate:
429 ``throttled`` with ``Retry-After``.
"""

from __future__ import annotations

import random
import time
from typing import Any

from rest_framework.throttling import BaseThrottle

from principals import sql
from queueproject import rawsql

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str | None) -> tuple[int | None, int | None]:
    """``"100/min"`` -> (100, 60); None -> (None, None) (throttling off)."""
    if not rate:
        return None, None
    num, period = rate.split("/")
    return int(num), _PERIODS[period.strip()[0]]


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
        window = int(now // self.duration) * self.duration
        (count,) = rawsql.fetch_one(sql.RATE_COUNTER_HIT, {"key": key, "window_start": window})
        if random.random() < 0.001:  # prune now and then, not on every request
            rawsql.execute(sql.RATE_COUNTER_PRUNE, {"before": window - 2 * self.duration})
        if count > self.num_requests:
            self._wait = window + self.duration - now
            return False
        return True

    def wait(self) -> float | None:
        return self._wait
