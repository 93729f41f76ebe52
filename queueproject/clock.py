"""The one clock of the product: every service asks ``now()``.

Delays, leases, expiry, retention and staleness all agree on it. Tests move
time with ``frozen()`` / ``advance()`` instead of sleeping. Processes on several
hosts rely on their clocks agreeing (NTP), as leases of a few seconds or more
tolerate milliseconds of skew.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.utils import timezone

_offset = timedelta(0)
_frozen: datetime | None = None
_lock = threading.Lock()


def now() -> datetime:
    """The current time (aware, UTC), moved by any active test offset."""
    if _frozen is not None:
        return _frozen
    return timezone.now() + _offset


def advance(seconds: float) -> None:
    """Move the clock forward (tests)."""
    global _offset, _frozen
    with _lock:
        if _frozen is not None:
            _frozen += timedelta(seconds=seconds)
        else:
            _offset += timedelta(seconds=seconds)


@contextmanager
def frozen(at: datetime | None = None) -> Iterator[None]:
    """Stop the clock (at ``at`` or the current time) inside the block (tests)."""
    global _frozen, _offset
    with _lock:
        saved = (_frozen, _offset)
        _frozen = at or now()
    try:
        yield
    finally:
        with _lock:
            _frozen, _offset = saved


def reset() -> None:
    """Back to real time (tests call it between tests)."""
    global _frozen, _offset
    with _lock:
        _frozen, _offset = None, timedelta(0)
