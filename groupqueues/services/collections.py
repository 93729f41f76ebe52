"""Collections: declare and change them, and the small helpers every other
section of the services asks about a collection (is it a queue, wake its
consumers, it is gone)."""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce

from groupqueues import exceptions as err
from groupqueues import validation as check
from groupqueues.models import (
    COLLECTION_NAME_VALIDATOR,
    RATE_INTERVALS,
    Collection,
    CollectionKind,
    Fairness,
    Message,
)
from groupqueues.settings_ranges import RATE_LIMIT_COUNT, SETTING_RANGES
from principals.models import Group
from queueproject import notify

_UNSET: Any = object()


def collection_require_queue(collection: Collection) -> Collection:
    """The collection, if it is a queue; else CollectionNotFound (404
    collection_not_found)."""
    if collection.kind != CollectionKind.QUEUE:
        raise err.CollectionNotFound(f"{collection.name!r} is not a queue collection.")
    return collection


def collection_wake(collection: Collection) -> None:
    """Wake long-polls and workers of the collection (at commit)."""
    notify.notify(collection.wake_channel)


def collection_gone(collection: Collection) -> err.CollectionNotFound:
    """The error for a collection deleted while a write was on its way."""
    return err.CollectionNotFound(f"The queue {collection.name!r} no longer exists.")


def _check_name(name: Any) -> str:
    """``name`` if it is a str ``COLLECTION_NAME_VALIDATOR`` accepts (callers may
    pass unchecked input, as for the settings)."""
    if not isinstance(name, str) or not re.match(COLLECTION_NAME_VALIDATOR.regex, name):
        raise err.InvalidQueueInput.field("name", str(COLLECTION_NAME_VALIDATOR.message))
    return name


def _check_setting(name: str, value: Any) -> Any:
    """One setting checked against ``SETTING_RANGES`` (``paused``: a boolean)."""
    if name == "paused":
        if not isinstance(value, bool):
            raise err.InvalidQueueInput.field(name, "Must be a boolean.")
        return value
    if name == "fairness":
        if value not in Fairness.values:
            raise err.InvalidQueueInput.field(name, f"Must be one of {Fairness.values}.")
        return value
    if name == "rate_limit":
        return parse_rate_limit(value)
    r = SETTING_RANGES[name]
    if value is None and r.nullable:
        return None
    if not r.seconds:
        return check.check_int(value, name, low=int(r.low), high=int(r.high))
    value = check.check_seconds(value, name)  # the type, and at most check.DURATION_MAX
    if not r.low <= value <= r.high:
        raise err.InvalidQueueInput.field(name, f"Must be at least {r.low} s.")
    return value


SETTINGS = (*SETTING_RANGES, "paused", "fairness", "rate_limit")
_RATE_LIMIT = re.compile(r"^\s*(\d+)\s*/\s*(" + "|".join(RATE_INTERVALS) + r")\s*$")


def parse_rate_limit(value: Any) -> tuple[int, int] | tuple[None, None]:
    """``"n/s"``, ``"n/min"`` or ``"n/h"`` as (n, interval seconds); None: no
    limit. Raises InvalidQueueInput (field ``rate_limit``)."""
    if value is None:
        return None, None
    found = _RATE_LIMIT.match(value) if isinstance(value, str) else None
    if found is None:
        raise err.InvalidQueueInput.field(
            "rate_limit", 'Write it as "n/s", "n/min" or "n/h" (e.g. "100/s"), or null.'
        )
    count = int(found.group(1))
    if not RATE_LIMIT_COUNT.low <= count <= RATE_LIMIT_COUNT.high:
        low, high = int(RATE_LIMIT_COUNT.low), int(RATE_LIMIT_COUNT.high)
        raise err.InvalidQueueInput.field("rate_limit", f"n must be from {low} to {high}.")
    return count, RATE_INTERVALS[found.group(2)]


def _check_settings(arguments: dict[str, Any]) -> dict[str, Any]:
    """The settings among a service's ``arguments`` (its ``locals()``: one
    keyword argument per setting), checked, ``_UNSET`` ones left out, as
    model fields (``rate_limit`` is two)."""
    given = {n: arguments[n] for n in SETTINGS if arguments.get(n, _UNSET) is not _UNSET}
    checked = {n: _check_setting(n, v) for n, v in given.items()}
    if "rate_limit" in checked:
        checked["rate_limit_count"], checked["rate_limit_seconds"] = checked.pop("rate_limit")
    return checked


def _check_backoff(collection: Collection) -> None:
    if collection.retry_backoff_max < collection.retry_backoff_base:
        raise err.InvalidQueueInput.field(
            "retry_backoff_max", "Must be at least retry_backoff_base."
        )


def collection_create(
    *,
    group: Group,
    name: str,
    kind: str = CollectionKind.QUEUE,
    max_payload_bytes: int = _UNSET,
    default_max_attempts: int = _UNSET,
    visibility_timeout: int = _UNSET,
    retry_backoff_base: float = _UNSET,
    retry_backoff_max: float = _UNSET,
    dead_retention: int = _UNSET,
    max_depth: int | None = _UNSET,
    paused: bool = _UNSET,
    fairness: str = _UNSET,
    max_in_flight: int | None = _UNSET,
    max_in_flight_per_key: int | None = _UNSET,
    rate_limit: str | None = _UNSET,
) -> Collection:
    """Declare a collection on ``group``; omitted settings take their defaults.
    Raises InvalidQueueInput, CollectionExists (409 already_exists)."""
    _check_name(name)
    if kind not in CollectionKind.values:
        raise err.InvalidQueueInput.field("kind", f"Must be one of {CollectionKind.values}.")
    settings = _check_settings(locals())
    collection = Collection(group=group, name=name, kind=kind, **settings)
    _check_backoff(collection)
    try:
        with transaction.atomic():
            collection.save(force_insert=True)
    except IntegrityError as exc:
        raise err.CollectionExists(
            f"Group {group.slug!r} already declares a collection {name!r}."
        ) from exc
    return collection


def collection_update(
    *,
    collection: Collection,
    max_payload_bytes: int = _UNSET,
    default_max_attempts: int = _UNSET,
    visibility_timeout: int = _UNSET,
    retry_backoff_base: float = _UNSET,
    retry_backoff_max: float = _UNSET,
    dead_retention: int = _UNSET,
    max_depth: int | None = _UNSET,
    paused: bool = _UNSET,
    fairness: str = _UNSET,
    max_in_flight: int | None = _UNSET,
    max_in_flight_per_key: int | None = _UNSET,
    rate_limit: str | None = _UNSET,
) -> Collection:
    """Change the given settings (pause/resume with ``paused``); others stay.
    Existing messages keep their own max_attempts. Changing what partitions
    the collection (``fairness``, ``max_in_flight_per_key``) rewrites the
    partition key of its live messages in the same transaction. Raises
    InvalidQueueInput."""
    settings = _check_settings(locals())
    for name, value in settings.items():
        setattr(collection, name, value)
    _check_backoff(collection)
    if settings:
        with transaction.atomic():
            repartition = "fairness" in settings or "max_in_flight_per_key" in settings
            if repartition:
                # Waits for enqueues in flight (they hold KEY SHARE) and holds
                # back new ones until commit: none is left with an old key.
                list(Collection.objects.select_for_update().filter(pk=collection.pk).values("pk"))
            Collection.objects.filter(pk=collection.pk).update(**settings)
            if repartition:
                _repartition(collection)
    return collection


def _repartition(collection: Collection) -> None:
    """Set ``fair_key`` of the collection's live messages as enqueue would now."""
    live = Message.objects.of(collection).live()
    if not collection.uses_partition_key:
        live.update(fair_key=None)
    elif collection.fairness == Fairness.ORDERING_KEY:
        live.update(fair_key=Coalesce("ordering_key", Value("")))
    else:
        live.update(fair_key=F("enqueued_by"))
