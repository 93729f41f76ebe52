"""The PostgreSQL-only paths of the group-queue services: each runs one
statement of ``groupqueues.sql`` through ``rawsql.cursor()`` and turns its rows
into the services' results. The callers choose them by
``connection.vendor``; SQLite has a portable twin beside each caller."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from django.db import connection

from groupqueues import sql
from groupqueues import validation as check
from groupqueues.models import Collection, Message, MessageState, claim_order_key
from groupqueues.services.claim_floor import claim_floor_advance_if_due
from groupqueues.services.collections import collection_gone
from groupqueues.services.types import ClaimedMessage, EnqueueResult, PreparedMessage, frozen_new
from queueproject import rawsql
from queueproject.conf import ProductSettings, product_settings

# What a claim does to a candidate (the ``state`` column of its rows).
CLAIM_OUTCOMES = frozenset({"claimed", "dead"})  # str: an enum member hashes by name

_claim_order = claim_order_key("attr")


def uuid_array(values: list[uuid.UUID]) -> str:
    """A uuid[] literal (32 hex digits each: PostgreSQL reads them without
    dashes; formatting the int is cheaper than ``str``)."""
    return "{" + ",".join([f"{v.int:032x}" for v in values]) + "}"


def ack_arrays(pairs: list[tuple[uuid.UUID, uuid.UUID]]) -> dict[str, str]:
    """The pairs as the ``ids`` and ``tokens`` uuid[] literals of
    ``sql.ACK_BATCH_POSTGRES``: psycopg's per-element array dumping was a
    large share of a batch ack's Python (bench/README.md)."""
    return {"ids": uuid_array([i for i, _ in pairs]),
            "tokens": uuid_array([t for _, t in pairs])}  # fmt: skip


# ------------------------------------------------------------------- enqueue


def enqueue_rows(
    collection: Collection,
    rows: list[PreparedMessage],
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
    query = _enqueue_query(collection, rows, params, now=now, payloads=payloads)
    with rawsql.cursor(settings) as cur:
        cur.execute(query, params)
        if cur.rowcount == len(rows):  # all inserted: no need to read the ids back
            return [EnqueueResult(r.id, True) for r in rows]
        inserted = {row[0] for row in cur.fetchall()}
    missing = [r for r in rows if r.id not in inserted]
    holders = Message.objects.of(collection).key_holders([r.idempotency_key for r in missing])
    lost = [r for r in missing if r.idempotency_key not in holders]
    if lost and not Collection.objects.filter(pk=collection.pk).exists():
        raise collection_gone(collection)  # the statement found no collection row
    if lost and retries:  # the holder was deleted meanwhile: the key is free again
        again = enqueue_rows(collection, lost, now=now, enqueued_by=enqueued_by,
                             settings=settings, retries=retries - 1)  # fmt: skip
        holders.update({r.idempotency_key: a.id for r, a in zip(lost, again, strict=True)})
    return [
        EnqueueResult(r.id, True) if r.id in inserted else EnqueueResult(
            holders[r.idempotency_key], False)
        for r in rows
    ]  # fmt: skip


def _enqueue_query(
    collection: Collection, rows: list[PreparedMessage], params: dict[str, Any], *,
    now: datetime, payloads: str | None,
) -> str:  # fmt: skip
    """The statement for these rows (one row: its cheaper single-row form),
    its row parameters added to ``params``."""
    if len(rows) == 1:
        (r,) = rows
        params.update(id=r.id, payload=_payload_text(r), priority=r.priority,
                      deliver_after=r.deliver_after, expires_at=r.expires_at,
                      max_attempts=r.max_attempts, key=r.idempotency_key,
                      ordering_key=r.ordering_key)  # fmt: skip
        return sql.ENQUEUE_ONE_POSTGRES
    default = collection.default_max_attempts
    if payloads is None:
        payloads = "[" + ",".join([_payload_text(r) for r in rows]) + "]"
    params.update(ids=uuid_array([r.id for r in rows]), payloads=payloads,
                  options=_options_json(rows, now, default), max_attempts=default)  # fmt: skip
    return sql.ENQUEUE_POSTGRES


def lock_ordering_keys(collection: Collection, keys: list[str]) -> None:
    """Take the enqueue locks of these ordering keys until commit
    (``sql.KEY_ENQUEUE_LOCK_POSTGRES``; in sorted order: no deadlock)."""
    params: dict[str, Any] = {"collection_id": collection.pk, "keys": sorted(set(keys))}
    with rawsql.cursor() as cur:
        cur.execute(sql.KEY_ENQUEUE_LOCK_POSTGRES, params)


def enqueue_plain(
    collection: Collection,
    ids: list[uuid.UUID],
    payloads: str,
    *,
    now: datetime,
    enqueued_by: str,
    settings: ProductSettings,
) -> list[EnqueueResult]:
    """``enqueue_rows`` for a batch of plain messages whose payloads were
    checked and serialised together: nothing else to check per row (a large
    share of a 500-message batch's Python went to it; bench/README.md).
    Without idempotency keys every row is inserted unless the collection is
    gone."""
    params = _enqueue_params(collection, now=now, enqueued_by=enqueued_by, settings=settings)
    params.update(ids=uuid_array(ids), payloads=payloads,
                  max_attempts=collection.default_max_attempts)  # fmt: skip
    with rawsql.cursor(settings) as cur:
        cur.execute(sql.ENQUEUE_PLAIN_POSTGRES, params)
        ((inserted, _),) = cur.fetchall()
    if inserted != len(ids):
        raise collection_gone(collection)
    return [EnqueueResult(i, True) for i in ids]


def _enqueue_params(
    collection: Collection, *, now: datetime, enqueued_by: str, settings: ProductSettings
) -> dict[str, Any]:
    """The parameters every form of the PostgreSQL enqueue statement takes."""
    return {
        "group_id": collection.group_id, "collection_id": collection.pk, "now": now,
        "enqueued_by": enqueued_by, "channel": collection.wake_channel,
        "wake": settings.listen_notify_enabled,  # notify.listen_available(), on PostgreSQL
    }  # fmt: skip


def _payload_text(row: PreparedMessage) -> str:
    """The row's payload as JSON text (serialised now if it came with its batch)."""
    return row.payload_json if row.payload_json is not None else check.dumps(row.payload)


def _options_json(rows: list[PreparedMessage], now: datetime, default_max_attempts: int) -> str:
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
        if r.ordering_key is not None:
            extra.append(f'"ok":{json.dumps(r.ordering_key)}')
        parts.append("{" + ",".join(extra) + "}" if extra else "{}")
    return "[" + ",".join(parts) + "]"


# --------------------------------------------------------------------- claim


def claim(
    collection: Collection, worker_id: str, n: int, now: datetime, lease: datetime
) -> tuple[list[ClaimedMessage], int]:
    """One claim round in one statement (``sql.CLAIM_POSTGRES``): (claimed
    messages in claim order, candidates killed instead)."""
    settings = product_settings()
    # Asynchronous commit only for the claim's own (autocommit) transaction.
    async_commit = settings.queue_async_commit_claims and not connection.in_atomic_block
    params: dict[str, Any] = {"collection_id": collection.pk, "now": now, "n": n,
                              "worker_id": worker_id, "lease_expires_at": lease,
                              "async_commit": async_commit}  # fmt: skip
    with rawsql.cursor(settings) as cur:
        cur.execute(sql.CLAIM_POSTGRES, params)
        rows = cur.fetchall()
    claim_floor_advance_if_due(collection.pk)
    return claimed_from_rows(rows)


def claimed_from_rows(rows: list[tuple[Any, ...]]) -> tuple[list[ClaimedMessage], int]:
    """The rows of a PostgreSQL claim (columns as its RETURNING): (the claimed
    messages in claim order, how many candidates died instead). Rows stay
    tuples; the payloads are decoded in one call as one JSON array."""
    claimed = [r for r in rows if r[0] == MessageState.CLAIMED]
    payloads = json.loads("[" + ",".join([r[4] for r in claimed]) + "]")
    out = [
        frozen_new(ClaimedMessage, (r[2], r[3], payload, *r[5:], r[1]))
        for r, payload in zip(claimed, payloads, strict=True)
    ]
    out.sort(key=_claim_order)
    return out, len(rows) - len(claimed)


def ack_and_claim(
    collection: Collection,
    pairs: list[tuple[uuid.UUID, uuid.UUID]],
    *,
    worker_id: str,
    n: int,
    now: datetime,
    lease: datetime,
) -> tuple[set[tuple[uuid.UUID, uuid.UUID]] | None, list[ClaimedMessage], int]:
    """Ack the distinct checked pairs and claim up to ``n`` in ONE statement
    (``sql.ACK_AND_CLAIM_POSTGRES`` / ``ACK_BATCH_AND_CLAIM_POSTGRES``): (the
    pairs that landed, or None when all did; the claimed; how many died)."""
    params: dict[str, Any] = {"collection_id": collection.pk, "now": now, "n": n,
                              "worker_id": worker_id, "lease_expires_at": lease,
                              "async_commit": False, "pairs": len(pairs)}  # fmt: skip
    if len(pairs) == 1:
        query = sql.ACK_AND_CLAIM_POSTGRES
        params["id"], params["token"] = pairs[0]
    else:
        query = sql.ACK_BATCH_AND_CLAIM_POSTGRES
        params.update(ack_arrays(pairs))
    with rawsql.cursor() as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
    claim_floor_advance_if_due(collection.pk)
    count = next(row[1] for row in rows if row[0] == "acked")
    landed = (
        None if count == len(pairs) else {(row[2], row[8]) for row in rows if row[0] == "landed"}
    )
    claimed, died = claimed_from_rows([row for row in rows if row[0] in CLAIM_OUTCOMES])
    return landed, claimed, died


# ----------------------------------------------------------------------- ack


def ack(collection: Collection, message_id: uuid.UUID, token: uuid.UUID, now: datetime) -> int:
    """Delete the message if held with that token (``sql.ACK_POSTGRES``):
    how many rows went (0 or 1)."""
    params = {"id": message_id, "collection_id": collection.pk, "now": now, "token": token}
    return rawsql.execute(sql.ACK_POSTGRES, params)


def ack_batch(
    collection: Collection, pairs: list[tuple[uuid.UUID, uuid.UUID]], now: datetime
) -> set[tuple[uuid.UUID, uuid.UUID]] | None:
    """Delete the held ones of these distinct pairs (``sql.ACK_BATCH_POSTGRES``):
    the (id, token) pairs that landed, or None when all did (as many rows as
    pairs)."""
    params: dict[str, Any] = {"collection_id": collection.pk, "now": now, **ack_arrays(pairs)}
    with rawsql.cursor() as cur:
        cur.execute(sql.ACK_BATCH_POSTGRES, params)
        if cur.rowcount == len(pairs):
            return None
        return {(row[0], row[1]) for row in cur.fetchall()}
