"""Reads of the group queues: collection lookup and resolution, a message as
data, depth and stats. Re-exported by ``groupqueues.services`` (one contract)."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
)

from groupqueues import exceptions as err
from groupqueues import sql
from groupqueues.dead_filters import DeadFilter
from groupqueues.models import (
    LIVE_STATES,
    Collection,
    CollectionKind,
    Message,
    MessageQuerySet,
    MessageState,
)
from principals.models import App, Group
from queueproject import clock, rawsql
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
    # ready and due, but behind their ordering key's head / a full
    # max_in_flight (SPEC §7; ``collection_stats`` only, else 0)
    waiting_behind_key: int = 0
    waiting_behind_limit: int = 0


def collection_get(*, group: Group, name: str) -> Collection:
    """The queue collection ``name`` declared by ``group`` itself. Raises
    CollectionNotFound (also for collections of other kinds)."""
    found = Collection.objects.queues().filter(group=group, name=name).first()
    if found is None:
        raise err.CollectionNotFound(f"Group {group.slug!r} has no queue {name!r}.")
    return found


def collection_at(*, group_ref: str, name: str) -> Collection | None:
    """The queue collection ``name`` of the group ``group_ref`` (slug or id),
    with its group, in one query; None when there is none (the caller asks
    ``collection_get`` then, to say which part is missing)."""
    try:
        ref: Any = Group._meta.pk.get_db_prep_value(uuid.UUID(group_ref), connection)
        by_id = True
    except ValueError:
        ref, by_id = group_ref, False
    row = rawsql.fetch_one(sql.collection_with_group(by_id=by_id), [name, ref])  # unique
    if row is None:
        return None
    collection_reader, group_reader = _collection_readers()
    collection = collection_reader.read(row, 0)
    assert isinstance(collection, Collection)
    collection.group = group_reader.read(row, collection_reader.width)  # type: ignore[assignment]  # joined: never None
    return collection


@functools.cache
def _collection_readers() -> tuple[rawsql.ModelReader[Collection], rawsql.ModelReader[Group]]:
    return rawsql.ModelReader(Collection), rawsql.ModelReader(Group)


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
    (one computation of the stats for the API, the admin and lists; on
    PostgreSQL its three counts as one prepared statement,
    ``sql.STATS_ONE_POSTGRES``), with what waits behind a key or a limit
    (``collection_waiting``)."""
    stats = (
        _stats_one_postgres(collection)
        if connection.vendor == "postgresql"
        else collections_stats(collections=[collection])[collection.pk]
    )
    if not (collection.uses_ordering_keys or collection.max_in_flight is not None):
        return stats
    behind_key, behind_limit = collection_waiting(collection=collection)
    return dataclasses.replace(
        stats, waiting_behind_key=behind_key, waiting_behind_limit=behind_limit
    )


def _stats_one_postgres(collection: Collection) -> QueueStats:
    """``collections_stats`` of one collection in one prepared statement."""
    now = clock.now()
    ready, pending, delayed, oldest, in_flight, dead = rawsql.fetch_one(
        sql.STATS_ONE_POSTGRES, {"collection_id": collection.pk, "now": now}
    )
    counts = {"ready": ready, "depth_pending": pending, "delayed": delayed, "oldest": oldest}
    return _stats(counts, in_flight, dead, now)


def collections_of(*, group: Group) -> list[Collection]:
    """The queue collections a group declares itself, by name."""
    return list(Collection.objects.filter(group=group, kind=CollectionKind.QUEUE).order_by("name"))


def collections_stats(
    *, collections: list[Collection], dead: dict[int, int] | None = None
) -> dict[int, QueueStats]:
    """The SPEC §4 stats of collections (by pk) in three queries, one per state
    (ready, claimed, dead; each served by that state's partial index), whatever
    their number. ``oldest_pending_age_seconds`` is measured from the oldest
    pending message's ready time (its enqueue time unless it was delayed or
    retried). ``dead``: the dead counts per pk when the caller has them (the
    maintenance snapshot, ``services.dead_counts_refresh``), instead of the
    third query."""
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
    if dead is None:
        counted = _by_collection(messages.dead(), collections, n=Count("*"))
        dead = {pk: row["n"] for pk, row in counted.items()}
    return {
        c.pk: _stats(ready.get(c.pk), claimed.get(c.pk, {}).get("n", 0), dead.get(c.pk, 0), now)
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


# ------------------------------------------------ ordering keys (SPEC §7)


def ordering_key_heads(*, collection: Collection, blocked: bool | None = None) -> MessageQuerySet:
    """The head of every ordering key with live messages (its live message of
    lowest seq, read through gq_msg_key), by key, annotated with ``waiting``
    (the key's live messages, the head included) and ``blocked`` (the head is
    claimed or waiting for a retry or its delay, so the key's next messages
    wait behind it). ``blocked`` True / False keeps only those."""
    now = clock.now()
    of_key = Message.objects.filter(
        collection_id=OuterRef("collection_id"), ordering_key=OuterRef("ordering_key"),
        state__in=LIVE_STATES,
    )  # fmt: skip
    is_blocked = Q(state=MessageState.CLAIMED) | Q(deliver_after__gt=now)
    heads = (
        Message.objects.of(collection).live().filter(ordering_key__isnull=False)
        .filter(~Exists(of_key.filter(seq__lt=OuterRef("seq"))))
        .annotate(
            waiting=Subquery(of_key.order_by().values("ordering_key")
                             .annotate(n=Count("*")).values("n")[:1]),
            blocked=ExpressionWrapper(is_blocked, output_field=BooleanField()),
        )
        .order_by("ordering_key")
    )  # fmt: skip
    if blocked is True:
        heads = heads.filter(is_blocked)
    elif blocked is False:
        heads = heads.exclude(is_blocked)
    return heads


def collection_waiting(*, collection: Collection) -> tuple[int, int]:
    """(ready and due messages waiting behind their key's head, ready and due
    heads waiting because max_in_flight is reached): the two "why is nothing
    claimed" numbers of the stats; (0, 0) for a collection without keys or
    max_in_flight (not computed)."""
    now = clock.now()
    due = Message.objects.of(collection).due(now)
    behind_key = 0
    if collection.uses_ordering_keys:
        earlier_or_held = Message.objects.filter(
            collection_id=OuterRef("collection_id"), ordering_key=OuterRef("ordering_key"),
            state__in=LIVE_STATES,
        ).filter(Q(seq__lt=OuterRef("seq")) | Q(state=MessageState.CLAIMED))  # fmt: skip
        behind_key = due.filter(ordering_key__isnull=False).filter(Exists(earlier_or_held)).count()
    behind_limit = 0
    if collection.max_in_flight is not None:
        running = Message.objects.of(collection).claimed().filter(lease_expires_at__gt=now).count()
        if running >= collection.max_in_flight:
            behind_limit = due.count() - behind_key
    return behind_key, behind_limit


def messages_dead(*, collection: Collection, where: DeadFilter | None = None) -> MessageQuerySet:
    """The dead messages of a collection (those ``where`` selects), most recent
    death first (a QuerySet to paginate; served by the gq_msg_dead index)."""
    return (where or DeadFilter()).apply(Message.objects.of(collection).dead())
