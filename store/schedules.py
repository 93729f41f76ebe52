"""Writes of the schedules (SPEC §6): create, upsert, change, pause, resume,
run now, delete, and the firing of due boundaries that the one ticking leader
(``store.schedule_tick``) calls.

Exactly one message per boundary: a boundary's message carries the
idempotency key ``schedule:<id>:<boundary>``, and the cursor (``next_at``,
``last_fired_at``) moves in the transaction that enqueues it, by one UPDATE
fenced on the cursor's old value. Two tickers (a leader that lost its lease
without knowing it, a manual ``schedule_tick``) serialise on that row: the
second finds the cursor moved, updates nothing and enqueues nothing; a ticker
killed mid-transaction leaves the cursor where it was for the next one.

The target collection is a name resolved at each fire from the schedule's
group the way an enqueue by an app of that group resolves it: the group
itself, then the nearest ancestor declaring a queue of that name.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from groupqueues import services as queues
from groupqueues import validation as check
from groupqueues.exceptions import CollectionNotFound, GroupQueueError
from groupqueues.models import COLLECTION_NAME_VALIDATOR
from groupqueues.services.types import EnqueueResult
from principals.models import Group
from queueproject import clock
from queueproject.conf import product_settings
from store.exceptions import InvalidSchedule, ScheduleExists, ScheduleNotFound
from store.models import CATCH_UP_MAX, Schedule
from store.schedule_expressions import Expression, expression_parse

logger = logging.getLogger("store.schedules")

# Fields a caller may set (the API's body, QUEUE_SCHEDULES entries, the command;
# ``expression`` is what they call ``schedule``).
FIELDS = ("collection", "expression", "timezone", "payload", "priority", "max_attempts",
          "expires_in_seconds", "catch_up", "paused")  # fmt: skip
FIRE_BATCH = 100  # schedules fired per tick at most; the rest come next tick


# ------------------------------------------------------------------ reads


def schedule_get(*, group: Group, name: str) -> Schedule:
    """The schedule ``name`` of ``group``. Raises ScheduleNotFound."""
    found = Schedule.objects.filter(group=group, name=name).select_related("group").first()
    if found is None:
        raise ScheduleNotFound(f"Group {group.slug!r} has no schedule {name!r}.")
    return found


def schedules_of(*, group: Group) -> list[Schedule]:
    """The schedules of a group, by name."""
    return list(Schedule.objects.filter(group=group).select_related("group").order_by("name"))


def schedule_expression(schedule: Schedule) -> Expression:
    """The schedule's parsed expression (raises InvalidSchedule)."""
    return expression_parse(text=schedule.expression, timezone=schedule.timezone)


def schedule_upcoming(*, schedule: Schedule, n: int = 5) -> list[datetime]:
    """The next ``n`` boundaries from now (for the admin and the list command)."""
    return schedule_expression(schedule).upcoming(clock.now(), n)


# ------------------------------------------------------------------ writes


def schedule_create(
    *, group: Group, name: str, declared_in_code: bool = False, **fields: Any
) -> Schedule:
    """Create the schedule ``name`` (``fields`` as FIELDS; ``collection`` and
    ``expression`` required). Its first boundary is the first after now.
    Raises InvalidSchedule / InvalidQueueInput (400, with the field; also
    ``collection`` when no queue of that name is in the group's chain),
    ScheduleExists (409)."""
    _check_name(name)
    for required in ("collection", "expression"):
        if fields.get(required) is None:
            field = "schedule" if required == "expression" else required  # the API's name
            raise InvalidSchedule.field(field, "This field is required.")
    schedule = Schedule(group=group, name=name, declared_in_code=declared_in_code)
    _assign(schedule, fields)
    schedule.next_at = schedule_expression(schedule).next_after(clock.now())
    try:
        with transaction.atomic():
            schedule.save()
    except IntegrityError:
        raise ScheduleExists(f"Group {group.slug!r} already has a schedule {name!r}.") from None
    return schedule


def schedule_update(*, schedule: Schedule, **fields: Any) -> Schedule:
    """Change fields (as FIELDS). A new expression or time zone restarts the
    cursor at the first boundary after now; pausing/resuming as the services
    below. Raises as ``schedule_create``."""
    timing = (schedule.expression, schedule.timezone)
    was_paused = schedule.paused
    _assign(schedule, fields)
    changed = {*fields, "declared_in_code", "updated_at"}
    if (schedule.expression, schedule.timezone) != timing or (was_paused and not schedule.paused):
        schedule.next_at = schedule_expression(schedule).next_after(clock.now())
        changed.add("next_at")
    # Only these columns: the cursor a ticker moves meanwhile must not be
    # written back with the value read here (a boundary would fire again).
    schedule.save(update_fields=sorted(changed))
    return schedule


def schedule_upsert(*, group: Group, name: str, declared_in_code: bool = False,
                    **fields: Any) -> tuple[Schedule, bool]:  # fmt: skip
    """Create the schedule or update it in place (by group and name); answers
    it and whether it was created. Raises as ``schedule_create``."""
    existing = Schedule.objects.filter(group=group, name=name).select_related("group").first()
    if existing is None:
        created = schedule_create(group=group, name=name, declared_in_code=declared_in_code,
                                  **fields)  # fmt: skip
        return created, True
    existing.declared_in_code = declared_in_code
    return schedule_update(schedule=existing, **fields), False


def schedule_pause(*, schedule: Schedule) -> Schedule:
    """Stop firing. Boundaries that pass while paused are not caught up."""
    return schedule_update(schedule=schedule, paused=True)


def schedule_resume(*, schedule: Schedule) -> Schedule:
    """Fire again from the first boundary after now."""
    return schedule_update(schedule=schedule, paused=False)


def schedule_delete(*, schedule: Schedule) -> None:
    """Delete the schedule (messages it enqueued stay)."""
    schedule.delete()


def schedule_run_now(*, schedule: Schedule) -> EnqueueResult:
    """Enqueue one message now, outside the boundaries: the cursor does not
    move and the next boundary still fires. Raises CollectionNotFound and the
    enqueue's errors."""
    return _enqueue(schedule, idempotency_key=None)


# ------------------------------------------------------------------ firing


def schedules_fire_due(*, now: datetime | None = None) -> int:
    """Fire every due, unpaused schedule (up to FIRE_BATCH, oldest boundary
    first); answers the number of messages enqueued. The caller should be the
    one leader, but a second caller does no harm (see the module docstring)."""
    now = now or clock.now()
    fired = 0
    due = Schedule.objects.due(now).select_related("group").order_by("next_at")[:FIRE_BATCH]
    for schedule in due:
        try:
            fired += schedule_fire(schedule=schedule, now=now)
        except InvalidSchedule as exc:  # stored before a rule tightened, or a zone removed
            logger.error("schedule %s cannot fire: %s", schedule, exc)
            Schedule.objects.filter(pk=schedule.pk).update(next_at=None, last_error=str(exc))
    return fired


def schedule_fire(*, schedule: Schedule, now: datetime) -> int:
    """Fire the due boundaries of ``schedule`` (as read, with its cursor): the
    most recent ``catch_up`` boundaries in [next_at, now], oldest first, and
    move the cursor past ``now`` — all in one transaction, fenced on the cursor
    read. Answers the messages enqueued (0 when another ticker moved it
    first). An enqueue refused (queue gone, full) skips that boundary and is
    kept in ``last_error``."""
    if schedule.paused or schedule.next_at is None or schedule.next_at > now:
        return 0
    expression = schedule_expression(schedule)
    boundaries = _due_boundaries(expression, since=schedule.next_at, now=now,
                                 limit=schedule.catch_up)  # fmt: skip
    with transaction.atomic():
        moved = Schedule.objects.filter(pk=schedule.pk, paused=False, next_at=schedule.next_at)
        if not moved.update(next_at=expression.next_after(now),
                            last_fired_at=boundaries[-1] if boundaries else schedule.last_fired_at,
                            last_error=""):  # fmt: skip
            return 0
        errors = [e for e in (_fire_one(schedule, b) for b in boundaries) if e]
        if errors:
            Schedule.objects.filter(pk=schedule.pk).update(last_error=errors[-1])
    return len(boundaries) - len(errors)


def boundary_key(schedule: Schedule, boundary: datetime) -> str:
    """The idempotency key of a boundary's message."""
    return f"schedule:{schedule.pk}:{boundary.isoformat()}"


def _due_boundaries(expression: Expression, *, since: datetime, now: datetime,
                    limit: int) -> list[datetime]:  # fmt: skip
    """The last ``limit`` boundaries in [since, now], oldest first (walked back
    from now, so a long downtime costs ``limit`` steps, not one per miss)."""
    found: list[datetime] = []
    boundary = expression.prev_at_or_before(now)
    while boundary >= since and len(found) < limit:
        found.append(boundary)
        boundary = expression.prev_at_or_before(boundary - timedelta(microseconds=1))
    return found[::-1]


def _fire_one(schedule: Schedule, boundary: datetime) -> str:
    """Enqueue the boundary's message in a savepoint; the error text if refused."""
    try:
        with transaction.atomic():
            _enqueue(schedule, idempotency_key=boundary_key(schedule, boundary))
    except GroupQueueError as exc:
        logger.warning("schedule %s: boundary %s not enqueued: %s", schedule, boundary, exc)
        return f"{boundary.isoformat()}: {exc}"
    return ""


def _enqueue(schedule: Schedule, *, idempotency_key: str | None) -> EnqueueResult:
    collection = queues.collection_resolve_from(group=schedule.group, name=schedule.collection)
    return queues.message_enqueue(
        collection=collection, payload=schedule.payload, priority=schedule.priority,
        max_attempts=schedule.max_attempts, expires_in_seconds=schedule.expires_in_seconds,
        enqueued_by=f"schedule:{schedule}", idempotency_key=idempotency_key,
    )  # fmt: skip


# ------------------------------------------------------------------ validation


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not re.match(COLLECTION_NAME_VALIDATOR.regex, name):
        raise InvalidSchedule.field("name", str(COLLECTION_NAME_VALIDATOR.message))


def _assign(schedule: Schedule, fields: dict[str, Any]) -> None:
    """Validate ``fields`` and set them on ``schedule`` (not saved)."""
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise InvalidSchedule.field(sorted(unknown)[0], "Unknown field.")
    for name, value in fields.items():
        setattr(schedule, name, _checked(name, value))
    schedule_expression(schedule)  # the pair (expression, time zone) parses
    try:
        queues.collection_resolve_from(group=schedule.group, name=schedule.collection)
    except CollectionNotFound as exc:
        raise InvalidSchedule.field("collection", exc.message) from None


def _checked(name: str, value: Any) -> Any:
    """One field's value, validated (raises InvalidSchedule/InvalidQueueInput)."""
    if name == "collection":
        if not isinstance(value, str) or not re.match(COLLECTION_NAME_VALIDATOR.regex, value):
            raise InvalidSchedule.field(name, str(COLLECTION_NAME_VALIDATOR.message))
    elif name in ("expression", "timezone"):
        if not isinstance(value, str) or not 1 <= len(value) <= 200:
            field = "schedule" if name == "expression" else name  # the API's name
            raise InvalidSchedule.field(field, "Must be a string of 1 to 200 characters.")
        value = " ".join(value.split())
    elif name == "payload":
        check.payload_json(value, max_depth=product_settings().json_max_depth)
    elif name == "priority":
        check.check_int(value, name, low=check.PRIORITY_MIN, high=check.PRIORITY_MAX)
    elif name == "max_attempts" and value is not None:
        check.check_int(value, name, low=1, high=check.MAX_ATTEMPTS_MAX)
    elif name == "expires_in_seconds" and value is not None:
        value = check.check_seconds(value, name)
    elif name == "catch_up":
        check.check_int(value, name, low=1, high=CATCH_UP_MAX)
    elif name == "paused" and not isinstance(value, bool):
        raise InvalidSchedule.field(name, "Must be a boolean.")
    return value
