"""THE ranges of a collection's settings (SPEC §4), written once.

The service's checks (``services.collections``), the API serializer, the admin
form and the database check constraints of ``Collection`` are all built from
``SETTING_RANGES``; ``tests/groupqueues/test_settings_ranges.py`` pins each of
them to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import CheckConstraint, F, Q

from groupqueues import validation as check

INT32_MAX = 2**31 - 1
MAX_PAYLOAD_BYTES_MAX = 64 * 1024 * 1024
RATE_LIMIT_COUNT_MAX = 1_000_000


@dataclass(frozen=True)
class SettingRange:
    """Values from ``low`` to ``high`` inclusive; ``seconds``: a (possibly
    fractional) number of seconds, else an integer; ``nullable``: None allowed
    (no limit)."""

    low: float
    high: float
    seconds: bool = False
    nullable: bool = False


SETTING_RANGES: dict[str, SettingRange] = {
    "max_payload_bytes": SettingRange(1, MAX_PAYLOAD_BYTES_MAX),
    "default_max_attempts": SettingRange(1, check.MAX_ATTEMPTS_MAX),
    "visibility_timeout": SettingRange(check.VISIBILITY_TIMEOUT_MIN, check.VISIBILITY_TIMEOUT_MAX),
    "retry_backoff_base": SettingRange(0.001, check.DURATION_MAX, seconds=True),
    "retry_backoff_max": SettingRange(0.001, check.DURATION_MAX, seconds=True),
    "dead_retention": SettingRange(0, check.DURATION_MAX),
    "max_depth": SettingRange(1, INT32_MAX, nullable=True),
    # SPEC §7 limits (None: no limit).
    "max_in_flight": SettingRange(1, INT32_MAX, nullable=True),
    "max_in_flight_per_key": SettingRange(1, INT32_MAX, nullable=True),
}

# ``rate_limit`` ("n/s", "n/min", "n/h"): the range of its n (its interval is
# one of ``models.RATE_INTERVALS``); not a plain number, so not in the table.
RATE_LIMIT_COUNT = SettingRange(1, RATE_LIMIT_COUNT_MAX, nullable=True)


def range_condition(name: str) -> Q:
    """The check-constraint condition of setting ``name``."""
    r = SETTING_RANGES[name]
    within = Q(**{f"{name}__gte": r.low}) & Q(**{f"{name}__lte": r.high})
    return Q(**{f"{name}__isnull": True}) | within if r.nullable else within


def range_constraint_name(name: str) -> str:
    return f"gq_collection_{name}_range"


def range_constraints() -> list[CheckConstraint]:
    """``Collection``'s check constraints: one per range, and the backoff's
    cap at least its base."""
    return [
        *[CheckConstraint(condition=range_condition(n), name=range_constraint_name(n))
          for n in SETTING_RANGES],
        CheckConstraint(condition=Q(retry_backoff_max__gte=F("retry_backoff_base")),
                        name="gq_collection_backoff_order"),
    ]  # fmt: skip
