"""Who may claim: hand out claimable messages in claim order, alone, after an
ack (ack-and-claim), or waiting for a wake-up (long poll).

Claimable: ready and due, or claimed with a lapsed lease. Each message goes
to exactly one claimer at a time (SKIP LOCKED on PostgreSQL, the IMMEDIATE
write lock on SQLite). Expired candidates and those out of attempts die
instead of being handed out."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction

from groupqueues import sql, tally
from groupqueues import validation as check
from groupqueues.models import (
    LIVE_STATES,
    Collection,
    DeadReason,
    Message,
    claim_order_key,
)
from groupqueues.services import postgres
from groupqueues.services.claim_features import FEATURE_FIELDS, claim_featured, feature_state
from groupqueues.services.collections import collection_require_queue
from groupqueues.services.holder import (
    Landed,
    Pairs,
    ack_batch_result,
    ack_pairs_apply,
    ack_pairs_checked,
    ack_pairs_distinct,
)
from groupqueues.services.types import (
    MAX_CLAIM,
    AckAndClaimResult,
    AckBatchAndClaimResult,
    ClaimedMessage,
)
from queueproject import clock, notify, rawsql

# A claim that found only dead candidates tries again this often before
# answering with what it has (so a worker is not told "empty" too early).
CLAIM_ROUNDS = 5

_CLAIM_COLUMNS = (
    "state", "seq", "id", "collection_id", "payload", "priority", "attempt", "max_attempts",
    "claim_token", "claimed_by", "lease_expires_at", "enqueued_at", "deliver_after",
    "expires_at", "enqueued_by", "last_error",
)  # fmt: skip
_claim_order = claim_order_key("attr")
_candidate_order = claim_order_key("item")


def message_claim(
    *,
    collection: Collection,
    worker_id: str,
    n: int = 1,
    visibility_timeout: int | None = None,
) -> list[ClaimedMessage]:
    """Hand out up to ``n`` (capped at 100) claimable messages in claim order
    (``models.CLAIM_ORDER``: priority DESC, ready time ASC, enqueue order ASC):
    ready and due, or claimed with a lapsed lease. Each gets a fresh claim
    token, ``claimed_by``, a lease of ``visibility_timeout`` seconds (default:
    the collection's) and attempt + 1. Expired candidates become dead
    ``expired`` and those out of attempts dead ``exhausted`` instead of being
    handed out. ``n <= 0`` and a paused collection answer []. Each message goes
    to exactly one claimer at a time (SKIP LOCKED on PostgreSQL, the IMMEDIATE
    write lock on SQLite). PostgreSQL: one statement per round (see
    ``sql.CLAIM_POSTGRES``). Raises InvalidQueueInput (worker_id, n,
    visibility_timeout)."""
    n, timeout = _claim_args(collection, worker_id, n, visibility_timeout)
    return _claim_rounds(collection, worker_id, n, timeout, [], CLAIM_ROUNDS)


def _claim_args(
    collection: Collection, worker_id: str, n: Any, visibility_timeout: Any
) -> tuple[int, int]:
    """The claim's checked arguments: (n, lease seconds)."""
    collection_require_queue(collection)
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


def _claim_round(
    collection: Collection, worker_id: str, n: int, timeout: int
) -> tuple[list[ClaimedMessage], int]:
    """One claim round: (claimed messages in claim order, candidates killed)."""
    now = clock.now()
    lease = now + timedelta(seconds=timeout)
    if connection.vendor != "postgresql":
        return _claim_portable(collection, worker_id, n, now, lease)
    got, died = _claim_postgres(collection, worker_id, n, now, lease)
    if not got and not died and features_changed(collection):
        got, died = _claim_postgres(collection, worker_id, n, now, lease)
    return got, died


def _claim_postgres(
    collection: Collection, worker_id: str, n: int, now: datetime, lease: datetime
) -> tuple[list[ClaimedMessage], int]:
    if collection.uses_claim_features:
        return claim_featured(collection, worker_id, n, now, lease)
    return postgres.claim(collection, worker_id, n, now, lease)


def features_changed(collection: Collection) -> bool:
    """Re-read the columns that decide how a claim runs (PostgreSQL, after a
    claim that found nothing: the plain statement finds nothing in a
    collection that uses keys, fairness or limits, and the copy the caller
    holds may be older than that); whether they changed."""
    before = feature_state(collection)
    collection.refresh_from_db(fields=FEATURE_FIELDS)
    return feature_state(collection) != before


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
    pairs = ack_pairs_checked([(id, claim_token)])
    landed, claimed = _ack_and_claim(collection, pairs, worker_id, n, visibility_timeout)
    result = AckAndClaimResult(landed is None or pairs[0] in landed, claimed)
    tally.count(collection.pk, acked=int(result.acked))  # history
    return result


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
    pairs = ack_pairs_checked(acks)
    landed, claimed = _ack_and_claim(collection, pairs, worker_id, n, visibility_timeout)
    result = AckBatchAndClaimResult(ack_batch_result(pairs, landed), claimed)
    tally.count(collection.pk, acked=result.acks.acked)  # history
    return result


def _ack_and_claim(
    collection: Collection, pairs: Pairs, worker_id: str, n: Any, visibility_timeout: Any
) -> tuple[Landed, list[ClaimedMessage]]:
    """Ack the checked pairs, then claim: (the pairs that landed, or None when
    all did; the messages claimed)."""
    n, timeout = _claim_args(collection, worker_id, n, visibility_timeout)
    if connection.vendor != "postgresql" or n <= 0 or not pairs or collection.uses_claim_features:
        landed = ack_pairs_apply(collection, pairs)
        return landed, _claim_rounds(collection, worker_id, n, timeout, [], CLAIM_ROUNDS)
    now = clock.now()
    landed, claimed, died = postgres.ack_and_claim(
        collection, ack_pairs_distinct(pairs), worker_id=worker_id, n=min(n, MAX_CLAIM),
        now=now, lease=now + timedelta(seconds=timeout),
    )  # fmt: skip
    if died or (not claimed and features_changed(collection)):
        claimed = _claim_rounds(collection, worker_id, n, timeout, claimed, CLAIM_ROUNDS - 1)
    return landed, claimed


def _claim_portable(
    collection: Collection, worker_id: str, n: int, now: datetime, lease: datetime
) -> tuple[list[ClaimedMessage], int]:
    """The ORM claim (SQLite): the IMMEDIATE transaction holds the database's
    write lock from BEGIN, so reading candidates and updating them cannot race
    another writer; every UPDATE is still fenced by the state it expects."""
    with transaction.atomic():
        found = list(Collection.objects.filter(pk=collection.pk).values_list(*FEATURE_FIELDS))
        if not found or found[0][0]:  # gone or paused
            return [], 0
        if found[0] != feature_state(collection):  # an old copy: take the row as it is
            collection.refresh_from_db(fields=FEATURE_FIELDS)
        if collection.uses_claim_features:
            return claim_featured(collection, worker_id, n, now, lease)
        candidates = _candidates(collection, n, now)
        died = kill_candidates(candidates, now)
        take = {c["seq"]: uuid.uuid4() for c in candidates if c["seq"] not in died}
        return claim_rows_portable(take, worker_id, now, lease), len(died)


def claim_rows_portable(
    take: dict[int, uuid.UUID], worker_id: str, now: datetime, lease: datetime
) -> list[ClaimedMessage]:
    """Claim the rows ``take`` names (seq -> new token) in the caller's
    IMMEDIATE transaction (SQLite); the claimed messages in claim order."""
    if not take:
        return []
    ops = connection.ops
    at, until = ops.adapt_datetimefield_value(now), ops.adapt_datetimefield_value(lease)
    with rawsql.cursor() as cur:
        cur.executemany(sql.CLAIM_ROW_SQLITE, [
            (token.hex, worker_id, at, until, seq) for seq, token in take.items()
        ])  # fmt: skip
    return _claimed(list(Message.objects.filter(seq__in=list(take)).values(*_CLAIM_COLUMNS)))


def _claimed(rows: list[dict[str, Any]]) -> list[ClaimedMessage]:
    """Rows of claimed messages as ClaimedMessage, in claim order."""
    out = []
    for row in rows:
        del row["state"]
        out.append(ClaimedMessage(**row))
    out.sort(key=_claim_order)
    return out


def _candidates(collection: Collection, n: int, now: datetime) -> list[dict[str, Any]]:
    """The first n claimable rows in claim order: due ready rows and claimed
    rows with a lapsed lease, each read through its own partial index."""
    fields = ("seq", "priority", "deliver_after", "expires_at", "attempt", "max_attempts")
    qs = Message.objects.of(collection).in_claim_order()
    rows = list(qs.due(now).values(*fields)[:n]) + list(qs.lease_lapsed(now).values(*fields)[:n])
    rows.sort(key=_candidate_order)
    return rows[:n]


def kill_candidates(
    candidates: list[dict[str, Any]], now: datetime, *, key_heads: bool = False
) -> set[int]:
    """Move expired candidates to dead ``expired`` and those out of attempts to
    dead ``exhausted``; returns their seqs. ``key_heads``: the candidates are
    heads of their ordering keys (recorded as ``died_key_head``)."""
    expired = {c["seq"] for c in candidates if c["expires_at"] and c["expires_at"] <= now}
    exhausted = {
        c["seq"] for c in candidates
        if c["seq"] not in expired and c["attempt"] >= c["max_attempts"]
    }  # fmt: skip
    for seqs, reason in ((expired, DeadReason.EXPIRED), (exhausted, DeadReason.EXHAUSTED)):
        if seqs:
            rows = Message.objects.filter(seq__in=seqs, state__in=LIVE_STATES)
            if key_heads:
                rows.filter(ordering_key__isnull=False).update(died_key_head=True)
            rows.kill(reason=reason, now=now)
    return expired | exhausted


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
