"""Reads of the group queues: collection lookup and resolution, a message as
data, depth and stats. Re-exported by ``groupqueues.services`` (one contract)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min, Q

from groupqueues import exceptions as err
from groupqueues.models import (
    Collection,
    CollectionKind,
    CollectionQuerySet,
    Message,
    MessageQuerySet,
    MessageState,
)
from principals.models import App, Group
from queueproject import clock


@dataclass(frozen=True)
class QueueStats:
    """SPEC §4 stats: depth = ready + claimed (a lapsed lease still counts until
    reclaimed); depth_pending = ready, due and not expired; delayed = ready
    but not yet due; in_flight = claimed; dead; the age of the oldest pending
    message in seconds (None when nothing is pending)."""

    depth: int
    depth_pending: int
    delayed: int
    in_flight: int
    dead: int
    oldest_pending_age_seconds: float | None


def collection_get(*, group: Group, name: str) -> Collection:
    """The queue collection ``name`` declared by ``group`` itself. Raises
    CollectionNotFound (also for collections of other kinds)."""
    found = Collection.objects.queues().filter(group=group, name=name).first()
    if found is None:
        raise err.CollectionNotFound(f"Group {group.slug!r} has no queue {name!r}.")
    return found


def collection_resolve(*, app: App, name: str) -> Collection:
    """Resolve ``name`` for ``app``: walk its chain (its group, the parent, … the
    root) and take the nearest group declaring a ``queue`` collection of that
    name. Collections of other kinds are not queues. Raises CollectionNotFound."""
    chain = app.group.ancestors()
    found = {c.group_id: c for c in Collection.objects.declared_in(chain, name)}
    for group in chain:
        if group.pk in found:
            collection = found[group.pk]
            collection.group = group
            return collection
    raise err.CollectionNotFound(f"No queue {name!r} in the groups of app {app.slug!r}.")


def message_get(*, collection: Collection, id: uuid.UUID | str) -> Message:
    """The message as data, dead ones included. Raises MessageNotFound (also for
    acked or cancelled messages, ids of other collections and non-UUID ids)."""
    try:
        message_id = uuid.UUID(str(id))
    except ValueError:
        raise err.MessageNotFound() from None
    found = Message.objects.of(collection).filter(id=message_id).first()
    if found is None:
        raise err.MessageNotFound()
    return found


def collection_depth(*, collection: Collection) -> int:
    """Live messages (ready + claimed)."""
    return Message.objects.of(collection).live().count()


def collection_depth_pending(*, collection: Collection) -> int:
    """Ready messages that are due now and not expired."""
    return Message.objects.of(collection).pending(clock.now()).count()


def collection_stats(*, collection: Collection) -> QueueStats:
    """Depths of the collection in two queries: one over live rows (partial
    indexes), one over dead rows (the dead index); dead history is never
    scanned for the live numbers."""
    now = clock.now()
    ready = Q(state=MessageState.READY)
    due = ready & Q(deliver_after__lte=now)
    pending = due & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    live = (
        Message.objects.of(collection)
        .live()
        .aggregate(
            depth=Count("seq"),
            depth_pending=Count("seq", filter=pending),
            delayed=Count("seq", filter=ready & Q(deliver_after__gt=now)),
            in_flight=Count("seq", filter=Q(state=MessageState.CLAIMED)),
            oldest=Min("enqueued_at", filter=pending),
        )
    )
    dead = Message.objects.of(collection).dead().count()
    oldest = live.pop("oldest")
    age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else None
    return QueueStats(dead=dead, oldest_pending_age_seconds=age, **live)


def collections_of(*, group: Group) -> list[Collection]:
    """The queue collections a group declares itself, by name."""
    return list(Collection.objects.filter(group=group, kind=CollectionKind.QUEUE).order_by("name"))


def collections_stats(*, collections: list[Collection]) -> dict[int, QueueStats]:
    """Stats of many collections (by pk) in two grouped queries, one over live
    rows and one over dead rows, whatever their number: for lists and the admin
    changelist. Same numbers as ``collection_stats``."""
    now = clock.now()
    ids = [c.pk for c in collections]
    ready = Q(state=MessageState.READY)
    pending = (
        ready & Q(deliver_after__lte=now) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    )
    live = (
        Message.objects.filter(collection_id__in=ids)
        .live()
        .values("collection_id")
        .annotate(
            depth=Count("seq"),
            depth_pending=Count("seq", filter=pending),
            delayed=Count("seq", filter=ready & Q(deliver_after__gt=now)),
            in_flight=Count("seq", filter=Q(state=MessageState.CLAIMED)),
            oldest=Min("enqueued_at", filter=pending),
        )
        .order_by()
    )
    by_id = {row.pop("collection_id"): row for row in live}
    dead = dict(
        Message.objects.filter(collection_id__in=ids)
        .dead()
        .values("collection_id")
        .annotate(n=Count("seq"))
        .order_by()
        .values_list("collection_id", "n")
    )
    return {pk: _stats_of(by_id.get(pk), dead.get(pk, 0), now) for pk in ids}


def _stats_of(live: dict | None, dead: int, now: datetime) -> QueueStats:
    if live is None:
        return QueueStats(0, 0, 0, 0, dead, None)
    oldest = live.pop("oldest")
    age = max(0.0, (now - oldest).total_seconds()) if oldest is not None else None
    return QueueStats(dead=dead, oldest_pending_age_seconds=age, **live)


def dead_messages(*, collection: Collection) -> MessageQuerySet:
    """Dead messages of the collection, most recent death first (the dead index)."""
    return Message.objects.of(collection).dead().order_by("-died_at", "-seq")


def messages_in(*, collections: list[Collection] | CollectionQuerySet) -> MessageQuerySet:
    """Messages of the given collections (the admin's message browser)."""
    return Message.objects.filter(collection__in=collections)
