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


# The payload serialisation (json.dumps would build this encoder on every call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_SCALARS = frozenset({str, int, float, bool, type(None)})


def payload_json(payload: Any, *, max_depth: int, index: int | None = None) -> str:
    """The payload's compact JSON serialisation (its UTF-8 size is what the
    collection's max_payload_bytes limits). Raises InvalidQueueInput when it is
    not storable JSON.

    Fast path for the common payload, a scalar or a flat object with string
    keys: serialise, then look at the text. The encoder refuses non-finite
    numbers; a NUL shows as ``\\u0000`` and an unpaired surrogate fails UTF-8
    encoding. Anything else or doubtful goes through the full walk, which
    raises the precise error."""
    if not _flat(payload):
        return _payload_json_checked(payload, max_depth=max_depth, index=index)
    try:
        text = _ENCODER.encode(payload)
    except ValueError:
        return _payload_json_checked(payload, max_depth=max_depth, index=index)
    if "\\u0000" in text or (max_depth < 1 and type(payload) is dict):
        return _payload_json_checked(payload, max_depth=max_depth, index=index)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return _payload_json_checked(payload, max_depth=max_depth, index=index)
    return text


def dumps(value: Any) -> str:
    """The compact JSON text of a value already checked by ``payload_json``."""
    return _ENCODER.encode(value)


def payloads_json(payloads: list[Any], *, max_depth: int, max_bytes: int) -> str | None:
    """The payloads of a batch as ONE JSON array text, serialised in one call,
    when every payload takes the fast path of ``payload_json`` and the whole
    array fits in ``max_bytes`` (so each payload does). None when any payload
    needs the one-by-one check (which raises the precise error)."""
    if max_depth < 1 or not all(map(_flat, payloads)):
        return None
    try:
        text = _ENCODER.encode(payloads)
    except ValueError:
        return None
    if "\\u0000" in text:
        return None
    size = len(text)
    if not text.isascii():
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            return None
    return text if size <= max_bytes else None


def _flat(payload: Any) -> bool:
    """A scalar, or a dict of string keys to scalars (exact types only)."""
    if type(payload) is not dict:
        return type(payload) in _SCALARS
    for key, value in payload.items():
        if type(key) is not str or type(value) not in _SCALARS:
            return False
    return True


def _payload_json_checked(payload: Any, *, max_depth: int, index: int | None) -> str:
    """``payload_json`` the thorough way: walk the value, then serialise."""
    try:
        check_json_value(payload, max_depth)
        text = _ENCODER.encode(payload)
    except (JSONRejected, TypeError, ValueError, RecursionError) as exc:
        raise InvalidQueueInput.field("payload", f"Not storable JSON: {exc}", index=index) from exc
    return text
