"""Enqueue: validate new messages and insert them, one or a batch, in one
transaction (one statement on PostgreSQL when the queue has no max_depth)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import JSONField, Value

from groupqueues import exceptions as err
from groupqueues import tally
from groupqueues import validation as check
from groupqueues.models import Collection, Fairness, Message, new_message_ids
from groupqueues.services import postgres
from groupqueues.services.collections import (
    collection_gone,
    collection_require_queue,
    collection_wake,
)
from groupqueues.services.types import MAX_BATCH, EnqueueResult, NewMessage, PreparedMessage
from queueproject import clock
from queueproject.conf import product_settings


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
    ordering_key: str | None = None,
    on_conflict: str | None = None,
    debounce_seconds: float | None = None,
) -> EnqueueResult:
    """Insert one ready message (a paused collection still accepts) and wake
    consumers. Raises InvalidQueueInput (400), MessageTooLarge (413), QueueFull
    (429, only when the collection has max_depth: the collection row is then
    locked for the count), CollectionNotFound for non-queue kinds.
    ``ordering_key``: messages of one key are handed out one at a time, in
    enqueue order (SPEC §7). ``on_conflict="replace"`` (needs an
    ``idempotency_key``): a waiting (ready) message holding the key takes this
    payload, priority, expiry and max_attempts in its place (id, enqueue order
    and ordering key kept; ``replaced`` True); ``debounce_seconds``: the
    message (new or replaced) becomes due that long from now."""
    new = NewMessage(
        payload, priority, delay_seconds, deliver_after, expires_in_seconds, expires_at,
        max_attempts, idempotency_key, ordering_key, on_conflict, debounce_seconds,
    )  # fmt: skip
    results = _enqueue(collection, [new], enqueued_by=enqueued_by, batch=False)
    tally.count(collection.pk, enqueued=sum(r.created for r in results))  # history
    return results[0]


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
    results = _enqueue(collection, messages, enqueued_by=enqueued_by, batch=True)
    tally.count(collection.pk, enqueued=sum(r.created for r in results))  # history
    return results


def _enqueue(
    collection: Collection, messages: Sequence[NewMessage], *, enqueued_by: str, batch: bool
) -> list[EnqueueResult]:
    """Validate every message, then insert them all in one transaction (one
    statement on PostgreSQL when the collection has no max_depth)."""
    collection_require_queue(collection)
    enqueued_by = check.check_text(enqueued_by, "enqueued_by", low=0, high=200)
    now = clock.now()
    settings = product_settings()  # read once: it is a dozen settings lookups
    max_depth = settings.json_max_depth
    pg = connection.vendor == "postgresql"
    payloads = None  # a batch's payloads serialised in one call, when they allow it
    if pg and len(messages) > 1:
        payloads = check.payloads_json([new.payload for new in messages], max_depth=max_depth,
                                       max_bytes=collection.max_payload_bytes)  # fmt: skip
    ids = new_message_ids(len(messages))
    if (
        payloads is not None
        and collection.max_depth is None
        and not collection.uses_partition_key
        and all(map(_plain, messages))
    ):
        return postgres.enqueue_plain(collection, ids, payloads, now=now,
                                      enqueued_by=enqueued_by, settings=settings)  # fmt: skip
    rows = [
        _prepare(collection, new, id=ids[i], now=now, max_depth=max_depth, enqueued_by=enqueued_by,
                 index=i if batch else None, payload_checked=payloads is not None)
        for i, new in enumerate(messages)
    ]  # fmt: skip
    keys = [r.ordering_key for r in rows if r.ordering_key is not None]
    replacing = any(r.replace for r in rows)
    if pg and collection.max_depth is None and not keys and not replacing:
        return postgres.enqueue_rows(collection, rows, now=now, enqueued_by=enqueued_by,
                                     settings=settings, payloads=payloads)  # fmt: skip
    with transaction.atomic():
        limit = None
        if collection.max_depth is not None or not pg:
            # Locks the row on PostgreSQL; on SQLite the IMMEDIATE transaction
            # already holds the write lock, and the read makes sure the
            # collection still exists (no foreign key checks the messages).
            limit = _lock_depth_limit(collection)
        if keys:
            _mark_keyed(collection, keys, pg=pg)
        if pg:
            results = postgres.enqueue_rows(collection, rows, now=now, enqueued_by=enqueued_by,
                                            settings=settings, payloads=payloads)  # fmt: skip
        else:
            results = _insert_portable(collection, rows, now=now, enqueued_by=enqueued_by)
        created = sum(r.created for r in results)
        if limit is not None and created:
            _check_depth(collection, limit, created)
        if replacing:
            results = _replace_waiting(collection, rows, results, now=now)
    return results


def _replace_waiting(
    collection: Collection, rows: list[PreparedMessage], results: list[EnqueueResult], *,
    now: datetime,
) -> list[EnqueueResult]:  # fmt: skip
    """For each ``replace`` row that found its idempotency key taken: give the
    holder the row's payload and options if it is still waiting (one UPDATE
    fenced by state ready; a claimed or dead holder is left alone). Keeps the
    holder's id, seq and ordering key, and its ready time unless the row set
    one (a delay, a moment or a debounce)."""
    out = []
    for row, result in zip(rows, results, strict=True):
        if not row.replace or result.created:
            out.append(result)
            continue
        changes: dict[str, Any] = {
            "payload": _json_value(row.payload), "priority": row.priority,
            "expires_at": row.expires_at, "max_attempts": row.max_attempts,
        }  # fmt: skip
        if row.timed:
            changes["deliver_after"] = row.deliver_after
        done = Message.objects.of(collection).ready().filter(id=result.id).update(**changes)
        out.append(EnqueueResult(result.id, False, replaced=bool(done)))
    return out


def _prepare(
    collection: Collection,
    new: NewMessage,
    *,
    id: uuid.UUID,
    now: datetime,
    max_depth: int,
    index: int | None,
    enqueued_by: str = "",
    payload_checked: bool = False,
) -> PreparedMessage:
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
    replace = _check_replace(new, index)
    ordering_key = new.ordering_key
    if ordering_key is not None:
        check.check_text(ordering_key, "ordering_key", low=1, high=check.IDEMPOTENCY_KEY_MAX,
                         index=index)  # fmt: skip
    delay = new.delay_seconds
    if new.debounce_seconds is not None:
        if delay is not None:
            raise err.InvalidQueueInput.field(
                "debounce_seconds", "Give delay_seconds or debounce_seconds, not both.", index=index
            )
        delay = new.debounce_seconds
    due = _when(delay, new.deliver_after,
                "delay_seconds" if new.debounce_seconds is None else "debounce_seconds",
                "deliver_after", now=now, index=index)  # fmt: skip
    return PreparedMessage(
        id, new.payload, text, priority, due or now,
        _when(new.expires_in_seconds, new.expires_at, "expires_in_seconds", "expires_at",
              now=now, index=index),
        max_attempts, key, ordering_key, _partition_key(collection, ordering_key, enqueued_by),
        replace, due is not None,
    )  # fmt: skip


def _check_replace(new: NewMessage, index: int | None) -> bool:
    """Whether the message replaces a waiting holder of its idempotency key."""
    if new.on_conflict is None:
        return False
    if new.on_conflict != "replace":
        raise err.InvalidQueueInput.field("on_conflict", 'Must be "replace".', index=index)
    if new.idempotency_key is None:
        raise err.InvalidQueueInput.field(
            "on_conflict", "Replacing needs an idempotency_key.", index=index
        )
    return True


def _partition_key(
    collection: Collection, ordering_key: str | None, enqueued_by: str
) -> str | None:
    """The message's ``fair_key``: its ordering key ("" without one) when the
    collection's fairness is by ordering key, else its enqueuer; None when the
    collection partitions nothing (the plain path)."""
    if not collection.uses_partition_key:
        return None
    if collection.fairness == Fairness.ORDERING_KEY:
        return ordering_key or ""
    return enqueued_by


def _mark_keyed(collection: Collection, keys: list[str], *, pg: bool) -> None:
    """Before inserting messages with ordering keys (in the caller's
    transaction): on PostgreSQL take their keys' enqueue locks; mark the
    collection as using ordering keys (once; committed with the messages, so a
    claim that sees them also sees the mark and takes the featured path)."""
    if pg:
        postgres.lock_ordering_keys(collection, keys)
    if not collection.uses_ordering_keys:
        Collection.objects.filter(pk=collection.pk, uses_ordering_keys=False).update(
            uses_ordering_keys=True
        )
        collection.uses_ordering_keys = True


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


def _plain(new: NewMessage) -> bool:
    """No option set: the message takes every default (most batches)."""
    return (
        new.priority == 0 and type(new.priority) is int and new.delay_seconds is None
        and new.deliver_after is None and new.expires_in_seconds is None
        and new.expires_at is None and new.max_attempts is None and new.idempotency_key is None
        and new.ordering_key is None and new.on_conflict is None and new.debounce_seconds is None
    )  # fmt: skip


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
        raise collection_gone(collection)
    return found[0]


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


def _json_value(payload: Any) -> Any:
    """A payload for the ORM: a bare None would be stored as SQL NULL, not JSON null."""
    return Value(None, output_field=JSONField()) if payload is None else payload


def _insert_portable(
    collection: Collection, rows: list[PreparedMessage], *, now: datetime, enqueued_by: str
) -> list[EnqueueResult]:
    """The ORM insert (SQLite), inside the caller's IMMEDIATE transaction, which
    holds the write lock: a key's holder read here cannot change before the
    INSERT. Runs of rows are inserted with one bulk INSERT each, in order."""
    results: list[EnqueueResult] = []
    plain: list[Message] = []
    keys = [r.idempotency_key for r in rows if r.idempotency_key is not None]
    taken = Message.objects.of(collection).key_holders(keys)
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
            ordering_key=row.ordering_key, fair_key=row.fair_key,
        ))  # fmt: skip
        results.append(EnqueueResult(row.id, True))
    Message.objects.bulk_create(plain)
    if plain:
        collection_wake(collection)
    return results
