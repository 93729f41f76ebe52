"""The project's one backoff formula: exponential, capped, with "equal jitter".

Used by group-queue nacks (a message's next delivery), the session
dispatcher (a failed delivery's retry) and the run loops' reconnects
(``queueproject.runner.Resilient``). Callers pass their own base and cap; the
shape of the curve is written only here.
"""

from __future__ import annotations

import random

# An attempt number past this is treated as this (2**63 s is past any cap).
MAX_EXPONENT = 63


def backoff_delay(attempt: int, *, base: float, cap: float, jitter: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1 = the first retry):
    ``min(cap, base * 2**(attempt - 1))`` times a jitter factor in [0.5, 1]
    ("equal jitter": at least half the delay, so retries spread out but never
    come early). ``jitter`` fixes the factor (tests); None draws one."""
    factor = random.uniform(0.5, 1.0) if jitter is None else jitter
    exponent = min(max(attempt, 1) - 1, MAX_EXPONENT)
    return min(cap, base * 2.0**exponent) * factor
