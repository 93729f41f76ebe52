"""Group-queue services, holder actions (ack, nack, fail, extend, release), cancel, get.

Rows of the SPEC §2 operations table, on both databases (split from
test_services.py along the seams of the services package)."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from typing import Any

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Collection
from queueproject import clock
from queueproject.backoff import backoff_delay
from tests.groupqueues.conftest import ENQUEUER, WORKER, claim, claim_one, enqueue, state_of

pytestmark = pytest.mark.django_db


# ------------------------------------------------------------------------ ack


def test_ack__deletes_the_message(queue):
    message_id = enqueue(queue)
    message = claim_one(queue)
    services.message_ack(collection=queue, id=message.id, claim_token=message.claim_token)
    assert services.collection_depth(collection=queue) == 0
    with pytest.raises(err.MessageNotFound):
        services.message_get(collection=queue, id=message_id)


def test_ack__twice_is_lease_lost(queue):
    enqueue(queue)
    message = claim_one(queue)
    services.message_ack(collection=queue, id=message.id, claim_token=message.claim_token)
    with pytest.raises(err.LeaseLost) as exc:
        services.message_ack(collection=queue, id=message.id, claim_token=message.claim_token)
    assert (exc.value.status_code, exc.value.code) == (409, "lease_lost")


def test_ack__stale_token_after_reclaim_is_rejected(queue, frozen):
    enqueue(queue)
    first = claim_one(queue, visibility_timeout=5)
    clock.advance(5)
    second = claim_one(queue)
    with pytest.raises(err.LeaseLost):
        services.message_ack(collection=queue, id=first.id, claim_token=first.claim_token)
    services.message_ack(collection=queue, id=second.id, claim_token=second.claim_token)


def test_ack__lapsed_lease_is_rejected(queue, frozen):
    enqueue(queue)
    message = claim_one(queue, visibility_timeout=5)
    clock.advance(5)
    with pytest.raises(err.LeaseLost):
        services.message_ack(collection=queue, id=message.id, claim_token=message.claim_token)
    assert services.collection_depth(collection=queue) == 1


def test_ack__message_of_another_collection_is_lease_lost(queue, group):
    other = services.collection_create(group=group, name="other")
    enqueue(queue)
    message = claim_one(queue)
    with pytest.raises(err.LeaseLost):
        services.message_ack(collection=other, id=message.id, claim_token=message.claim_token)


def test_ack_batch__per_entry_results_and_count(queue, frozen):
    for i in range(3):
        enqueue(queue, i)
    a, b, c = claim(queue, 3)
    services.message_ack(collection=queue, id=b.id, claim_token=b.claim_token)
    result = services.message_ack_batch(
        collection=queue,
        acks=[(a.id, a.claim_token), (b.id, b.claim_token), (c.id, uuid.uuid4())],
    )
    assert result.acked == 1
    assert [(r.id, r.acked, r.reason) for r in result.results] == [
        (a.id, True, None),
        (b.id, False, "lease_lost"),
        (c.id, False, "lease_lost"),
    ]
    assert services.collection_depth(collection=queue) == 1


def test_ack_batch__string_ids_and_a_repeated_pair(queue, frozen):
    enqueue(queue, 1)
    enqueue(queue, 2)
    a, b = claim(queue, 2)
    result = services.message_ack_batch(
        collection=queue,
        acks=[(str(a.id), str(a.claim_token)), (b.id, b.claim_token), (b.id, b.claim_token)],
    )
    assert result.acked == 2
    # the repeated pair deleted nothing more: it says so (issue 12 point 8)
    assert [(r.id, r.acked, r.reason) for r in result.results] == [
        (a.id, True, None), (b.id, True, None), (b.id, False, "duplicate")
    ]  # fmt: skip
    assert services.collection_depth(collection=queue) == 0


def test_ack_batch__the_largest_batch_in_one_call(queue):
    services.message_enqueue_batch(collection=queue, enqueued_by=ENQUEUER, messages=[
        services.NewMessage(payload=i) for i in range(services.MAX_ACK_BATCH)
    ])  # fmt: skip
    held = [m for _ in range(5) for m in claim(queue, 100)]
    acks = [(m.id, m.claim_token) for m in held]
    assert services.message_ack_batch(collection=queue, acks=acks).acked == len(acks) == 500
    assert services.collection_depth(collection=queue) == 0


def test_ack_batch__empty_and_too_many(queue):
    assert services.message_ack_batch(collection=queue, acks=[]).acked == 0
    with pytest.raises(err.InvalidQueueInput):
        services.message_ack_batch(collection=queue, acks=[(uuid.uuid4(), uuid.uuid4())] * 501)


# ----------------------------------------------------------------------- nack


def test_nack__with_delay_makes_it_ready_later(queue, frozen):
    enqueue(queue)
    message = claim_one(queue)
    row = services.message_nack(
        collection=queue,
        id=message.id,
        claim_token=message.claim_token,
        delay_seconds=20,
        error="boom",
    )
    assert (row.state, row.last_error, row.claim_token, row.attempt) == ("ready", "boom", None, 1)
    assert row.deliver_after == clock.now() + timedelta(seconds=20)
    assert claim(queue) == []
    clock.advance(20)
    assert claim_one(queue).attempt == 2


def test_nack__zero_delay_is_claimable_at_once(queue):
    enqueue(queue)
    message = claim_one(queue)
    services.message_nack(
        collection=queue, id=message.id, claim_token=message.claim_token, delay_seconds=0
    )
    assert claim_one(queue).id == message.id


def test_nack__default_uses_exponential_backoff_with_jitter(group, frozen):
    queue = services.collection_create(
        group=group,
        name="retry",
        retry_backoff_base=10,
        retry_backoff_max=25,
        default_max_attempts=10,
    )
    enqueue(queue)
    expected = [(5, 10), (10, 20), (12.5, 25), (12.5, 25)]  # base*2^(a-1) capped, x[0.5, 1]
    for low, high in expected:
        message = claim_one(queue)
        row = services.message_nack(
            collection=queue, id=message.id, claim_token=message.claim_token
        )
        delay = (row.deliver_after - clock.now()).total_seconds()
        assert low <= delay <= high
        clock.advance(high)


def test_nack__out_of_attempts_is_dead_exhausted(queue):
    enqueue(queue, max_attempts=1)
    message = claim_one(queue)
    row = services.message_nack(
        collection=queue, id=message.id, claim_token=message.claim_token, error="last"
    )
    assert (row.state, row.dead_reason, row.last_error) == ("dead", "exhausted", "last")
    assert row.died_at is not None


def test_nack__stale_token_is_lease_lost(queue):
    enqueue(queue)
    message = claim_one(queue)
    with pytest.raises(err.LeaseLost):
        services.message_nack(collection=queue, id=message.id, claim_token=uuid.uuid4())


# ------------------------------------------------------------- fail, extend, release


def test_fail__is_dead_failed_at_once(queue):
    enqueue(queue)
    message = claim_one(queue)
    row = services.message_fail(
        collection=queue, id=message.id, claim_token=message.claim_token, error="bad input"
    )
    assert (row.state, row.dead_reason, row.last_error) == ("dead", "failed", "bad input")
    with pytest.raises(err.LeaseLost):
        services.message_fail(
            collection=queue, id=message.id, claim_token=message.claim_token, error=""
        )


def test_extend__moves_the_lease(queue, frozen):
    enqueue(queue)
    message = claim_one(queue, visibility_timeout=5)
    clock.advance(4)
    row = services.message_extend(
        collection=queue, id=message.id, claim_token=message.claim_token, visibility_timeout=60
    )
    assert row.lease_expires_at == clock.now() + timedelta(seconds=60)
    clock.advance(30)
    assert claim(queue) == []
    services.message_ack(collection=queue, id=message.id, claim_token=message.claim_token)


def test_extend__after_the_lease_lapsed_is_lease_lost(queue, frozen):
    enqueue(queue)
    message = claim_one(queue, visibility_timeout=5)
    clock.advance(5)
    with pytest.raises(err.LeaseLost):
        services.message_extend(
            collection=queue, id=message.id, claim_token=message.claim_token, visibility_timeout=60
        )


def test_extend__late_heartbeat_never_takes_it_back_from_a_new_holder(queue, frozen):
    enqueue(queue)
    old = claim_one(queue, visibility_timeout=5)
    clock.advance(5)
    new = claim_one(queue, visibility_timeout=5)
    with pytest.raises(err.LeaseLost):
        services.message_extend(
            collection=queue, id=old.id, claim_token=old.claim_token, visibility_timeout=60
        )
    row = services.message_get(collection=queue, id=new.id)
    assert (row.claim_token, row.lease_expires_at) == (new.claim_token, new.lease_expires_at)


def test_release__keeps_the_attempt_count(queue):
    enqueue(queue)
    message = claim_one(queue)
    row = services.message_release(collection=queue, id=message.id, claim_token=message.claim_token)
    assert (row.state, row.attempt, row.claim_token, row.claimed_by) == ("ready", 0, None, "")
    again = claim_one(queue)
    assert (again.id, again.attempt) == (message.id, 1)
    with pytest.raises(err.LeaseLost):
        services.message_release(collection=queue, id=message.id, claim_token=message.claim_token)


# ------------------------------------------------------------------ cancel, get


def test_cancel__ready_or_claimed_then_holders_ack_is_lease_lost(queue):
    ready = enqueue(queue, "ready")
    enqueue(queue, "held")
    assert services.message_cancel(collection=queue, id=ready) is True
    held = claim_one(queue)
    assert services.message_cancel(collection=queue, id=held.id) is True
    with pytest.raises(err.LeaseLost):
        services.message_ack(collection=queue, id=held.id, claim_token=held.claim_token)
    with pytest.raises(err.LeaseLost):
        services.message_extend(
            collection=queue, id=held.id, claim_token=held.claim_token, visibility_timeout=5
        )
    assert services.message_cancel(collection=queue, id=held.id) is False
    with pytest.raises(err.MessageNotFound):
        services.message_get(collection=queue, id=held.id)


def test_cancel__leaves_dead_messages_and_unknown_ids(queue):
    enqueue(queue)
    message = claim_one(queue)
    services.message_fail(
        collection=queue, id=message.id, claim_token=message.claim_token, error="x"
    )
    assert services.message_cancel(collection=queue, id=message.id) is False
    assert services.message_cancel(collection=queue, id="not-a-uuid") is False
    assert services.message_get(collection=queue, id=message.id).state == "dead"


def test_get__other_collection_and_bad_ids_are_not_found(queue, group):
    other = services.collection_create(group=group, name="other")
    message_id = enqueue(queue)
    with pytest.raises(err.MessageNotFound) as exc:
        services.message_get(collection=other, id=message_id)
    assert (exc.value.status_code, exc.value.code) == (404, "not_found")
    with pytest.raises(err.MessageNotFound):
        services.message_get(collection=queue, id="nope")


@pytest.mark.parametrize("action", ["ack", "nack", "fail", "extend", "release"])
def test_cancel__then_every_token_operation_is_lease_lost(queue, action):
    enqueue(queue)
    held = claim_one(queue)
    assert services.message_cancel(collection=queue, id=held.id) is True
    extra: dict[str, dict[str, Any]] = {
        "nack": {},
        "fail": {"error": "x"},
        "extend": {"visibility_timeout": 5},
    }
    with pytest.raises(err.LeaseLost):
        getattr(services, f"message_{action}")(
            collection=queue, id=held.id, claim_token=held.claim_token, **extra.get(action, {})
        )
    result = services.message_ack_batch(collection=queue, acks=[(held.id, held.claim_token)])
    assert (result.acked, result.results[0].reason) == (0, "lease_lost")


# ------------------------------------------------------- a pair named twice


@pytest.mark.parametrize("path", ["ack_batch", "ack_batch_and_claim", "ack_batch_then_claim"])
def test_ack_batch__the_same_pair_twice_is_acked_once_then_duplicate(queue, path):
    """Issue 12 point 8, on every path that acks a batch: message_ack_batch,
    the one-statement ack-and-claim (PostgreSQL) and its two-step form (n=0;
    SQLite always)."""
    enqueue(queue, 1)
    enqueue(queue, 2)
    a, b = claim(queue, 2)
    acks = [(a.id, a.claim_token), (a.id, a.claim_token), (b.id, b.claim_token)]
    if path == "ack_batch":
        result = services.message_ack_batch(collection=queue, acks=acks)
    else:
        n = 1 if path == "ack_batch_and_claim" else 0
        result = services.message_ack_batch_and_claim(
            collection=queue, acks=acks, worker_id=WORKER, n=n
        ).acks
    assert result.acked == 2
    assert [(r.id, r.acked, r.reason) for r in result.results] == [
        (a.id, True, None), (a.id, False, "duplicate"), (b.id, True, None)
    ]  # fmt: skip
    assert services.collection_depth(collection=queue) == 0


def test_ack_batch__a_duplicate_of_a_lost_pair_is_a_duplicate(queue, frozen):
    enqueue(queue)
    (held,) = claim(queue, 1)
    stale = (held.id, uuid.uuid4())
    result = services.message_ack_batch(collection=queue, acks=[stale, stale])
    assert result.acked == 0
    assert [r.reason for r in result.results] == ["lease_lost", "duplicate"]
    assert state_of(held.id) == ("claimed", None)


@pytest.mark.parametrize("path", ["ack_batch", "ack_batch_and_claim", "ack_batch_then_claim"])
@pytest.mark.parametrize("wrong_first", [False, True])
def test_ack_batch__the_same_id_with_a_wrong_token_is_not_acked(queue, path, wrong_first):
    """The statements answer which (id, token) pairs landed, not which ids: an
    id named with its token and with a wrong one acks once, and only the
    entry with the right token says so (every path, either order)."""
    enqueue(queue, 1)
    enqueue(queue, 2)
    a, b = claim(queue, 2)
    right, wrong = (a.id, a.claim_token), (a.id, uuid.uuid4())
    acks = [wrong, right] if wrong_first else [right, wrong]
    acks.append((b.id, b.claim_token))
    if path == "ack_batch":
        result = services.message_ack_batch(collection=queue, acks=acks)
    else:
        n = 1 if path == "ack_batch_and_claim" else 0
        result = services.message_ack_batch_and_claim(
            collection=queue, acks=acks, worker_id=WORKER, n=n
        ).acks
    expected = {right: (True, None), wrong: (False, "lease_lost")}
    assert [(r.id, r.acked, r.reason) for r in result.results] == [
        (a.id, *expected[pair]) for pair in acks[:2]
    ] + [(b.id, True, None)]
    assert result.acked == 2
    assert services.collection_depth(collection=queue) == 0


# -------------------------------------------------------------- one backoff


def test_nack__backoff_is_the_one_backoff_formula(group, frozen, monkeypatch):
    """The nack's default delay is ``queueproject.backoff.backoff_delay`` of the
    message's attempt and the collection's base and cap (no second copy)."""
    monkeypatch.setattr(random, "uniform", lambda low, high: 0.75)
    queue = services.collection_create(
        group=group, name="retry", retry_backoff_base=0.5, retry_backoff_max=7,
        default_max_attempts=20,
    )  # fmt: skip
    enqueue(queue)
    for _ in range(8):
        message = claim_one(queue)
        row = services.message_nack(
            collection=queue, id=message.id, claim_token=message.claim_token
        )
        expected = backoff_delay(message.attempt, base=0.5, cap=7, jitter=0.75)
        delay = (row.deliver_after - clock.now()).total_seconds()
        assert delay == pytest.approx(expected, abs=1e-6)
        clock.advance(delay)


def test_nack__backoff_reads_the_collections_current_settings(group, frozen):
    queue = services.collection_create(group=group, name="retry", retry_backoff_base=1,
                                       retry_backoff_max=1)  # fmt: skip
    enqueue(queue)
    message = claim_one(queue)
    fresh = Collection.objects.get(pk=queue.pk)
    services.collection_update(collection=fresh, retry_backoff_base=100, retry_backoff_max=100)
    row = services.message_nack(collection=queue, id=message.id, claim_token=message.claim_token)
    assert (row.deliver_after - clock.now()).total_seconds() >= 50
