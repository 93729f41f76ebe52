"""The transactional outbox (SPEC §6, issue 15): write a message in the
caller's own transaction, so that it exists if and only if the business write
committed; a relay (``store.outbox_relay``) delivers it afterwards.

``publish`` refuses to run outside ``transaction.atomic()``: an outbox row in
autocommit mode would commit on its own, before or without the business write,
which is exactly what the outbox exists to prevent. The reads, redrive and
purge below are what the REST API, the admin and the commands call.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Min, QuerySet

from groupqueues.models import new_message_ids
from principals.models import Group
from queueproject import clock
from store.exceptions import InvalidOutboxInput, OutboxMessageNotFound, OutboxNotInTransaction
from store.models import (
    OUTBOX_KEY_MAX,
    OUTBOX_MAX_ATTEMPTS_MAX,
    OutboxMessage,
    OutboxState,
)
from store.outbox_conf import outbox_settings
from store.outbox_targets import Target, adapter_for, target_parse

MAX_REDRIVE_IDS = 500


def publish(
    target: Target | str,
    payload: Any,
    *,
    key: str | None = None,
    max_attempts: int | None = None,
    delay_seconds: float | None = None,
    using: str = "default",
) -> OutboxMessage:
    """Write one outbox row for ``target`` (a ``store.outbox_targets`` Target or
    its text form, e.g. ``"queue:shop/emails"``) in the caller's transaction on
    ``using``; the relay delivers it once that transaction has committed.

    ``key``: the publisher's de-duplication key, unique per group while the row
    is kept: publishing the same key again answers the existing row and writes
    nothing (a signal that fires twice publishes once). ``max_attempts``
    defaults to OUTBOX_MAX_ATTEMPTS; ``delay_seconds`` holds the first attempt
    back. Must be called inside ``transaction.atomic()`` (raises
    OutboxNotInTransaction otherwise). Raises InvalidOutboxInput (the field),
    CollectionNotFound for a queue that the group's chain does not declare."""
    if not transaction.get_connection(using).in_atomic_block:
        raise OutboxNotInTransaction()
    resolved = _target(target)
    adapter_for(resolved.kind).validate(resolved)
    now = clock.now()
    row = OutboxMessage(
        id=new_message_ids(1)[0], group=resolved.group, target_kind=resolved.kind,
        target_name=resolved.name, app=resolved.app, payload=_checked_payload(payload),
        key=_checked_key(key), max_attempts=_checked_attempts(max_attempts),
        deliver_after=now + timedelta(seconds=_checked_delay(delay_seconds)), created_at=now,
    )  # fmt: skip
    if row.key is None:
        row.save(force_insert=True, using=using)
        return row
    return _insert_keyed(row, using)


def _insert_keyed(row: OutboxMessage, using: str) -> OutboxMessage:
    """Insert under a savepoint: a repeated key leaves the caller's
    transaction usable and answers the row already there."""
    try:
        with transaction.atomic(using=using):
            row.save(force_insert=True, using=using)
    except IntegrityError:
        existing = OutboxMessage.objects.using(using).filter(group=row.group, key=row.key).first()
        if existing is None:
            raise
        return existing
    return row


def _target(target: Any) -> Target:
    if isinstance(target, str):
        return target_parse(target)
    if not isinstance(target, Target):
        raise InvalidOutboxInput.field("target", "Give a Target or 'kind:group/name'.")
    return target


def _checked_payload(payload: Any) -> Any:
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidOutboxInput.field("payload", f"Not JSON: {exc}") from None
    limit = outbox_settings().max_payload_bytes
    if len(text.encode()) > limit:
        raise InvalidOutboxInput.field("payload", f"Larger than {limit} bytes as JSON.")
    return payload


def _checked_key(key: Any) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= OUTBOX_KEY_MAX or "\x00" in key:
        raise InvalidOutboxInput.field("key", f"Give a string of 1-{OUTBOX_KEY_MAX} characters.")
    return key


def _checked_attempts(max_attempts: Any) -> int:
    if max_attempts is None:
        return outbox_settings().max_attempts
    if type(max_attempts) is not int or not 1 <= max_attempts <= OUTBOX_MAX_ATTEMPTS_MAX:
        raise InvalidOutboxInput.field("max_attempts", f"Give 1-{OUTBOX_MAX_ATTEMPTS_MAX}.")
    return max_attempts


def _checked_delay(delay: Any) -> float:
    if delay is None:
        return 0.0
    if type(delay) not in (int, float) or not 0 <= delay <= 365 * 86400:
        raise InvalidOutboxInput.field("delay_seconds", "Give 0 to 31536000 seconds.")
    return float(delay)


# --- reads --------------------------------------------------------------------


def outbox_of(*, group: Group, state: str | None = None) -> QuerySet[OutboxMessage]:
    """The group's outbox rows (optionally of one state), oldest first."""
    rows = OutboxMessage.objects.filter(group=group).select_related("group", "app")
    if state is not None:
        if state not in OutboxState.values:
            raise InvalidOutboxInput.field("state", f"Use one of {', '.join(OutboxState.values)}.")
        rows = rows.filter(state=state)
    return rows.order_by("created_at", "id")


def outbox_get(*, group: Group, id: uuid.UUID | str) -> OutboxMessage:
    """One outbox row of the group (raises OutboxMessageNotFound)."""
    try:
        return outbox_of(group=group).get(id=id)
    except (OutboxMessage.DoesNotExist, ValueError, TypeError):
        raise OutboxMessageNotFound(f"No outbox message {id!s}.") from None


@dataclass(frozen=True)
class OutboxStats:
    pending: int
    in_flight: int
    done: int
    dead: int
    oldest_pending_age_seconds: float | None


def outbox_stats(*, group: Group) -> OutboxStats:
    """Rows per state, and the age of the oldest row still to deliver."""
    rows = OutboxMessage.objects.filter(group=group)
    counts = dict(rows.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    live = rows.filter(state__in=[OutboxState.PENDING, OutboxState.CLAIMED])
    oldest = live.aggregate(m=Min("created_at"))["m"]
    age = None if oldest is None else max(0.0, (clock.now() - oldest).total_seconds())
    return OutboxStats(
        pending=counts.get(OutboxState.PENDING, 0), in_flight=counts.get(OutboxState.CLAIMED, 0),
        done=counts.get(OutboxState.DONE, 0), dead=counts.get(OutboxState.DEAD, 0),
        oldest_pending_age_seconds=age,
    )  # fmt: skip


# --- writes of operators --------------------------------------------------------


def outbox_redrive(*, group: Group, ids: Sequence[uuid.UUID] | None = None,
                   all: bool = False) -> int:  # fmt: skip
    """Make dead rows of the group pending again, due now, with a fresh attempt
    count: the ``ids`` given (at most 500; ids that are not dead are skipped),
    or every dead row with ``all``. Answers how many came back."""
    if all == (ids is not None):
        raise InvalidOutboxInput.field("ids", "Give ids or all, not both or neither.")
    if ids is not None and not 1 <= len(ids) <= MAX_REDRIVE_IDS:
        raise InvalidOutboxInput.field("ids", f"Give 1 to {MAX_REDRIVE_IDS} ids.")
    dead = OutboxMessage.objects.filter(group=group, state=OutboxState.DEAD)
    if ids is not None:
        dead = dead.filter(id__in=list(ids))
    with transaction.atomic():
        return dead.update(state=OutboxState.PENDING, attempt=0, deliver_after=clock.now(),
                           dead_at=None)  # fmt: skip


def outbox_purge(*, group: Group, include_dead: bool = False) -> int:
    """Delete the group's delivered rows (and its dead ones with
    ``include_dead``); rows still to deliver are never purged."""
    states = [OutboxState.DONE, OutboxState.DEAD] if include_dead else [OutboxState.DONE]
    with transaction.atomic():
        deleted, _ = OutboxMessage.objects.filter(group=group, state__in=states).delete()
    return deleted


def outbox_prune_done(*, now: datetime | None = None, limit: int = 1000) -> int:
    """Delete up to ``limit`` rows delivered longer than OUTBOX_DONE_RETENTION
    ago (the relay calls it now and then); answers how many."""
    cutoff = (now or clock.now()) - timedelta(seconds=outbox_settings().done_retention)
    old = OutboxMessage.objects.filter(state=OutboxState.DONE, done_at__lt=cutoff)
    ids = list(old.order_by("done_at").values_list("id", flat=True)[:limit])
    if not ids:
        return 0
    with transaction.atomic():
        deleted, _ = OutboxMessage.objects.filter(id__in=ids, state=OutboxState.DONE).delete()
    return deleted
