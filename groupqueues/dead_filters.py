"""The one spelling of "which dead messages": a ``DeadFilter`` (reasons, a
died-at window, a substring of the last error, a limit), built and checked by
``dead_filter``. The commands (``queue_dead``, ``queue_redrive``), the REST
redrive and purge (their ``filter`` object), the admin's dead-message page and
the services (``messages_redrive(where=…)``, ``messages_purge_dead``) all take
this object, so a filter selects the same messages wherever it is given.

Matching messages are taken most recent death first (the order of the dead
list), so ``limit`` picks the same messages a list with that limit shows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from groupqueues import validation as check
from groupqueues.exceptions import InvalidQueueInput
from groupqueues.models import DeadReason, MessageQuerySet

DEAD_FILTER_LIMIT_MAX = 10_000
ERROR_CONTAINS_MAX = 200
DEAD_ORDER = ("-died_at", "-seq")


@dataclass(frozen=True)
class DeadFilter:
    """Dead messages that died for one of ``reasons`` (any when empty), at or
    after ``since`` and before ``until``, whose last error contains
    ``error_contains`` (case-insensitive), at most ``limit`` of them (most
    recent death first). Build it with ``dead_filter`` (which checks it)."""

    reasons: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    error_contains: str | None = None
    limit: int | None = None

    @property
    def is_empty(self) -> bool:
        """Whether it selects every dead message."""
        return self == DeadFilter()

    def condition(self) -> Q:
        """The row condition (everything but the limit)."""
        q = Q()
        if self.reasons:
            q &= Q(dead_reason__in=self.reasons)
        if self.since is not None:
            q &= Q(died_at__gte=self.since)
        if self.until is not None:
            q &= Q(died_at__lt=self.until)
        if self.error_contains:
            q &= Q(last_error__icontains=self.error_contains)
        return q

    def apply(self, dead: MessageQuerySet) -> MessageQuerySet:
        """``dead`` (a QuerySet of dead messages) narrowed to the matches, most
        recent death first, limited."""
        matching = dead.filter(self.condition()).order_by(*DEAD_ORDER)
        return matching[: self.limit] if self.limit is not None else matching

    def as_dict(self) -> dict[str, Any]:
        """The filter as the REST body spells it (unset fields left out)."""
        body: dict[str, Any] = {
            "reason": list(self.reasons) or None,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "error_contains": self.error_contains,
            "limit": self.limit,
        }
        return {k: v for k, v in body.items() if v is not None}


def dead_filter(
    *,
    reason: Iterable[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    error_contains: str | None = None,
    limit: int | None = None,
) -> DeadFilter:
    """A checked ``DeadFilter``. Raises InvalidQueueInput naming the field:
    an unknown reason, a naive time, ``until`` not after ``since``, an empty or
    over-long ``error_contains``, a limit outside 1…10,000."""
    reasons = tuple(dict.fromkeys(reason or ()))
    for r in reasons:
        if r not in DeadReason.values:
            raise InvalidQueueInput.field(
                "reason", f"{r!r} is not one of {', '.join(DeadReason.values)}."
            )
    if since is not None:
        check.check_datetime(since, "since")
    if until is not None:
        check.check_datetime(until, "until")
        if since is not None and until <= since:
            raise InvalidQueueInput.field("until", "Must be after since.")
    if error_contains is not None:
        check.check_text(error_contains, "error_contains", low=1, high=ERROR_CONTAINS_MAX)
    if limit is not None:
        check.check_int(limit, "limit", low=1, high=DEAD_FILTER_LIMIT_MAX)
    return DeadFilter(reasons, since, until, error_contains, limit)


_AGO = re.compile(r"^(\d+)\s*([smhdw])$")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_moment(text: str, *, field: str, now: datetime) -> datetime:
    """A point in time as an operator types it: an ISO 8601 date-time with a
    time zone (``2026-12-01T09:00:00Z``), a date (midnight UTC), or an age
    (``90s``, ``15m``, ``2h``, ``3d``, ``1w``: that long before ``now``).
    Raises InvalidQueueInput naming ``field``."""
    text = text.strip()
    ago = _AGO.match(text)
    if ago:
        return now - timedelta(**{_UNIT[ago.group(2)]: int(ago.group(1))})
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidQueueInput.field(
            field, f"{text!r} is not a time: give ISO 8601 with a zone, a date, or an age like 2h."
        ) from None
    if moment.tzinfo is None:
        if len(text) == 10:  # a bare date
            return moment.replace(tzinfo=now.tzinfo)
        raise InvalidQueueInput.field(field, "Give a time zone, e.g. 2030-01-01T00:00:00Z.")
    return moment
