"""Reads of the group queues: collection lookup and resolution, a message as
data, depth and stats. Re-exported by ``groupqueues.services`` (one contract)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, Q, QuerySet

from groupqueues import exceptions as err
from groupqueues.dead_filters import DeadFilter
from groupqueues.models import Collection, CollectionKind, Message, MessageQuerySet
from principals.models import App, Group
from queueproject import clock
from queueproject.ids import parse_id


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
    try:
        return collection_resolve_from(group=app.group, name=name)
    except err.CollectionNotFound:
        raise err.CollectionNotFound(
            f"No queue {name!r} in the groups of app {app.slug!r}."
        ) from None


def collection_resolve_from(*, group: Group, name: str) -> Collection:
    """Resolve ``name`` from ``group`` as an enqueue of an app of it would: the
    nearest group of its chain (itself first, then its ancestors) declaring a
    ``queue`` collection of that name. Raises CollectionNotFound."""
    chain = group.ancestors()
    found = {c.group_id: c for c in Collection.objects.declared_in(chain, name)}
    for member in chain:
        if member.pk in found:
            collection = found[member.pk]
            collection.group = member
            return collection
    raise err.CollectionNotFound(f"No queue {name!r} in the chain of group {group.slug!r}.")


def message_get(*, collection: Collection, id: uuid.UUID | str) -> Message:
    """The message as data, dead ones included. Raises MessageNotFound (also for
    acked or cancelled messages, ids of other collections and non-UUID ids)."""
    try:
        message_id = parse_id(id)
    except ValueError:
        raise err.MessageNotFound() from None
    found = Message.objects.of(collection).filter(id=message_id).first()
    if found is None:
        raise err.MessageNotFound()
    return found


def message_elsewhere(*, collection: Collection, id: uuid.UUID) -> bool:
    """Whether ``id`` names a message of another collection (token operations
    on it answer 404, not lease_lost: SPEC §4)."""
    return Message.objects.filter(id=id).exclude(collection_id=collection.pk).exists()


# Each count reads one state, so PostgreSQL answers it from that state's
# partial index (index-only when the visibility map allows): ready rows from
# gq_msg_claimable (expires_at is INCLUDEd), claimed from gq_msg_lease, dead
# from gq_msg_dead. None of the live numbers ever touches dead history.


def collection_depth(*, collection: Collection) -> int:
    """Live messages (ready + claimed; a claimed one with a lapsed lease counts
    until it is claimed again or reclaimed)."""
    messages = Message.objects.of(collection)
    return messages.ready().count() + messages.claimed().count()


def collection_depth_pending(*, collection: Collection) -> int:
    """Ready messages that are due now and not expired."""
    return Message.objects.of(collection).pending(clock.now()).count()


def collection_stats(*, collection: Collection) -> QueueStats:
    """The SPEC §4 stats of one collection: ``collections_stats`` of it alone
    (one computation of the stats for the API, the admin and lists)."""
    return collections_stats(collections=[collection])[collection.pk]


def collections_of(*, group: Group) -> list[Collection]:
    """The queue collections a group declares itself, by name."""
    return list(Collection.objects.filter(group=group, kind=CollectionKind.QUEUE).order_by("name"))


def collections_stats(*, collections: list[Collection]) -> dict[int, QueueStats]:
    """The SPEC §4 stats of collections (by pk) in three queries, one per state
    (ready, claimed, dead; each served by that state's partial index), whatever
    their number. ``oldest_pending_age_seconds`` is measured from the oldest
    pending message's ready time (its enqueue time unless it was delayed or
    retried)."""
    now = clock.now()
    messages = Message.objects.filter(collection_id__in=[c.pk for c in collections])
    pending = Q(deliver_after__lte=now) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    ready = _by_collection(
        messages.ready(), collections, ready=Count("pk"), depth_pending=Count("pk", filter=pending),
        delayed=Count("pk", filter=Q(deliver_after__gt=now)),
        oldest=Min("deliver_after", filter=pending),
    )  # fmt: skip
    # COUNT(*), not of a column: the claimed and dead indexes hold no seq, and
    # counting one would send every row to the table instead of index-only.
    claimed = _by_collection(messages.claimed(), collections, n=Count("*"))
    dead = _by_collection(messages.dead(), collections, n=Count("*"))
    return {
        c.pk: _stats(ready.get(c.pk), claimed.get(c.pk, {}).get("n", 0),
                     dead.get(c.pk, {}).get("n", 0), now)
        for c in collections
    }  # fmt: skip


def _by_collection(
    messages: QuerySet[Message], collections: list[Collection], **aggregates: Any
) -> dict[int, dict[str, Any]]:
    """``aggregates`` per collection pk (collections without rows are left out).
    One collection: a plain aggregate, which PostgreSQL answers index-only
    from the state's partial index; grouped, the planner may prefer a scan of
    the table when the state holds many rows."""
    if len(collections) == 1:
        row = messages.aggregate(**aggregates)
        return {collections[0].pk: row} if any(row.values()) else {}
    rows = messages.values("collection_id").annotate(**aggregates).order_by()
    return {r["collection_id"]: {k: v for k, v in r.items() if k != "collection_id"} for r in rows}


def _stats(ready: dict[str, Any] | None, in_flight: int, dead: int, now: datetime) -> QueueStats:
    ready = ready or {"ready": 0, "depth_pending": 0, "delayed": 0, "oldest": None}
    oldest = ready["oldest"]
    return QueueStats(
        depth=ready["ready"] + in_flight,
        depth_pending=ready["depth_pending"],
        delayed=ready["delayed"],
        in_flight=in_flight,
        dead=dead,
        oldest_pending_age_seconds=(
            max(0.0, (now - oldest).total_seconds()) if oldest is not None else None
        ),
    )


def messages_dead(*, collection: Collection, where: DeadFilter | None = None) -> MessageQuerySet:
    """The dead messages of a collection (those ``where`` selects), most recent
    death first (a QuerySet to paginate; served by the gq_msg_dead index)."""
    return (where or DeadFilter()).apply(Message.objects.of(collection).dead())
