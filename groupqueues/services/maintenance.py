"""Maintenance sweeps and bulk operations: reclaim lapsed leases, expire and
prune, drop exhausted, redrive the dead, purge. Each is one fenced UPDATE or
DELETE (prune: in chunks), so an ack, nack or extend that landed first wins."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F

from groupqueues import exceptions as err
from groupqueues import validation as check
from groupqueues.dead_filters import DeadFilter
from groupqueues.models import Collection, DeadReason, Message, MessageQuerySet, MessageState
from groupqueues.services.claim_floor import claim_floor_lower_lapsed
from groupqueues.services.collections import collection_require_queue, collection_wake
from groupqueues.services.types import SweepResult
from queueproject import clock

PRUNE_CHUNK = 5000


def _scope(collection: Collection | None) -> MessageQuerySet:
    return Message.objects.of(collection) if collection is not None else Message.objects.all()


def messages_reclaim_expired(*, collection: Collection | None = None) -> int:
    """Claimed messages whose lease lapsed become ready again (or dead
    ``exhausted`` when out of attempts), in one UPDATE fenced by state and lease,
    so an ack or extend that landed first wins; wakes the collection's
    consumers. ``collection=None``: every collection with lapsed leases, one
    transaction each. Returns how many changed."""
    now = clock.now()
    if collection is None:
        lapsed = Message.objects.lease_lapsed(now).values_list("collection_id", flat=True)
        collections = Collection.objects.filter(pk__in=set(lapsed))
        return sum(messages_reclaim_expired(collection=c) for c in collections)
    with transaction.atomic():
        claim_floor_lower_lapsed(collection, now)  # they go back in their old place
        count = Message.objects.of(collection).lease_lapsed(now).retry_or_die(now=now)
        if count:
            collection_wake(collection)
    return count


def messages_sweep_expired(*, collection: Collection | None = None) -> SweepResult:
    """Live messages past ``expires_at`` become dead ``expired`` (one UPDATE);
    then dead messages past their collection's ``dead_retention`` are deleted
    (``messages_prune_dead``). All collections when ``collection`` is None."""
    now = clock.now()
    live = _scope(collection).live().filter(expires_at__lte=now)
    expired = live.kill(reason=DeadReason.EXPIRED, now=now)
    return SweepResult(expired, messages_prune_dead(collection=collection))


def messages_prune_dead(*, collection: Collection | None = None) -> int:
    """Delete dead messages that died more than ``dead_retention`` ago, in
    chunks of 5,000 rows (one short DELETE each). Returns how many."""
    now = clock.now()
    collections = [collection] if collection is not None else Collection.objects.queues()
    return sum(_prune(c, now - timedelta(seconds=c.dead_retention)) for c in collections)


def _prune(collection: Collection, died_before: datetime) -> int:
    old = Message.objects.of(collection).dead().filter(died_at__lte=died_before)
    total = 0
    while True:
        chunk = list(old.values_list("seq", flat=True)[:PRUNE_CHUNK])
        if not chunk:
            break
        deleted, _ = Message.objects.filter(seq__in=chunk, state=MessageState.DEAD).delete()
        total += deleted
        if len(chunk) < PRUNE_CHUNK:
            break
    return total


def messages_drop_exhausted(*, collection: Collection | None = None) -> int:
    """Ready messages with attempt ≥ max_attempts become dead ``exhausted``
    (one UPDATE). Returns how many."""
    ready = _scope(collection).ready().filter(attempt__gte=F("max_attempts"))
    return ready.kill(reason=DeadReason.EXHAUSTED, now=clock.now())


def messages_redrive(
    *,
    collection: Collection,
    ids: Sequence[uuid.UUID | str] | None = None,
    all: bool = False,
    where: DeadFilter | None = None,
) -> int:
    """Dead messages (the given ``ids``, every one with ``all=True``, or those
    ``where`` selects) become ready at once with attempt 0; last_error is kept.
    Exactly one of the three. One UPDATE fenced by the dead state; wakes
    consumers. Returns how many."""
    if sum((ids is not None, bool(all), where is not None)) != 1:
        raise err.InvalidQueueInput.field("ids", "Give ids, all=True or a filter (one of them).")
    dead = Message.objects.of(collection).dead()
    if ids is not None:
        dead = dead.filter(id__in=[check.check_uuid(i, "ids") for i in ids])
    elif where is not None:
        dead = _matching(dead, where)
    with transaction.atomic():
        count = dead.update(
            state=MessageState.READY, attempt=0, deliver_after=clock.now(), dead_reason=None,
            died_at=None,
        )  # fmt: skip
        if count:
            collection_wake(collection)
    return count


def messages_purge_dead(*, collection: Collection, where: DeadFilter) -> int:
    """Delete the dead messages ``where`` selects (an empty filter: every dead
    message); live ones are never touched. One DELETE. Returns how many."""
    dead = Message.objects.of(collection_require_queue(collection)).dead()
    deleted, _ = _matching(dead, where).delete()
    return deleted


def _matching(dead: MessageQuerySet, where: DeadFilter) -> MessageQuerySet:
    """The dead rows ``where`` selects, as a QuerySet that can be updated or
    deleted: with a limit, the chosen rows by ``seq`` (a sliced QuerySet cannot
    be), still fenced by the dead state."""
    if where.limit is None:
        return dead.filter(where.condition())
    chosen = where.apply(dead).values("seq")
    return Message.objects.dead().filter(seq__in=chosen)


def collection_purge(*, collection: Collection, include_dead: bool = False) -> int:
    """Delete every ready message of the collection (and the dead ones with
    ``include_dead``); claimed messages are left to their holders. One DELETE.
    Returns how many."""
    states = [MessageState.READY, MessageState.DEAD] if include_dead else [MessageState.READY]
    queue = collection_require_queue(collection)
    deleted, _ = Message.objects.of(queue).filter(state__in=states).delete()
    return deleted
