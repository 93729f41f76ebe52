"""Actions of a claim's holder (ack, batch ack, nack with backoff, fail,
extend, release) and cancel, which takes a message from whoever holds it.

Every holder action is fenced by ``MessageQuerySet.held``: this collection,
claimed with that token, lease not lapsed; anything else is LeaseLost (409)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F

from groupqueues import exceptions as err
from groupqueues import sql, tally
from groupqueues import validation as check
from groupqueues.models import Collection, DeadReason, Message, MessageQuerySet, MessageState
from groupqueues.services import postgres
from groupqueues.services.claim_floor import claim_floor_lower_to_message
from groupqueues.services.collections import collection_wake
from groupqueues.services.types import MAX_ACK_BATCH, AckBatchResult, AckResult, frozen_new
from queueproject import clock, rawsql
from queueproject.backoff import backoff_delay

Pairs = list[tuple[uuid.UUID, uuid.UUID]]
Landed = set[tuple[uuid.UUID, uuid.UUID]] | None  # the pairs that landed; None: all did


def _held(collection: Collection, id: Any, claim_token: Any, now: datetime) -> MessageQuerySet:
    """The fence of every holder action (ids checked as UUIDs)."""
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
        message_id = check.check_uuid(id, "id")
        token = check.check_uuid(claim_token, "claim_token")
        deleted = postgres.ack(collection, message_id, token, now)
    else:
        deleted, _ = _held(collection, id, claim_token, now).delete()
    if not deleted:
        raise _lease_lost(id)
    tally.count(collection.pk, acked=1)  # history


def message_ack_batch(
    *, collection: Collection, acks: Sequence[tuple[uuid.UUID | str, uuid.UUID | str]]
) -> AckBatchResult:
    """Ack many (id, claim_token) pairs in one statement (PostgreSQL) or one
    transaction (SQLite). Never raises for a lost lease: each entry says whether
    it landed (reason ``lease_lost`` if not; ``duplicate`` for a pair named
    earlier in the batch); ``acked`` counts those that did. At most 500 pairs
    (InvalidQueueInput)."""
    pairs = ack_pairs_checked(acks)
    result = ack_batch_result(pairs, ack_pairs_apply(collection, pairs))
    tally.count(collection.pk, acked=result.acked)  # history
    return result


def ack_pairs_checked(
    acks: Sequence[tuple[uuid.UUID | str, uuid.UUID | str]],
) -> Pairs:
    """The (id, claim_token) pairs of a batch ack, checked (at most 500)."""
    if len(acks) > MAX_ACK_BATCH:
        raise err.InvalidQueueInput.field("acks", f"Give at most {MAX_ACK_BATCH} acks.")
    return [
        (i if type(i) is uuid.UUID else check.check_uuid(i, "id"),
         t if type(t) is uuid.UUID else check.check_uuid(t, "claim_token"))
        for i, t in acks
    ]  # fmt: skip


def ack_pairs_distinct(pairs: Pairs) -> Pairs:
    """The pairs without repeats, in order: the statements count one row per
    pair, and a pair named twice deletes one row."""
    return pairs if len(set(pairs)) == len(pairs) else list(dict.fromkeys(pairs))


def ack_pairs_apply(collection: Collection, pairs: Pairs) -> Landed:
    """Ack the checked pairs: the pairs that landed (by id AND token, so an id
    named again with a wrong token is not reported acked), or None when all did."""
    pairs = ack_pairs_distinct(pairs)
    if not pairs:
        return None
    now = clock.now()
    if connection.vendor == "postgresql":
        return postgres.ack_batch(collection, pairs, now)
    return _ack_batch_portable(collection, pairs, now)


def ack_batch_result(pairs: Pairs, landed: Landed) -> AckBatchResult:
    """The answer to a batch ack of ``pairs`` (as given, repeats included);
    ``landed`` None means every distinct pair landed. A repeated pair answers
    ``duplicate`` after its first entry."""
    if landed is None and len(set(pairs)) == len(pairs):
        results = [frozen_new(AckResult, (i, True, None)) for i, _ in pairs]
        return AckBatchResult(len(pairs), results)
    seen: set[tuple[uuid.UUID, uuid.UUID]] = set()
    results = []
    for pair in pairs:
        i = pair[0]
        if pair in seen:
            results.append(frozen_new(AckResult, (i, False, "duplicate")))
        elif landed is None or pair in landed:
            results.append(frozen_new(AckResult, (i, True, None)))
        else:
            results.append(frozen_new(AckResult, (i, False, "lease_lost")))
        seen.add(pair)
    return AckBatchResult(sum(r.acked for r in results), results)


def _ack_batch_portable(collection: Collection, pairs: Pairs, now: datetime) -> Landed:
    """SQLite: one DELETE … RETURNING of the pairs still held (id, token)."""
    query = _ack_batch_sqlite(len(pairs))
    params: list[Any] = [i.hex for i, _ in pairs]
    params += [collection.pk, connection.ops.adapt_datetimefield_value(now)]
    for message_id, token in pairs:
        params += [message_id.hex, token.hex]
    with rawsql.cursor() as cur:
        cur.execute(query, params)
        return {(uuid.UUID(row[0]), uuid.UUID(row[1])) for row in cur.fetchall()}


def _ack_batch_sqlite(n: int) -> str:
    """``sql.ACK_BATCH_SQLITE`` for ``n`` pairs."""
    return sql.ACK_BATCH_SQLITE.format(ids=", ".join(["%s"] * n), pairs=", ".join(["(%s, %s)"] * n))


def _holder_change(
    collection: Collection, message_id: Any, token: Any, now: datetime, /,
    change: Callable[[MessageQuerySet], int],
) -> Message:  # fmt: skip
    """Apply ``change`` (one fenced UPDATE) to the held message and return it;
    LeaseLost when the caller no longer holds it."""
    with transaction.atomic():
        if not change(_held(collection, message_id, token, now)):
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
    (0 = at once; None = the collection's backoff for this attempt,
    ``queueproject.backoff.backoff_delay``), with ``error`` as last_error; out
    of attempts (attempt ≥ max_attempts) it becomes dead ``exhausted``
    instead. Wakes consumers. Returns the message. Raises LeaseLost,
    InvalidQueueInput."""
    now = clock.now()
    seconds = None
    if delay_seconds is not None:
        seconds = check.check_seconds(delay_seconds, "delay_seconds")
    last_error = check.check_error_text(error)
    with transaction.atomic():
        if seconds is None:
            seconds = _backoff_seconds(collection, id, claim_token, now)
        message = _holder_change(
            collection,
            id,
            claim_token,
            now,
            lambda held: held.retry_or_die(
                now=now, deliver_after=now + timedelta(seconds=seconds), last_error=last_error
            ),
        )
        if message.state == MessageState.READY:
            collection_wake(collection)
    return message


def _backoff_seconds(collection: Collection, id: Any, claim_token: Any, now: datetime) -> float:
    """The backoff before the held message's next attempt. Its attempt is read
    fenced by the claim token: every claim draws a new token, so while the
    token matches (the UPDATE that follows is fenced by it too) the attempt
    cannot change. The backoff settings are read fresh: a worker may hold an
    old copy of the collection. LeaseLost when not held."""
    found = list(_held(collection, id, claim_token, now).values_list(
        "attempt", "collection__retry_backoff_base", "collection__retry_backoff_max"))  # fmt: skip
    if not found:
        raise _lease_lost(id)
    ((attempt, base, cap),) = found
    return backoff_delay(attempt, base=base, cap=cap)


def message_fail(
    *, collection: Collection, id: uuid.UUID | str, claim_token: uuid.UUID | str, error: str | None
) -> Message:
    """Kill the message now: dead ``failed`` with ``error`` as last_error.
    Raises LeaseLost when the caller no longer holds it."""
    now = clock.now()
    last_error = check.check_error_text(error)
    return _holder_change(collection, id, claim_token, now, lambda held: held.kill(
        reason=DeadReason.FAILED, now=now, last_error=last_error))  # fmt: skip


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
    until = now + timedelta(seconds=seconds)
    return _holder_change(collection, id, claim_token, now,
                          lambda held: held.update(lease_expires_at=until))  # fmt: skip


def message_release(
    *, collection: Collection, id: uuid.UUID | str, claim_token: uuid.UUID | str
) -> Message:
    """Give a claim back without counting the attempt (graceful shutdown): ready
    again at once in its old place, attempt back to what it was before the
    claim. Wakes consumers. Raises LeaseLost."""
    now = clock.now()
    with transaction.atomic():
        message = _holder_change(collection, id, claim_token, now,
                                 lambda held: held.unclaim(attempt=F("attempt") - 1))  # fmt: skip
        claim_floor_lower_to_message(collection, message.id)
        collection_wake(collection)
    return message


def message_cancel(*, collection: Collection, id: uuid.UUID | str) -> bool:
    """Delete a ready or claimed message whoever holds it (one DELETE); the
    holder's next ack, nack, fail, extend or release answers lease_lost. Dead
    messages are not touched. Returns whether a live message was removed."""
    try:
        message_id = check.check_uuid(id, "id")
    except err.InvalidQueueInput:
        return False
    deleted, _ = Message.objects.of(collection).live().filter(id=message_id).delete()
    return bool(deleted)
