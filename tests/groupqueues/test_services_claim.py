"""Group-queue services, claim, ack-and-claim, asynchronous commit.

Rows of the SPEC §2 operations table, on both databases (split from
test_services.py along the seams of the services package)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Collection
from queueproject import clock
from tests.groupqueues.conftest import ENQUEUER, WORKER, claim, claim_one, enqueue, state_of

pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------------- claim


def test_claim__sets_the_lease_and_counts_the_attempt(queue, frozen):
    message_id = enqueue(queue)
    message = claim_one(queue, visibility_timeout=60)
    assert message.id == message_id
    assert message.attempt == 1
    assert message.claimed_by == WORKER
    assert message.lease_expires_at == clock.now() + timedelta(seconds=60)
    assert message.payload == {"n": 1}
    row = services.message_get(collection=queue, id=message_id)
    assert (row.state, row.claim_token, row.claimed_at) == (
        "claimed",
        message.claim_token,
        clock.now(),
    )


def test_claim__order_is_priority_then_ready_time_then_enqueue_order(queue, frozen):
    late = enqueue(queue, "late", delay_seconds=5)
    a = enqueue(queue, "a")
    b = enqueue(queue, "b")
    high = enqueue(queue, "high", priority=10)
    low = enqueue(queue, "low", priority=-1)
    clock.advance(10)
    early = enqueue(queue, "early", deliver_after=clock.now() - timedelta(seconds=100))
    assert [m.id for m in claim(queue, 10)] == [high, early, a, b, late, low]


def test_claim__n_at_most_zero_is_empty(queue):
    enqueue(queue)
    assert claim(queue, 0) == []
    assert claim(queue, -5) == []
    assert services.collection_depth_pending(collection=queue) == 1


def test_claim__n_is_capped_at_100(queue):
    services.message_enqueue_batch(
        collection=queue,
        messages=[services.NewMessage(payload=i) for i in range(120)],
        enqueued_by=ENQUEUER,
    )
    assert len(claim(queue, 1000)) == 100


def test_claim__tokens_are_fresh_per_message_and_claim(queue):
    enqueue(queue)
    enqueue(queue)
    first, second = claim(queue, 2)
    assert first.claim_token != second.claim_token
    assert first.claim_token.version == 4


@pytest.mark.parametrize("worker_id", ["", "x" * 129, None])
def test_claim__bad_worker_id_is_400(queue, worker_id):
    with pytest.raises(err.InvalidQueueInput) as exc:
        services.message_claim(collection=queue, worker_id=worker_id)
    assert "worker_id" in exc.value.details


@pytest.mark.parametrize("timeout", [0, 43201])
def test_claim__visibility_timeout_out_of_range_is_400(queue, timeout):
    with pytest.raises(err.InvalidQueueInput):
        claim(queue, visibility_timeout=timeout)


def test_claim__paused_collection_answers_empty(queue):
    enqueue(queue)
    services.collection_update(collection=Collection.objects.get(pk=queue.pk), paused=True)
    assert claim(queue) == []  # the stale instance still sees the pause
    services.collection_update(collection=queue, paused=False)
    assert len(claim(queue)) == 1


def test_claim__delayed_messages_wait(queue, frozen):
    enqueue(queue, delay_seconds=30)
    assert claim(queue) == []
    clock.advance(30)
    assert len(claim(queue)) == 1


def test_claim__expired_candidate_becomes_dead_expired(queue, frozen):
    doomed = enqueue(queue, "doomed", expires_in_seconds=5)
    fine = enqueue(queue, "fine")
    clock.advance(5)
    assert [m.id for m in claim(queue)] == [fine]
    assert state_of(doomed) == ("dead", "expired")


def test_claim__exhausted_candidate_becomes_dead_exhausted(queue, frozen):
    tired = enqueue(queue, "tired", max_attempts=1)
    fresh = enqueue(queue, "fresh")
    claim_one(queue, visibility_timeout=5)
    clock.advance(6)  # the lease lapses with no attempts left
    assert [m.id for m in claim(queue)] == [fresh]
    assert state_of(tired) == ("dead", "exhausted")


def test_claim__only_dead_candidates_still_finds_work_behind_them(queue, frozen):
    for _ in range(3):
        enqueue(queue, expires_in_seconds=1)
    good = enqueue(queue, "good")
    clock.advance(2)
    assert [m.id for m in claim(queue, 1)] == [good]


def test_claim__lapsed_lease_is_claimable_again(queue, frozen):
    message_id = enqueue(queue)
    first = claim_one(queue, visibility_timeout=5)
    assert claim(queue) == []
    clock.advance(5)
    second = claim_one(queue)
    assert second.id == message_id
    assert second.attempt == 2
    assert second.claim_token != first.claim_token


def test_claim__batch_decodes_every_payload_kind(queue):
    payloads = [None, 0, "text", [1, {"a": None}], {"é": "✓"}, 2**70, -1.5, True]
    for payload in payloads:
        services.message_enqueue(collection=queue, payload=payload, enqueued_by=ENQUEUER)
    assert [m.payload for m in claim(queue, 100)] == payloads


# -------------------------------------------------------------- ack and claim


def _ack_and_claim(queue, held, **opts):
    return services.message_ack_and_claim(
        collection=queue, id=held.id, claim_token=held.claim_token, worker_id=WORKER, **opts
    )


def test_ack_and_claim__acks_the_held_one_and_claims_the_next_in_order(queue, frozen):
    first, second, urgent = enqueue(queue, 1), enqueue(queue, 2), enqueue(queue, 3, priority=5)
    held = claim_one(queue)
    assert held.id == urgent
    result = _ack_and_claim(queue, held, visibility_timeout=60)
    assert result.acked is True
    assert state_of(urgent) is None  # deleted
    (nxt,) = result.messages
    assert (nxt.id, nxt.payload, nxt.attempt, nxt.claimed_by) == (first, 1, 1, WORKER)
    assert nxt.lease_expires_at == clock.now() + timedelta(seconds=60)
    result = _ack_and_claim(queue, nxt, n=5)
    assert result.acked and [m.id for m in result.messages] == [second]
    result = _ack_and_claim(queue, result.messages[0])
    assert result.acked and result.messages == []  # empty queue: the ack still lands
    assert services.collection_depth(collection=queue) == 0


def test_ack_and_claim__a_lost_lease_is_reported_and_the_claim_still_happens(queue, frozen):
    lapsed = enqueue(queue, "lapsed")
    held = claim_one(queue, visibility_timeout=5)
    waiting = enqueue(queue, "waiting")
    clock.advance(5)  # the lease lapsed: the ack must not land, the message is claimable
    result = _ack_and_claim(queue, held, n=2)
    assert result.acked is False
    assert [m.id for m in result.messages] == [lapsed, waiting]
    assert result.messages[0].attempt == 2 and result.messages[0].claim_token != held.claim_token
    assert _ack_and_claim(queue, held).acked is False  # stale token: nothing deleted
    assert state_of(lapsed) == ("claimed", None)


def test_ack_and_claim__paused_n_zero_and_dead_candidates(queue, frozen):
    for i in range(4):
        enqueue(queue, i)
    held = claim_one(queue)
    services.collection_update(collection=queue, paused=True)
    result = _ack_and_claim(queue, held)
    assert (result.acked, result.messages) == (True, [])  # paused: ack only
    services.collection_update(collection=queue, paused=False)
    held = claim_one(queue)
    result = _ack_and_claim(queue, held, n=0)
    assert (result.acked, result.messages) == (True, [])
    held = claim_one(queue)
    doomed = enqueue(queue, "doomed", expires_in_seconds=1, priority=9)
    clock.advance(1)
    result = _ack_and_claim(queue, held)  # the expired candidate dies; the next is claimed
    assert result.acked and [m.payload for m in result.messages] == [3]
    assert state_of(doomed) == ("dead", "expired")


def test_ack_and_claim__bad_arguments_change_nothing(queue):
    enqueue(queue)
    held = claim_one(queue)
    for bad in ({"n": "x"}, {"worker_id": ""}, {"visibility_timeout": 0}, {"id": "nope"}):
        args = {"collection": queue, "id": held.id, "claim_token": held.claim_token,
                "worker_id": WORKER, **bad}  # fmt: skip
        with pytest.raises(err.InvalidQueueInput):
            services.message_ack_and_claim(**args)
    assert state_of(held.id) == ("claimed", None)


def _ack_batch_and_claim(queue, held, **opts):
    return services.message_ack_batch_and_claim(
        collection=queue, acks=[(m.id, m.claim_token) for m in held], worker_id=WORKER, **opts
    )


def test_ack_batch_and_claim__acks_the_batch_and_claims_the_next_in_order(queue, frozen):
    ids = [enqueue(queue, i) for i in range(5)]
    urgent = enqueue(queue, "urgent", priority=5)
    held = claim(queue, 2)
    assert [m.id for m in held] == [urgent, ids[0]]
    result = _ack_batch_and_claim(queue, held, n=2, visibility_timeout=60)
    assert result.acks.acked == 2
    assert [(r.id, r.acked, r.reason) for r in result.acks.results] == [
        (urgent, True, None), (ids[0], True, None)
    ]  # fmt: skip
    assert state_of(urgent) is None and state_of(ids[0]) is None  # deleted
    assert [m.id for m in result.messages] == ids[1:3]
    first = result.messages[0]
    assert (first.payload, first.attempt, first.claimed_by) == (1, 1, WORKER)
    assert first.lease_expires_at == clock.now() + timedelta(seconds=60)
    result = _ack_batch_and_claim(queue, result.messages, n=10)
    assert result.acks.acked == 2 and [m.id for m in result.messages] == ids[3:]
    result = _ack_batch_and_claim(queue, result.messages, n=10)
    assert result.acks.acked == 2 and result.messages == []  # empty: the acks still land
    assert services.collection_depth(collection=queue) == 0


def test_ack_batch_and_claim__lost_leases_are_reported_per_entry(queue, frozen):
    lapsed = enqueue(queue, "lapsed")
    (stale,) = claim(queue, 1, visibility_timeout=5)
    kept = enqueue(queue, "kept")
    (good,) = claim(queue, 1, visibility_timeout=60)
    waiting = enqueue(queue, "waiting")
    clock.advance(5)  # the first lease lapsed: its ack must not land, it is claimable again
    result = _ack_batch_and_claim(queue, [stale, good, good], n=5)
    assert result.acks.acked == 1
    # acked counts rows deleted; each entry says whether its ack landed
    # (as message_ack_batch: a repeated pair is a duplicate, issue 12 point 8)
    assert [(r.id, r.acked, r.reason) for r in result.acks.results] == [
        (lapsed, False, "lease_lost"), (kept, True, None), (kept, False, "duplicate")
    ]  # fmt: skip
    assert [m.id for m in result.messages] == [lapsed, waiting]
    assert result.messages[0].attempt == 2
    assert result.messages[0].claim_token != stale.claim_token
    assert state_of(kept) is None and state_of(lapsed) == ("claimed", None)


def test_ack_batch_and_claim__no_acks_n_zero_paused_and_dead_candidates(queue, frozen):
    for i in range(5):
        enqueue(queue, i)
    result = _ack_batch_and_claim(queue, [], n=2)  # nothing to ack: a plain claim
    assert result.acks.acked == 0 and [m.payload for m in result.messages] == [0, 1]
    result = _ack_batch_and_claim(queue, result.messages, n=0)  # acks only
    assert result.acks.acked == 2 and result.messages == []
    held = claim(queue, 2)
    services.collection_update(collection=queue, paused=True)
    result = _ack_batch_and_claim(queue, held, n=5)
    assert result.acks.acked == 2 and result.messages == []  # paused: acks only
    services.collection_update(collection=queue, paused=False)
    doomed = enqueue(queue, "doomed", expires_in_seconds=1, priority=9)
    clock.advance(1)
    result = _ack_batch_and_claim(queue, [], n=1)  # the expired candidate dies
    assert [m.payload for m in result.messages] == [4]
    assert state_of(doomed) == ("dead", "expired")


def test_ack_batch_and_claim__bad_arguments_change_nothing(queue):
    enqueue(queue)
    enqueue(queue)
    (held,) = claim(queue, 1)
    good = [(held.id, held.claim_token)]
    for bad in ({"n": "x"}, {"worker_id": ""}, {"visibility_timeout": 0},
                {"acks": [("nope", held.claim_token)]}, {"acks": [(held.id, "nope")]},
                {"acks": good * 501}):  # fmt: skip
        args = {"collection": queue, "acks": good, "worker_id": WORKER, **bad}
        with pytest.raises(err.InvalidQueueInput):
            services.message_ack_batch_and_claim(**args)
    assert state_of(held.id) == ("claimed", None)
    assert services.collection_depth_pending(collection=queue) == 1


# ------------------------------------------------------- asynchronous commit


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_claim__async_commit_setting_claims_and_stays_in_the_claim(queue, settings):
    from django.db import connection, transaction

    def synchronous_commit():
        with connection.cursor() as cur:
            cur.execute("SHOW synchronous_commit")
            return cur.fetchone()[0]

    settings.QUEUE_ASYNC_COMMIT_CLAIMS = True
    enqueue(queue, 1)
    enqueue(queue, 2)
    message = claim_one(queue)
    assert message.payload == 1
    assert synchronous_commit() == "on"  # SET LOCAL: it ended with the claim's commit
    services.message_ack(collection=queue, id=message.id, claim_token=message.claim_token)
    with transaction.atomic():  # inside a caller's transaction the claim stays synchronous
        assert claim_one(queue).payload == 2
        assert synchronous_commit() == "on"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_claim__async_commit_parameter_turns_synchronous_commit_off(queue):
    from django.db import connection, transaction

    from groupqueues import sql

    enqueue(queue, 1)
    now = clock.now()
    params = {"collection_id": queue.pk, "now": now, "n": 1, "worker_id": WORKER,
              "lease_expires_at": now + timedelta(seconds=60)}  # fmt: skip
    for async_commit, expected in ((False, "on"), (True, "off")):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(sql.CLAIM_POSTGRES, {**params, "async_commit": async_commit})
            cur.execute("SHOW synchronous_commit")
            assert cur.fetchone()[0] == expected
            transaction.set_rollback(True)
