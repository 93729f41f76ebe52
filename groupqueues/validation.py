"""Input checks shared by the group queue services (ranges of SPEC §4).

Each check raises ``InvalidQueueInput`` naming the field (and the batch index
when given), so the API can answer 400 with the field in ``details``.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from groupqueues.exceptions import InvalidQueueInput
from queueproject.parsers import JSONRejected, check_json_value

PRIORITY_MIN, PRIORITY_MAX = -1000, 1000
VISIBILITY_TIMEOUT_MIN, VISIBILITY_TIMEOUT_MAX = 1, 43200
WORKER_ID_MAX = 128
MAX_ATTEMPTS_MAX = 1000
# Delays and expiries beyond ten years are refused (they would overflow dates).
DURATION_MAX = 10 * 365 * 24 * 3600
IDEMPOTENCY_KEY_MAX = 200
ERROR_TEXT_MAX = 10_000


def check_int(
    value: Any, field: str, *, low: int, high: int | None = None, index: int | None = None
) -> int:
    """``value`` as an int within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidQueueInput.field(field, "Must be an integer.", index=index)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidQueueInput.field(field, f"Must be {bound}.", index=index)
    return value


def check_seconds(value: Any, field: str, *, index: int | None = None) -> float:
    """A duration in seconds: a number within [0, DURATION_MAX]."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidQueueInput.field(field, "Must be a number of seconds.", index=index)
    if value < 0 or value > DURATION_MAX:
        raise InvalidQueueInput.field(
            field, f"Must be between 0 and {DURATION_MAX} seconds.", index=index
        )
    return float(value)


def check_datetime(value: Any, field: str, *, index: int | None = None) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidQueueInput.field(field, "Must be an aware date-time.", index=index)
    return value


def check_text(value: Any, field: str, *, low: int, high: int, index: int | None = None) -> str:
    if not isinstance(value, str) or not low <= len(value) <= high:
        raise InvalidQueueInput.field(
            field, f"Must be a string of {low} to {high} characters.", index=index
        )
    if "\x00" in value:
        raise InvalidQueueInput.field(field, "Must not contain NUL.", index=index)
    return value


def check_worker_id(value: Any) -> str:
    return check_text(value, "worker_id", low=1, high=WORKER_ID_MAX)


def check_error_text(value: Any) -> str | None:
    """An error message for last_error (None allowed; long text is truncated)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidQueueInput.field("error", "Must be a string.")
    return value.replace("\x00", "")[:ERROR_TEXT_MAX]


def check_uuid(value: Any, field: str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise InvalidQueueInput.field(field, "Must be a UUID.") from exc


def payload_json(payload: Any, *, max_depth: int, index: int | None = None) -> str:
    """The payload's compact JSON serialisation (its UTF-8 size is what the
    collection's max_payload_bytes limits). Raises InvalidQueueInput when it is
    not storable JSON."""
    try:
        check_json_value(payload, max_depth)
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (JSONRejected, TypeError, ValueError, RecursionError) as exc:
        raise InvalidQueueInput.field("payload", f"Not storable JSON: {exc}", index=index) from exc
    return text
