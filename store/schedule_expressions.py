"""Schedule expressions: when a schedule's boundaries fall (SPEC §6).

- cron, parsed by croniter: 5 fields (minute hour day month weekday), or 6
  with a leading seconds field (as Quartz and robfig/cron write it), or one of
  ``@hourly @daily @weekly @monthly @yearly`` (also ``@midnight @annually``).
  Boundaries are wall-clock times in the schedule's IANA time zone: croniter
  walks naive local times (plain calendar arithmetic, no DST surprises) and
  each is then placed on the UTC line. A local time that does not exist (the
  spring-forward gap) is no boundary; one that happens twice (the autumn
  overlap) is a boundary once, at its first occurrence. So a transition never
  skips nor doubles a boundary that exists in local time.
- ``@every <duration>`` (``30s``, ``5m``, ``1h30m``, ``1d``): elapsed time, so
  the time zone does not matter; boundaries are the multiples of the duration
  since the Unix epoch (``@every 1h`` fires on the hour, whatever the start).

All times in and out are aware datetimes; answers are in UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterError, croniter  # type: ignore[import-untyped]

from store.exceptions import InvalidSchedule

ALIASES = frozenset({"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@midnight",
                     "@annually"})  # fmt: skip
_EVERY = re.compile(r"@every\s+((?:\d+[dhms])+)")
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}
EVERY_MIN, EVERY_MAX = 1, 366 * 86400  # seconds
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Local candidates skipped in a row before giving up: only gaps and overlaps
# are skipped, so a real expression never needs more than a few hundred.
_MAX_SKIPS = 10_000


def zone_of(name: str) -> ZoneInfo:
    """The IANA zone ``name``. Raises InvalidSchedule (field ``timezone``)."""
    if name not in _zones():
        raise InvalidSchedule.field("timezone", f"Unknown IANA time zone {name!r}.")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule.field("timezone", f"Unknown IANA time zone {name!r}.") from None


_ZONES: frozenset[str] = frozenset()


def _zones() -> frozenset[str]:
    global _ZONES
    if not _ZONES:
        _ZONES = frozenset(available_timezones()) | {"UTC"}
    return _ZONES


@dataclass(frozen=True)
class Expression:
    """A parsed expression: ``every`` seconds, or a cron ``cron`` in ``zone``."""

    text: str
    zone: ZoneInfo
    every: int | None = None
    cron: str | None = None

    def next_after(self, t: datetime) -> datetime:
        """The first boundary strictly after ``t``."""
        if self.every is not None:
            steps = int((t - EPOCH).total_seconds() // self.every) + 1
            return EPOCH + timedelta(seconds=steps * self.every)
        return self._walk(t, forward=True)

    def prev_at_or_before(self, t: datetime) -> datetime:
        """The last boundary at or before ``t``."""
        if self.every is not None:
            steps = int((t - EPOCH).total_seconds() // self.every)
            return EPOCH + timedelta(seconds=steps * self.every)
        return self._walk(t + timedelta(microseconds=1), forward=False)

    def upcoming(self, t: datetime, n: int) -> list[datetime]:
        """The next ``n`` boundaries after ``t``."""
        out: list[datetime] = []
        for _ in range(n):
            t = self.next_after(t)
            out.append(t)
        return out

    def _walk(self, t: datetime, *, forward: bool) -> datetime:
        """Next (or previous, strictly before ``t``) cron boundary in real time."""
        local = t.astimezone(self.zone).replace(tzinfo=None)
        it = croniter(self.cron, local, second_at_beginning=self._seconds_first())
        for _ in range(_MAX_SKIPS):
            try:
                naive = it.get_next(datetime) if forward else it.get_prev(datetime)
            except CroniterError:  # e.g. "0 0 30 2 *": no such day
                break
            placed = _place(naive, self.zone)
            if placed is not None and (placed > t if forward else placed < t):
                return placed
        raise InvalidSchedule.field("schedule", "The expression has no boundary in reach.")

    def _seconds_first(self) -> bool:
        return self.cron is not None and len(self.cron.split()) == 6


def _place(naive: datetime, zone: ZoneInfo) -> datetime | None:
    """The UTC instant of local time ``naive``: None if it does not exist (a
    gap), its first occurrence if it happens twice (fold=0)."""
    aware = naive.replace(tzinfo=zone, fold=0)
    utc = aware.astimezone(UTC)
    if utc.astimezone(zone).replace(tzinfo=None) != naive:
        return None  # the wall clock jumped over it
    return utc


def expression_parse(*, text: str, timezone: str = "UTC") -> Expression:
    """Parse ``text`` for ``timezone``. Raises InvalidSchedule with field
    ``schedule`` or ``timezone``."""
    zone = zone_of(timezone)
    if not text.strip():
        raise InvalidSchedule.field("schedule", "Give a cron expression or '@every <duration>'.")
    text = " ".join(text.split())
    if text.startswith("@every"):
        return Expression(text, zone, every=_every_seconds(text))
    if text.startswith("@") and text not in ALIASES:
        raise InvalidSchedule.field("schedule", f"Unknown alias {text!r}.")
    if not text.startswith("@") and len(text.split()) not in (5, 6):
        raise InvalidSchedule.field("schedule", "A cron expression has 5 or 6 fields.")
    expression = Expression(text, zone, cron=text)
    try:
        croniter(text, datetime(2000, 1, 1), second_at_beginning=expression._seconds_first())
    except (CroniterError, ValueError, KeyError) as exc:
        raise InvalidSchedule.field("schedule", f"Not a valid cron expression: {exc}") from None
    expression.next_after(datetime.now(UTC))  # an expression that never fires is refused
    return expression


def _every_seconds(text: str) -> int:
    match = _EVERY.fullmatch(text)
    if match is None:
        raise InvalidSchedule.field(
            "schedule", "Write '@every' with a duration like 30s, 5m, 1h30m."
        )
    seconds = sum(int(n) * _UNIT[u] for n, u in re.findall(r"(\d+)([dhms])", match.group(1)))
    if not EVERY_MIN <= seconds <= EVERY_MAX:
        raise InvalidSchedule.field("schedule", f"The interval is {EVERY_MIN}s to 366d.")
    return seconds
