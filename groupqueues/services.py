"""Writes of the group queues (SPEC §2): the contract the API, the admin, the
workers and maintenance call.

Rules every function keeps:
- keyword-only, typed arguments; the time is ``queueproject.clock.now()``,
  passed into SQL as a parameter (never the database's clock);
- each call is one short transaction (a single statement runs in autocommit,
  which is one transaction); every state change is ONE conditional
  UPDATE/DELETE fenced by the state (and claim token and unexpired lease) it
  expects, and the row count decides the outcome: no read-then-write, so a
  maintenance pass never overwrites what a worker just acked, nacked or
  extended;
- the caller passes the collection (resolved with ``collection_get`` or
  ``collection_resolve``) and, for enqueue, ``enqueued_by`` from the
  authenticated principal (``principal.label``), never from a request body.

Errors are ``groupqueues.exceptions``. Reads (get, stats, depth) live in
``groupqueues.selectors`` and are re-exported here so the whole contract is one
import.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, DateTimeField, F, JSONField, Q, Value, When

from groupqueues import exceptions as err
from groupqueues import sql
from groupqueues import validation as check
from groupqueues.models import (
    COLLECTION_NAME_VALIDATOR,
    LIVE_STATES,
    Collection,
    CollectionKind,
    DeadReason,
    Message,
    MessageState,
    new_message_ids,
)
from groupqueues.selectors import (  # re-exported: reads belong to the contract too
    QueueStats,
    collection_depth,
    collection_depth_pending,
    collection_get,
    collection_resolve,
    collection_stats,
    collections_of,
    message_get,
    messages_dead,
)
from principals.models import Group
from queueproject import clock, notify
from queueproject.conf import ProductSettings, product_settings

__all__ = [
    "AckBatchResult",
    "AckResult",
    "ClaimedMessage",
    "EnqueueResult",
    "NewMessage",
    "QueueStats",
    "SweepResult",
    "collection_create",
    "collection_depth",
    "collection_depth_pending",
    "collection_get",
    "collection_purge",
    "collection_resolve",
    "collection_stats",
    "collection_update",
    "collections_of",
    "collections_refresh_claim_floors",
    "message_ack",
    "message_ack_batch",
    "message_ack_batch_and_claim",
    "message_cancel",
    "message_claim",
    "message_claim_waiting",
    "message_enqueue",
    "message_enqueue_batch",
    "message_extend",
    "message_fail",
    "message_get",
    "message_nack",
    "message_release",
    "messages_dead",
    "messages_drop_exhausted",
    "messages_prune_dead",
    "messages_reclaim_expired",
    "messages_redrive",
    "messages_sweep_expired",
]

T = TypeVar("T")

MAX_CLAIM = 100
MAX_BATCH = 500
MAX_ACK_BATCH = 500
# A claim that found only dead candidates tries again this often before
# answering with what it has (so a worker is not told "empty" too early).
CLAIM_ROUNDS = 5
PRUNE_CHUNK = 5000

# ---------------------------------------------------------------- data types


@dataclass(frozen=True)
class NewMessage:
    """One message to enqueue (the options of SPEC §2). ``delay_seconds`` and
    ``deliver_after`` are alternatives, as are ``expires_in_seconds`` and
    ``expires_at``; ``max_attempts`` defaults to the collection's."""

    payload: Any
    priority: int = 0
    delay_seconds: float | None = None
    deliver_after: datetime | None = None
    expires_in_seconds: float | None = None
    expires_at: datetime | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None


@dataclass(frozen=True)
class EnqueueResult:
    """The id of the message; ``created`` is False when an existing message with
    the same idempotency key answered (nothing was inserted)."""

    id: uuid.UUID
    created: bool


@dataclass(frozen=True)
class ClaimedMessage:
    """A message handed to a worker: keep ``id`` and ``claim_token`` for ack,
    nack, fail, extend and release before ``lease_expires_at``."""

    id: uuid.UUID
    collection_id: int
    payload: Any
    priority: int
    attempt: int
    max_attempts: int
    claim_token: uuid.UUID
    claimed_by: str
    lease_expires_at: datetime
    enqueued_at: datetime
    deliver_after: datetime
    expires_at: datetime | None
    enqueued_by: str
    last_error: str | None
    seq: int = field(repr=False, compare=False, default=0)


@dataclass(frozen=True)
class AckResult:
    id: uuid.UUID
    acked: bool
    reason: str | None  # "lease_lost" when not acked


@dataclass(frozen=True)
class AckBatchResult:
    acked: int
    results: list[AckResult]


@dataclass(frozen=True)
class AckAndClaimResult:
    acked: bool  # False: the lease was lost (stale token, lapsed lease, cancelled)
    messages: list[ClaimedMessage]  # claimed next, in claim order


@dataclass(frozen=True)
class AckBatchAndClaimResult:
    acks: AckBatchResult  # as message_ack_batch answers
    messages: list[ClaimedMessage]  # claimed next, in claim order


@dataclass(frozen=True)
class SweepResult:
    expired: int  # live messages moved to dead ("expired")
    pruned: int  # dead messages deleted after their retention


# --------------------------------------------------------------- collections

_SETTING_CHECKS: dict[str, tuple[int, int | None]] = {
    "max_payload_bytes": (1, 64 * 1024 * 1024),
    "default_max_attempts": (1, check.MAX_ATTEMPTS_MAX),
    "visibility_timeout": (check.VISIBILITY_TIMEOUT_MIN, check.VISIBILITY_TIMEOUT_MAX),
    "dead_retention": (0, check.DURATION_MAX),
    "max_depth": (1, None),
}
_UNSET: Any = object()


def _check_settings(values: dict[str, Any]) -> dict[str, Any]:
    """Validate collection settings (None for max_depth = no limit)."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is _UNSET:
            continue
        if name == "paused":
            if not isinstance(value, bool):
                raise err.InvalidQueueInput.field(name, "Must be a boolean.")
        elif name in ("retry_backoff_base", "retry_backoff_max"):
            value = check.check_seconds(value, name)
        elif not (name == "max_depth" and value is None):
            low, high = _SETTING_CHECKS[name]
            value = check.check_int(value, name, low=low, high=high)
        out[name] = value
    return out


def _check_backoff(collection: Collection) -> None:
    if collection.retry_backoff_base < 0.001:
        raise err.InvalidQueueInput.field("retry_backoff_base", "Must be at least 0.001 s.")
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
) -> Collection:
    """Declare a collection on ``group``; omitted settings take their defaults.
    Raises InvalidQueueInput, CollectionExists (409 already_exists)."""
    if not isinstance(name, str) or not COLLECTION_NAME_VALIDATOR.regex.match(name):
        raise err.InvalidQueueInput.field("name", str(COLLECTION_NAME_VALIDATOR.message))
    if kind not in CollectionKind.values:
        raise err.InvalidQueueInput.field("kind", f"Must be one of {CollectionKind.values}.")
    settings = _check_settings(
        {
            "max_payload_bytes": max_payload_bytes,
            "default_max_attempts": default_max_attempts,
            "visibility_timeout": visibility_timeout,
            "retry_backoff_base": retry_backoff_base,
            "retry_backoff_max": retry_backoff_max,
            "dead_retention": dead_retention,
            "max_depth": max_depth,
            "paused": paused,
        }
    )
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
) -> Collection:
    """Change the given settings (pause/resume with ``paused``); others stay.
    Existing messages keep their own max_attempts. Raises InvalidQueueInput."""
    settings = _check_settings(
        {
            "max_payload_bytes": max_payload_bytes,
            "default_max_attempts": default_max_attempts,
            "visibility_timeout": visibility_timeout,
            "retry_backoff_base": retry_backoff_base,
            "retry_backoff_max": retry_backoff_max,
            "dead_retention": dead_retention,
            "max_depth": max_depth,
            "paused": paused,
        }
    )
    for name, value in settings.items():
        setattr(collection, name, value)
    _check_backoff(collection)
    if settings:
        Collection.objects.filter(pk=collection.pk).update(**settings)
    return collection


def _queue(collection: Collection) -> Collection:
    """Refuse collections that are not queues (404 collection_not_found)."""
    if collection.kind != CollectionKind.QUEUE:
        raise err.CollectionNotFound(f"{collection.name!r} is not a queue collection.")
    return collection


def _wake(collection: Collection) -> None:
    """Wake long-polls and workers of the collection (at commit)."""
    notify.notify(collection.wake_channel)


# ------------------------------------------------------------------- enqueue


@dataclass(slots=True)
class _Row:
    """A validated new message, ready to insert."""

    id: uuid.UUID
    payload: Any
    payload_json: str | None  # None: serialised with the whole batch (check.payloads_json)
    priority: int
    deliver_after: datetime
    expires_at: datetime | None
    max_attempts: int
    idempotency_key: str | None


def _prepare(
    collection: Collection,
    new: NewMessage,
    *,
    id: uuid.UUID,
    now: datetime,
    max_depth: int,
    index: int | None,
    payload_checked: bool = False,
) -> _Row:
    """Validate one new message (raises InvalidQueueInput, MessageTooLarge).
    ``payload_checked``: the payload was already checked and serialised with
    its batch (``check.payloads_json``)."""
    text = None
    if not payload_checked:
        text = _checked_payload(collection, new.payload, max_depth=max_depth, index=index)
    priority = new.priority
    if priority != 0 or type(priority) is not int:
        check.check_int(priority, "priority", low=check.PRIORITY_MIN, high=check.PRIORITY_MAX,
                        index=index)  # fmt: skip
    max_attempts = collection.default_max_attempts
    if new.max_attempts is not None:
        max_attempts = check.check_int(
            new.max_attempts, "max_attempts", low=1, high=check.MAX_ATTEMPTS_MAX, index=index
        )
    key = new.idempotency_key
    if key is not None:
        check.check_text(key, "idempotency_key", low=1, high=check.IDEMPOTENCY_KEY_MAX, index=index)
    return _Row(
        id, new.payload, text, priority,
        _when(new.delay_seconds, new.deliver_after, "delay_seconds", "deliver_after",
              now=now, index=index) or now,
        _when(new.expires_in_seconds, new.expires_at, "expires_in_seconds", "expires_at",
              now=now, index=index),
        max_attempts, key,
    )  # fmt: skip


def _checked_payload(collection: Collection, payload: Any, *, max_depth: int,
                     index: int | None) -> str:  # fmt: skip
    """The payload's JSON text, checked against the collection's size limit."""
    text = check.payload_json(payload, max_depth=max_depth, index=index)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > collection.max_payload_bytes:
        details = {"payload_bytes": size, "max_payload_bytes": collection.max_payload_bytes}
        if index is not None:
            details["index"] = index
        raise err.MessageTooLarge(
            f"The payload is {size} bytes; the collection allows {collection.max_payload_bytes}.",
            details=details,
        )
    return text


def _when(
    seconds: Any, at: Any, seconds_name: str, at_name: str, *, now: datetime, index: int | None
) -> datetime | None:
    """A moment given as seconds from now or as a date-time (not both)."""
    if seconds is not None and at is not None:
        raise err.InvalidQueueInput.field(
            at_name, f"Give {seconds_name} or {at_name}, not both.", index=index
        )
    if seconds is not None:
        return now + timedelta(seconds=check.check_seconds(seconds, seconds_name, index=index))
    if at is not None:
        return check.check_datetime(at, at_name, index=index)
    return None


def _lock_depth_limit(collection: Collection) -> int | None:
    """The collection's current max_depth, with its row locked FOR NO KEY UPDATE
    (PostgreSQL) so concurrent enqueuers into a bounded queue insert and count
    one after the other (it does not conflict with the KEY SHARE lock the
    message INSERTs take). Raises CollectionNotFound if the collection was
    deleted meanwhile. Must run in a transaction."""
    found = list(
        Collection.objects.select_for_update(no_key=True)
        .filter(pk=collection.pk)
        .values_list("max_depth", flat=True)
    )
    if not found:
        raise _collection_gone(collection)
    return found[0]


def _collection_gone(collection: Collection) -> err.CollectionNotFound:
    return err.CollectionNotFound(f"The queue {collection.name!r} no longer exists.")


def _check_depth(collection: Collection, limit: int, added: int) -> None:
    """After inserting ``added`` messages, raise QueueFull (the caller's
    transaction rolls back) when the live depth now exceeds ``limit``."""
    depth = Message.objects.of(collection).live().count() - added
    if depth + added > limit:
        raise err.QueueFull(
            f"The queue holds {depth} live messages; {added} more would exceed its "
            f"max_depth of {limit}.",
            details={"depth": depth, "max_depth": limit},
        )


def message_enqueue(
    *,
    collection: Collection,
    payload: Any,
    enqueued_by: str,
    priority: int = 0,
    delay_seconds: float | None = None,
    deliver_after: datetime | None = None,
    expires_in_seconds: float | None = None,
    expires_at: datetime | None = None,
    max_attempts: int | None = None,
    idempotency_key: str | None = None,
) -> EnqueueResult:
    """Insert one ready message (a paused collection still accepts) and wake
    consumers. Raises InvalidQueueInput (400), MessageTooLarge (413), QueueFull
    (429, only when the collection has max_depth: the collection row is then
    locked for the count), CollectionNotFound for non-queue kinds."""
    new = NewMessage(
        payload, priority, delay_seconds, deliver_after, expires_in_seconds, expires_at,
        max_attempts, idempotency_key,
    )  # fmt: skip
    return _enqueue(collection, [new], enqueued_by=enqueued_by, batch=False)[0]


def message_enqueue_batch(
    *, collection: Collection, messages: Sequence[NewMessage], enqueued_by: str
) -> list[EnqueueResult]:
    """Insert 1 to 500 messages in one transaction, all or nothing, in list
    order (their enqueue order); one wake-up. An invalid entry rejects the
    batch with its ``index`` in the error's details. Entries whose idempotency
    key is already present (or repeated earlier in the batch) answer the
    existing id with ``created=False``. Raises as ``message_enqueue``;
    QueueFull counts only the messages actually created."""
    if not 1 <= len(messages) <= MAX_BATCH:
        raise err.InvalidQueueInput.field("messages", f"Give between 1 and {MAX_BATCH} messages.")
    return _enqueue(collection, messages, enqueued_by=enqueued_by, batch=True)


def _enqueue(
    collection: Collection, messages: Sequence[NewMessage], *, enqueued_by: str, batch: bool
) -> list[EnqueueResult]:
    """Validate every message, then insert them all in one transaction (one
    statement on PostgreSQL when the collection has no max_depth)."""
    _queue(collection)
    enqueued_by = check.check_text(enqueued_by, "enqueued_by", low=0, high=200)
    now = clock.now()
    settings = product_settings()  # read once: it is a dozen settings lookups
    max_depth = settings.json_max_depth
    postgres = connection.vendor == "postgresql"
    payloads = None  # a batch's payloads serialised in one call, when they allow it
    if postgres and len(messages) > 1:
        payloads = check.payloads_json([new.payload for new in messages], max_depth=max_depth,
                                       max_bytes=collection.max_payload_bytes)  # fmt: skip
    ids = new_message_ids(len(messages))
    if payloads is not None and collection.max_depth is None and all(map(_plain, messages)):
        return _insert_plain_postgres(collection, ids, payloads, now=now,
                                      enqueued_by=enqueued_by, settings=settings)  # fmt: skip
    rows = [
        _prepare(collection, new, id=ids[i], now=now, max_depth=max_depth,
                 index=i if batch else None, payload_checked=payloads is not None)
        for i, new in enumerate(messages)
    ]  # fmt: skip
    if postgres and collection.max_depth is None:
        return _insert_postgres(collection, rows, now=now, enqueued_by=enqueued_by,
                                settings=settings, payloads=payloads)  # fmt: skip
    with transaction.atomic():
        limit = None
        if collection.max_depth is not None or not postgres:
            # Locks the row on PostgreSQL; on SQLite the IMMEDIATE transaction
            # already holds the write lock, and the read makes sure the
            # collection still exists (no foreign key checks the messages).
            limit = _lock_depth_limit(collection)
        if postgres:
            results = _insert_postgres(collection, rows, now=now, enqueued_by=enqueued_by,
                                       settings=settings, payloads=payloads)  # fmt: skip
        else:
            results = _insert_portable(collection, rows, now=now, enqueued_by=enqueued_by)
        created = sum(r.created for r in results)
        if limit is not None and created:
            _check_depth(collection, limit, created)
    return results


def _insert_postgres(
    collection: Collection,
    rows: list[_Row],
    *,
    now: datetime,
    enqueued_by: str,
    settings: ProductSettings,
    payloads: str | None = None,
    retries: int = 3,
) -> list[EnqueueResult]:
    """Insert rows with ``sql.ENQUEUE_POSTGRES`` (one statement, wake-up
    included); rows skipped for a taken idempotency key answer the holder's id.
    ``payloads``: the rows' payloads as one JSON array, if already serialised."""
    params = _enqueue_params(collection, now=now, enqueued_by=enqueued_by, settings=settings)
    if len(rows) == 1:
        (r,) = rows
        params.update(id=r.id, payload=_payload_text(r), priority=r.priority,
                      deliver_after=r.deliver_after, expires_at=r.expires_at,
                      max_attempts=r.max_attempts, key=r.idempotency_key)  # fmt: skip
        query = sql.ENQUEUE_ONE_POSTGRES
    else:
        default = collection.default_max_attempts
        if payloads is None:
            payloads = "[" + ",".join([_payload_text(r) for r in rows]) + "]"
        params.update(ids=_uuid_array([r.id for r in rows]), payloads=payloads,
                      options=_options_json(rows, now, default), max_attempts=default)  # fmt: skip
        query = sql.ENQUEUE_POSTGRES
    with sql.cursor(settings) as cur:
        cur.execute(query, params)
        if cur.rowcount == len(rows):  # all inserted: no need to read the ids back
            return [EnqueueResult(r.id, True) for r in rows]
        inserted = {row[0] for row in cur.fetchall()}
    holders = _key_holders(collection, [r for r in rows if r.id not in inserted])
    lost = [r for r in rows if r.id not in inserted and r.idempotency_key not in holders]
    if lost and not Collection.objects.filter(pk=collection.pk).exists():
        raise _collection_gone(collection)  # the statement found no collection row
    if lost and retries:  # the holder was deleted meanwhile: the key is free again
        again = _insert_postgres(collection, lost, now=now, enqueued_by=enqueued_by,
                                 settings=settings, retries=retries - 1)  # fmt: skip
        holders.update({r.idempotency_key: a.id for r, a in zip(lost, again, strict=True)})
    return [
        EnqueueResult(r.id, True) if r.id in inserted else EnqueueResult(
            holders[r.idempotency_key], False)
        for r in rows
    ]  # fmt: skip


def _enqueue_params(
    collection: Collection, *, now: datetime, enqueued_by: str, settings: ProductSettings
) -> dict[str, Any]:
    """The parameters every form of the PostgreSQL enqueue statement takes."""
    return {
        "group_id": collection.group_id, "collection_id": collection.pk, "now": now,
        "enqueued_by": enqueued_by, "channel": collection.wake_channel,
        "wake": settings.listen_notify_enabled,  # notify.listen_available(), on PostgreSQL
    }  # fmt: skip


def _plain(new: NewMessage) -> bool:
    """No option set: the message takes every default (most batches)."""
    return (
        new.priority == 0 and type(new.priority) is int and new.delay_seconds is None
        and new.deliver_after is None and new.expires_in_seconds is None
        and new.expires_at is None and new.max_attempts is None and new.idempotency_key is None
    )  # fmt: skip


def _insert_plain_postgres(
    collection: Collection,
    ids: list[uuid.UUID],
    payloads: str,
    *,
    now: datetime,
    enqueued_by: str,
    settings: ProductSettings,
) -> list[EnqueueResult]:
    """``_insert_postgres`` for a batch of plain messages whose payloads were
    checked and serialised together: nothing else to check per row (a fifth of
    a 500-message batch's Python went to it). Without idempotency keys every
    row is inserted unless the collection is gone."""
    params = _enqueue_params(collection, now=now, enqueued_by=enqueued_by, settings=settings)
    params.update(ids=_uuid_array(ids), payloads=payloads,
                  max_attempts=collection.default_max_attempts)  # fmt: skip
    with sql.cursor(settings) as cur:
        cur.execute(sql.ENQUEUE_PLAIN_POSTGRES, params)
        ((inserted, _),) = cur.fetchall()
    if inserted != len(ids):
        raise _collection_gone(collection)
    return [EnqueueResult(i, True) for i in ids]


def _payload_text(row: _Row) -> str:
    """The row's payload as JSON text (serialised now if it came with its batch)."""
    return row.payload_json if row.payload_json is not None else check.dumps(row.payload)


def _options_json(rows: list[_Row], now: datetime, default_max_attempts: int) -> str:
    """The rows' options as the JSON array ``sql.ENQUEUE_POSTGRES`` reads: one
    object per row holding only the options that differ from the defaults."""
    parts = []
    for r in rows:
        extra = []
        if r.priority:
            extra.append(f'"pr":{r.priority}')
        if r.deliver_after != now:
            extra.append(f'"da":"{r.deliver_after.isoformat()}"')
        if r.expires_at is not None:
            extra.append(f'"ea":"{r.expires_at.isoformat()}"')
        if r.max_attempts != default_max_attempts:
            extra.append(f'"ma":{r.max_attempts}')
        if r.idempotency_key is not None:
            extra.append(f'"k":{json.dumps(r.idempotency_key)}')
        parts.append("{" + ",".join(extra) + "}" if extra else "{}")
    return "[" + ",".join(parts) + "]"


def _json_value(payload: Any) -> Any:
    """A payload for the ORM: a bare None would be stored as SQL NULL, not JSON null."""
    return Value(None, output_field=JSONField()) if payload is None else payload


def _key_holders(collection: Collection, rows: list[_Row]) -> dict[str | None, uuid.UUID]:
    """idempotency key -> id of the message holding it in the collection."""
    keys = [r.idempotency_key for r in rows]
    found = Message.objects.of(collection).filter(idempotency_key__in=keys)
    return dict(found.values_list("idempotency_key", "id"))


def _insert_portable(
    collection: Collection, rows: list[_Row], *, now: datetime, enqueued_by: str
) -> list[EnqueueResult]:
    """The ORM insert (SQLite), inside the caller's IMMEDIATE transaction, which
    holds the write lock: a key's holder read here cannot change before the
    INSERT. Runs of rows are inserted with one bulk INSERT each, in order."""
    results: list[EnqueueResult] = []
    plain: list[Message] = []
    taken = _key_holders(collection, [r for r in rows if r.idempotency_key is not None])
    for row in rows:
        key = row.idempotency_key
        if key is not None and key in taken:
            results.append(EnqueueResult(taken[key], False))
            continue
        if key is not None:
            taken[key] = row.id
        plain.append(Message(
            id=row.id, group_id=collection.group_id, collection_id=collection.pk,
            payload=_json_value(row.payload), priority=row.priority, enqueued_at=now,
            deliver_after=row.deliver_after, expires_at=row.expires_at,
            max_attempts=row.max_attempts, enqueued_by=enqueued_by, idempotency_key=key,
        ))  # fmt: skip
        results.append(EnqueueResult(row.id, True))
    Message.objects.bulk_create(plain)
    if plain:
        _wake(collection)
    return results


# --------------------------------------------------------------------- claim


def message_claim(
    *,
    collection: Collection,
    worker_id: str,
    n: int = 1,
    visibility_timeout: int | None = None,
) -> list[ClaimedMessage]:
    """Hand out up to ``n`` (capped at 100) claimable messages in claim order
    (priority DESC, ready time ASC, enqueue order ASC): ready and due, or
    claimed with a lapsed lease. Each gets a fresh claim token, ``claimed_by``,
    a lease of ``visibility_timeout`` seconds (default: the collection's) and
    attempt + 1. Expired candidates become dead ``expired`` and those out of
    attempts dead ``exhausted`` instead of being handed out. ``n <= 0`` and a
    paused collection answer []. Each message goes to exactly one claimer at a
    time (SKIP LOCKED on PostgreSQL, the IMMEDIATE write lock on SQLite).
    PostgreSQL: one statement per round (see ``sql.CLAIM_POSTGRES``).
    Raises InvalidQueueInput (worker_id, n, visibility_timeout)."""
    n, timeout = _claim_args(collection, worker_id, n, visibility_timeout)
    return _claim_rounds(collection, worker_id, n, timeout, [], CLAIM_ROUNDS)


def _claim_args(
    collection: Collection, worker_id: str, n: Any, visibility_timeout: Any
) -> tuple[int, int]:
    """The claim's checked arguments: (n, lease seconds)."""
    _queue(collection)
    check.check_worker_id(worker_id)
    n = check.check_int(n, "n", low=-(2**31))
    timeout = collection.visibility_timeout
    if visibility_timeout is not None:
        timeout = check.check_int(
            visibility_timeout, "visibility_timeout",
            low=check.VISIBILITY_TIMEOUT_MIN, high=check.VISIBILITY_TIMEOUT_MAX,
        )  # fmt: skip
    return n, timeout


def _claim_rounds(
    collection: Collection, worker_id: str, n: int, timeout: int,
    claimed: list[ClaimedMessage], rounds: int,
) -> list[ClaimedMessage]:  # fmt: skip
    """Claim rounds until ``claimed`` holds min(n, 100) messages, nothing was
    left, or ``rounds`` rounds ran (a round whose candidates died leaves room
    for another)."""
    for _ in range(rounds):
        wanted = min(n, MAX_CLAIM) - len(claimed)
        if wanted <= 0:
            break
        got, died = _claim_round(collection, worker_id, wanted, timeout)
        claimed += got
        if not died:
            break
    return claimed


def message_ack_and_claim(
    *,
    collection: Collection,
    id: uuid.UUID | str,
    claim_token: uuid.UUID | str,
    worker_id: str,
    n: int = 1,
    visibility_timeout: int | None = None,
) -> AckAndClaimResult:
    """Ack the held message ``id`` and claim up to ``n`` more: what a consumer
    that takes one message at a time does between two messages, in ONE
    statement on PostgreSQL (as ``message_ack_batch_and_claim`` with one
    pair). The ack is ``message_ack`` except that a lost lease does not raise
    (``acked`` is False and nothing is deleted)."""
    pairs = _ack_pairs([(id, claim_token)])
    landed, claimed = _ack_and_claim(collection, pairs, worker_id, n, visibility_timeout)
    return AckAndClaimResult(landed is None or pairs[0][0] in landed, claimed)


def message_ack_batch_and_claim(
    *,
    collection: Collection,
    acks: Sequence[tuple[uuid.UUID | str, uuid.UUID | str]],
    worker_id: str,
    n: int = 1,
    visibility_timeout: int | None = None,
) -> AckBatchAndClaimResult:
    """Ack held (id, claim_token) pairs and claim up to ``n`` more: what a
    consumer does between two batches, in ONE statement on PostgreSQL (one
    round trip and one commit instead of two each;
    ``sql.ACK_BATCH_AND_CLAIM_POSTGRES``). The acks are ``message_ack_batch``
    (a lost lease is reported per entry, never raised; at most 500); the claim
    is ``message_claim`` (same order, leases, deaths, paused and ``n <= 0``
    rules). SQLite: the two in turn. Raises InvalidQueueInput for bad
    arguments, before anything happens."""
    pairs = _ack_pairs(acks)
    landed, claimed = _ack_and_claim(collection, pairs, worker_id, n, visibility_timeout)
    return AckBatchAndClaimResult(_ack_batch_result(pairs, landed), claimed)


def _ack_and_claim(
    collection: Collection,
    pairs: list[tuple[uuid.UUID, uuid.UUID]],
    worker_id: str,
    n: Any,
    visibility_timeout: Any,
) -> tuple[set[uuid.UUID] | None, list[ClaimedMessage]]:
    """Ack the checked pairs, then claim: (the ids that landed, or None when
    all did; the messages claimed)."""
    n, timeout = _claim_args(collection, worker_id, n, visibility_timeout)
    if connection.vendor != "postgresql" or n <= 0 or not pairs:
        landed = _ack_landed(collection, pairs)
        return landed, _claim_rounds(collection, worker_id, n, timeout, [], CLAIM_ROUNDS)
    now = clock.now()
    params = {"collection_id": collection.pk, "now": now, "n": min(n, MAX_CLAIM),
              "worker_id": worker_id, "lease_expires_at": now + timedelta(seconds=timeout),
              "async_commit": False, "pairs": len(pairs)}  # fmt: skip
    if len(pairs) == 1:
        query = sql.ACK_AND_CLAIM_POSTGRES
        params["id"], params["token"] = pairs[0]
    else:
        query = sql.ACK_BATCH_AND_CLAIM_POSTGRES
        params.update(_ack_arrays(pairs))
    with sql.cursor() as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
    count = next(row[1] for row in rows if row[0] == "acked")
    landed = None if count == len(pairs) else {row[2] for row in rows if row[0] == "landed"}
    claimed, died = _claimed_rows([row for row in rows if row[0] in _CLAIM_OUTCOMES])
    if died:
        claimed = _claim_rounds(collection, worker_id, n, timeout, claimed, CLAIM_ROUNDS - 1)
    return landed, claimed


def _claim_round(
    collection: Collection, worker_id: str, n: int, timeout: int
) -> tuple[list[ClaimedMessage], int]:
    """One claim round: (claimed messages in claim order, candidates killed)."""
    now = clock.now()
    lease = now + timedelta(seconds=timeout)
    if connection.vendor == "postgresql":
        return _claim_postgres(collection, worker_id, n, now, lease)
    return _claim_portable(collection, worker_id, n, now, lease)


_CLAIM_COLUMNS = (
    "state", "seq", "id", "collection_id", "payload", "priority", "attempt", "max_attempts",
    "claim_token", "claimed_by", "lease_expires_at", "enqueued_at", "deliver_after",
    "expires_at", "enqueued_by", "last_error",
)  # fmt: skip


def _claim_order(m: ClaimedMessage) -> tuple[int, datetime, int]:
    """Sort key of claimed messages: priority DESC, then ready time, then
    enqueue order (the claim statements do not return rows in order)."""
    return (-m.priority, m.deliver_after, m.seq)


def _claimed(rows: list[dict[str, Any]]) -> list[ClaimedMessage]:
    """Rows of claimed messages as ClaimedMessage, in claim order."""
    out = []
    for row in rows:
        del row["state"]
        out.append(ClaimedMessage(**row))
    out.sort(key=_claim_order)
    return out


def _claim_postgres(
    collection: Collection, worker_id: str, n: int, now: datetime, lease: datetime
) -> tuple[list[ClaimedMessage], int]:
    settings = product_settings()
    # Asynchronous commit only for the claim's own (autocommit) transaction.
    async_commit = settings.queue_async_commit_claims and not connection.in_atomic_block
    params = {"collection_id": collection.pk, "now": now, "n": n, "worker_id": worker_id,
              "lease_expires_at": lease, "async_commit": async_commit}  # fmt: skip
    with sql.cursor(settings) as cur:
        cur.execute(sql.CLAIM_POSTGRES, params)
        return _claimed_rows(cur.fetchall())


def _claimed_rows(rows: list[tuple[Any, ...]]) -> tuple[list[ClaimedMessage], int]:
    """The rows of a PostgreSQL claim (columns as _CLAIM_COLUMNS): (the claimed
    messages in claim order, how many candidates died instead). Rows stay
    tuples; the payloads are decoded in one call as one JSON array."""
    claimed = [r for r in rows if r[0] == MessageState.CLAIMED]
    payloads = json.loads("[" + ",".join([r[4] for r in claimed]) + "]")
    out = [
        _new(ClaimedMessage, (r[2], r[3], payload, *r[5:], r[1]))
        for r, payload in zip(claimed, payloads, strict=True)
    ]
    out.sort(key=_claim_order)
    return out, len(rows) - len(claimed)


# What a claim does to a candidate (the ``state`` column of its rows).
_CLAIM_OUTCOMES = frozenset({"claimed", "dead"})  # str: an enum member hashes by name


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _new(cls: type[T], values: Iterable[Any]) -> T:
    """An instance of a frozen dataclass from its field values in order,
    without the generated ``__init__``, which sets every field through
    ``object.__setattr__`` (3.3 vs 1.2 µs for a ClaimedMessage; a batch of 100
    makes 100). Only for values the caller knows to be complete and typed."""
    obj = object.__new__(cls)
    obj.__dict__.update(zip(_field_names(cls), values, strict=True))
    return obj


def _claim_portable(
    collection: Collection, worker_id: str, n: int, now: datetime, lease: datetime
) -> tuple[list[ClaimedMessage], int]:
    """The ORM claim (SQLite): the IMMEDIATE transaction holds the database's
    write lock from BEGIN, so reading candidates and updating them cannot race
    another writer; every UPDATE is still fenced by the state it expects."""
    with transaction.atomic():
        if Collection.objects.filter(pk=collection.pk, paused=True).exists():
            return [], 0
        candidates = _candidates(collection, n, now)
        died = _kill_candidates(candidates, now)
        take = {c["seq"]: uuid.uuid4() for c in candidates if c["seq"] not in died}
        if not take:
            return [], len(died)
        ops = connection.ops
        at, until = ops.adapt_datetimefield_value(now), ops.adapt_datetimefield_value(lease)
        with connection.cursor() as cur:
            cur.executemany(sql.CLAIM_ROW_SQLITE, [
                (token.hex, worker_id, at, until, seq) for seq, token in take.items()
            ])  # fmt: skip
        rows = list(Message.objects.filter(seq__in=list(take)).values(*_CLAIM_COLUMNS))
    return _claimed(rows), len(died)


def _candidates(collection: Collection, n: int, now: datetime) -> list[dict[str, Any]]:
    """The first n claimable rows in claim order: due ready rows and claimed
    rows with a lapsed lease, each read through its own partial index."""
    fields = ("seq", "priority", "deliver_after", "expires_at", "attempt", "max_attempts")
    qs = Message.objects.of(collection).in_claim_order()
    rows = list(qs.due(now).values(*fields)[:n]) + list(qs.lease_lapsed(now).values(*fields)[:n])
    rows.sort(key=lambda r: (-r["priority"], r["deliver_after"], r["seq"]))
    return rows[:n]


def _kill_candidates(candidates: list[dict[str, Any]], now: datetime) -> set[int]:
    """Move expired candidates to dead ``expired`` and those out of attempts to
    dead ``exhausted``; returns their seqs."""
    expired = {c["seq"] for c in candidates if c["expires_at"] and c["expires_at"] <= now}
    exhausted = {
        c["seq"] for c in candidates
        if c["seq"] not in expired and c["attempt"] >= c["max_attempts"]
    }  # fmt: skip
    for seqs, reason in ((expired, DeadReason.EXPIRED), (exhausted, DeadReason.EXHAUSTED)):
        if seqs:
            Message.objects.filter(seq__in=seqs, state__in=LIVE_STATES).update(**_dead(reason, now))
    return expired | exhausted


def _dead(reason: str, now: datetime) -> dict[str, Any]:
    """The fields of a message that dies now for ``reason``."""
    return {
        "state": MessageState.DEAD, "dead_reason": reason, "died_at": now, "claim_token": None,
        "claimed_by": "", "claimed_at": None, "lease_expires_at": None,
    }  # fmt: skip


_UNCLAIMED: dict[str, Any] = {
    "claim_token": None, "claimed_by": "", "claimed_at": None, "lease_expires_at": None,
}  # fmt: skip


# ------------------------------------------------- actions of the claim holder


def _held(collection: Collection, id: Any, claim_token: Any, now: datetime):  # type: ignore[no-untyped-def]
    """The fence of every holder action: this collection, claimed with that token,
    lease not lapsed."""
    return Message.objects.of(collection).held(
        id=check.check_uuid(id, "id"), claim_token=check.check_uuid(claim_token, "claim_token"),
        now=now,
    )  # fmt: skip


def _lease_lost(id: Any) -> err.LeaseLost:
    return err.LeaseLost(details={"id": str(id)})


def message_ack(
    *, collection: Collection, id: uuid.UUID | str, claim_token: uuid.UUID | str
) -> None:
    """Delete the message: only while claimed with that token and the lease has
    not lapsed (one DELETE). Raises LeaseLost (409) otherwise, e.g. on a second
    ack, a stale token after a reclaim, or after a cancel."""
    now = clock.now()
    if connection.vendor == "postgresql":
        params = {"id": check.check_uuid(id, "id"), "collection_id": collection.pk, "now": now,
                  "token": check.check_uuid(claim_token, "claim_token")}  # fmt: skip
        with sql.cursor() as cur:
            cur.execute(sql.ACK_POSTGRES, params)
            deleted = cur.rowcount
    else:
        deleted, _ = _held(collection, id, claim_token, now).delete()
    if not deleted:
        raise _lease_lost(id)


def message_ack_batch(
    *, collection: Collection, acks: Sequence[tuple[uuid.UUID | str, uuid.UUID | str]]
) -> AckBatchResult:
    """Ack many (id, claim_token) pairs in one statement (PostgreSQL) or one
    transaction (SQLite). Never raises for a lost lease: each entry says whether
    it landed (reason ``lease_lost`` if not); ``acked`` counts those that did.
    At most 500 pairs (InvalidQueueInput)."""
    pairs = _ack_pairs(acks)
    return _ack_batch_result(pairs, _ack_landed(collection, pairs))


def _ack_pairs(
    acks: Sequence[tuple[uuid.UUID | str, uuid.UUID | str]],
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """The (id, claim_token) pairs of a batch ack, checked."""
    if len(acks) > MAX_ACK_BATCH:
        raise err.InvalidQueueInput.field("acks", f"Give at most {MAX_ACK_BATCH} acks.")
    return [
        (i if type(i) is uuid.UUID else check.check_uuid(i, "id"),
         t if type(t) is uuid.UUID else check.check_uuid(t, "claim_token"))
        for i, t in acks
    ]  # fmt: skip


def _ack_landed(
    collection: Collection, pairs: list[tuple[uuid.UUID, uuid.UUID]]
) -> set[uuid.UUID] | None:
    """Ack the checked pairs: the ids that landed, or None when all did."""
    if not pairs:
        return None
    now = clock.now()
    if connection.vendor == "postgresql":
        return _ack_batch_postgres(collection, pairs, now)
    return _ack_batch_portable(collection, pairs, now)


def _ack_batch_result(
    pairs: list[tuple[uuid.UUID, uuid.UUID]], landed: set[uuid.UUID] | None
) -> AckBatchResult:
    """The answer to a batch ack; ``landed`` None means every pair landed."""
    if landed is None:
        return AckBatchResult(len(pairs), [_new(AckResult, (i, True, None)) for i, _ in pairs])
    results = [
        _new(AckResult, (i, True, None) if i in landed else (i, False, "lease_lost"))
        for i, _ in pairs
    ]  # fmt: skip
    return AckBatchResult(len(landed), results)


def _ack_arrays(pairs: list[tuple[uuid.UUID, uuid.UUID]]) -> dict[str, str]:
    """The pairs as the ``ids`` and ``tokens`` uuid[] literals of
    ``sql.ACK_BATCH_POSTGRES``: psycopg's per-element array dumping was a fifth
    of a batch ack in Python."""
    return {"ids": _uuid_array([i for i, _ in pairs]),
            "tokens": _uuid_array([t for _, t in pairs])}  # fmt: skip


def _uuid_array(values: list[uuid.UUID]) -> str:
    """A uuid[] literal (32 hex digits each: PostgreSQL reads them without
    dashes; formatting the int is 3x cheaper than ``str``)."""
    return "{" + ",".join([f"{v.int:032x}" for v in values]) + "}"


def _ack_batch_postgres(
    collection: Collection, pairs: list[tuple[uuid.UUID, uuid.UUID]], now: datetime
) -> set[uuid.UUID] | None:
    """The ids that landed, or None when all did (the DELETE removed as many
    rows as there are pairs: every pair was distinct and held)."""
    params = {"collection_id": collection.pk, "now": now, **_ack_arrays(pairs)}
    with sql.cursor() as cur:
        cur.execute(sql.ACK_BATCH_POSTGRES, params)
        if cur.rowcount == len(pairs):
            return None
        return {row[0] for row in cur.fetchall()}


def _ack_batch_portable(
    collection: Collection, pairs: list[tuple[uuid.UUID, uuid.UUID]], now: datetime
) -> set[uuid.UUID]:
    """SQLite: one DELETE … RETURNING of the pairs still held."""
    query = sql.ACK_BATCH_SQLITE.format(
        ids=", ".join(["%s"] * len(pairs)), pairs=", ".join(["(%s, %s)"] * len(pairs))
    )
    params: list[Any] = [i.hex for i, _ in pairs]
    params += [collection.pk, connection.ops.adapt_datetimefield_value(now)]
    for message_id, token in pairs:
        params += [message_id.hex, token.hex]
    with connection.cursor() as cur:
        cur.execute(query, params)
        return {uuid.UUID(row[0]) for row in cur.fetchall()}


def _backoff_deliver_after(collection: Collection, now: datetime) -> Case:
    """deliver_after for a retry by attempt: now + min(cap, base * 2^(attempt-1)),
    times one jitter factor in [0.5, 1] ("equal jitter"), as a CASE over the
    attempt so the UPDATE stays one statement on both databases."""
    jitter = random.uniform(0.5, 1.0)
    base, cap = collection.retry_backoff_base, collection.retry_backoff_max
    whens, attempt = [], 1
    while base * 2 ** (attempt - 1) < cap and attempt < 64:
        delay = base * 2 ** (attempt - 1) * jitter
        whens.append(When(attempt__lte=attempt, then=Value(now + timedelta(seconds=delay))))
        attempt += 1
    return Case(
        *whens, default=Value(now + timedelta(seconds=cap * jitter)), output_field=DateTimeField()
    )


def _holder_update(
    collection: Collection, message_id: Any, token: Any, now: datetime, /, **changes: Any
) -> Message:
    """Apply ``changes`` to a held message (one fenced UPDATE) and return it;
    LeaseLost when the caller no longer holds it."""
    with transaction.atomic():
        if not _held(collection, message_id, token, now).update(**changes):
            raise _lease_lost(message_id)
        return Message.objects.get(collection_id=collection.pk, id=message_id)


def message_nack(
    *,
    collection: Collection,
    id: uuid.UUID | str,
    claim_token: uuid.UUID | str,
    delay_seconds: float | None = None,
    error: str | None = None,
) -> Message:
    """Give the message back for a retry: ready again at now + ``delay_seconds``
    (0 = at once; None = the collection's backoff for this attempt), with
    ``error`` as last_error; out of attempts (attempt ≥ max_attempts) it
    becomes dead ``exhausted`` instead. Wakes consumers. Returns the message.
    Raises LeaseLost, InvalidQueueInput."""
    now = clock.now()
    if delay_seconds is None:
        deliver_after: Any = _backoff_deliver_after(_fresh(collection), now)
    else:
        deliver_after = now + timedelta(seconds=check.check_seconds(delay_seconds, "delay_seconds"))
    with transaction.atomic():
        message = _holder_update(
            collection, id, claim_token, now, **_UNCLAIMED, **_retry_or_die(now),
            deliver_after=deliver_after, last_error=check.check_error_text(error),
        )  # fmt: skip
        if message.state == MessageState.READY:
            _wake(collection)
    return message


def _retry_or_die(now: datetime) -> dict[str, Case]:
    """Fields of a message given back: ready again, or dead ``exhausted`` when
    it has used all its attempts (decided in the UPDATE itself)."""
    out = Q(attempt__gte=F("max_attempts"))
    return {
        "state": Case(When(out, then=Value(MessageState.DEAD)), default=Value(MessageState.READY)),
        "dead_reason": Case(When(out, then=Value(DeadReason.EXHAUSTED)), default=None),
        "died_at": Case(When(out, then=Value(now)), default=None, output_field=DateTimeField()),
    }


def _fresh(collection: Collection) -> Collection:
    """The collection's current backoff settings (a worker may hold an old copy)."""
    return Collection.objects.only("retry_backoff_base", "retry_backoff_max").get(pk=collection.pk)


def message_fail(
    *, collection: Collection, id: uuid.UUID | str, claim_token: uuid.UUID | str, error: str
) -> Message:
    """Kill the message now: dead ``failed`` with ``error`` as last_error.
    Raises LeaseLost when the caller no longer holds it."""
    now = clock.now()
    return _holder_update(
        collection, id, claim_token, now, **_dead(DeadReason.FAILED, now),
        last_error=check.check_error_text(error),
    )  # fmt: skip


def message_extend(
    *,
    collection: Collection,
    id: uuid.UUID | str,
    claim_token: uuid.UUID | str,
    visibility_timeout: int,
) -> Message:
    """Heartbeat: the lease now ends ``visibility_timeout`` seconds from now.
    Only while the caller still holds an unexpired claim, so a late heartbeat
    never takes a message back from a new holder. Raises LeaseLost,
    InvalidQueueInput."""
    seconds = check.check_int(
        visibility_timeout, "visibility_timeout",
        low=check.VISIBILITY_TIMEOUT_MIN, high=check.VISIBILITY_TIMEOUT_MAX,
    )  # fmt: skip
    now = clock.now()
    return _holder_update(
        collection, id, claim_token, now, lease_expires_at=now + timedelta(seconds=seconds)
    )


def message_release(
    *, collection: Collection, id: uuid.UUID | str, claim_token: uuid.UUID | str
) -> Message:
    """Give a claim back without counting the attempt (graceful shutdown): ready
    again at once in its old place, attempt back to what it was before the
    claim. Wakes consumers. Raises LeaseLost."""
    now = clock.now()
    with transaction.atomic():
        message = _holder_update(
            collection, id, claim_token, now, **_UNCLAIMED,
            state=MessageState.READY, attempt=F("attempt") - 1,
        )  # fmt: skip
        _wake(collection)
    return message


def message_cancel(*, collection: Collection, id: uuid.UUID | str) -> bool:
    """Delete a ready or claimed message whoever holds it (one DELETE); the
    holder's next ack/extend answers lease_lost. Dead messages are not touched.
    Returns whether a live message was removed."""
    try:
        message_id = check.check_uuid(id, "id")
    except err.InvalidQueueInput:
        return False
    deleted, _ = Message.objects.of(collection).live().filter(id=message_id).delete()
    return bool(deleted)


# --------------------------------------------------------------- maintenance


def _scope(collection: Collection | None):  # type: ignore[no-untyped-def]
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
        count = (
            Message.objects.of(collection)
            .lease_lapsed(now)
            .update(**_UNCLAIMED, **_retry_or_die(now))
        )
        if count:
            _wake(collection)
    return count


# How far below the computed claim floor claims start: covers clocks apart
# and enqueues committing up to this long after they read the time.
CLAIM_FLOOR_MARGIN = timedelta(seconds=2)


def collections_refresh_claim_floors() -> int:
    """Recompute the claim floor of every queue collection (PostgreSQL; one
    short UPDATE each, in autocommit; ``sql.CLAIM_FLOOR_POSTGRES``), so that
    claims skip the dead index entries below it. A maintenance step: a floor
    older than ``sql.FLOOR_FRESH_SECONDS`` is ignored by claims. Returns how
    many collections; 0 on SQLite (its claims use no floor)."""
    if connection.vendor != "postgresql":
        return 0
    ids = list(Collection.objects.queues().values_list("pk", flat=True))
    with connection.cursor() as cur:
        for pk in ids:
            params = {"collection_id": pk, "now": clock.now(), "margin": CLAIM_FLOOR_MARGIN}
            cur.execute(sql.CLAIM_FLOOR_POSTGRES, params)
    return len(ids)


def messages_sweep_expired(*, collection: Collection | None = None) -> SweepResult:
    """Live messages past ``expires_at`` become dead ``expired`` (one UPDATE);
    then dead messages past their collection's ``dead_retention`` are deleted
    (``messages_prune_dead``). All collections when ``collection`` is None."""
    now = clock.now()
    live = _scope(collection).live().filter(expires_at__lte=now)
    expired = live.update(**_dead(DeadReason.EXPIRED, now))
    return SweepResult(expired, messages_prune_dead(collection=collection))


def messages_prune_dead(*, collection: Collection | None = None) -> int:
    """Delete dead messages that died more than ``dead_retention`` ago, in
    chunks of 5,000 rows (one short DELETE each). Returns how many."""
    now = clock.now()
    collections = [collection] if collection is not None else Collection.objects.queues()
    total = 0
    for c in collections:
        old = (
            Message.objects.of(c)
            .dead()
            .filter(died_at__lte=now - timedelta(seconds=c.dead_retention))
        )
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
    now = clock.now()
    ready = _scope(collection).ready().filter(attempt__gte=F("max_attempts"))
    return ready.update(**_dead(DeadReason.EXHAUSTED, now))


def messages_redrive(
    *, collection: Collection, ids: Sequence[uuid.UUID | str] | None = None, all: bool = False
) -> int:
    """Dead messages (the given ``ids``, or every one with ``all=True``) become
    ready at once with attempt 0; last_error is kept. One UPDATE fenced by the
    dead state; wakes consumers. Returns how many."""
    if (ids is None) == (not all):
        raise err.InvalidQueueInput.field("ids", "Give ids or all=True (one of them).")
    dead = Message.objects.of(collection).dead()
    if ids is not None:
        dead = dead.filter(id__in=[check.check_uuid(i, "ids") for i in ids])
    with transaction.atomic():
        count = dead.update(
            state=MessageState.READY, attempt=0, deliver_after=clock.now(), dead_reason=None,
            died_at=None,
        )  # fmt: skip
        if count:
            _wake(collection)
    return count


def collection_purge(*, collection: Collection, include_dead: bool = False) -> int:
    """Delete every ready message of the collection (and the dead ones with
    ``include_dead``); claimed messages are left to their holders. One DELETE.
    Returns how many."""
    states = [MessageState.READY, MessageState.DEAD] if include_dead else [MessageState.READY]
    deleted, _ = Message.objects.of(_queue(collection)).filter(state__in=states).delete()
    return deleted


# ------------------------------------------------------------ long-poll claim


def message_claim_waiting(
    *,
    collection: Collection,
    worker_id: str,
    n: int = 1,
    visibility_timeout: int | None = None,
    wait_seconds: float = 0.0,
) -> list[ClaimedMessage]:
    """``message_claim``, but when nothing is claimable wait up to
    ``wait_seconds`` (real time) for a wake-up on the collection's channel
    (enqueue, nack, release and redrive notify it; SQLite polls) and try again;
    [] at the deadline. It subscribes before the first attempt, so a message
    enqueued in between is not missed. No transaction is held while waiting and,
    on PostgreSQL, the connection is closed meanwhile (an idle long poll holds
    no database connection). Call it outside a transaction."""

    def attempt() -> list[ClaimedMessage]:
        return message_claim(
            collection=collection, worker_id=worker_id, n=n, visibility_timeout=visibility_timeout
        )

    if wait_seconds <= 0 or n <= 0:
        return attempt()
    deadline = time.monotonic() + wait_seconds
    with notify.subscribe(collection.wake_channel) as subscription:
        while True:
            claimed = attempt()
            remaining = deadline - time.monotonic()
            if claimed or remaining <= 0:
                return claimed
            if connection.vendor == "postgresql" and not connection.in_atomic_block:
                connection.close()
            subscription.wait(remaining)
