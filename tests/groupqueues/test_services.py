"""Every row of the SPEC §2 operations table, on both databases."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Collection, Message
from queueproject import clock
from tests.factories import AppFactory, GroupFactory
from tests.groupqueues.conftest import ENQUEUER, WORKER, claim, claim_one, enqueue

pytestmark = pytest.mark.django_db


def state_of(message_id):
    return Message.objects.filter(id=message_id).values_list("state", "dead_reason").first()


# ---------------------------------------------------------------- collections


def test_collection_create__defaults(queue):
    assert queue.kind == "queue"
    assert queue.max_payload_bytes == 256 * 1024
    assert queue.default_max_attempts == 3
    assert queue.visibility_timeout == 30
    assert (queue.retry_backoff_base, queue.retry_backoff_max) == (1.0, 3600.0)
    assert queue.dead_retention == 7 * 24 * 3600
    assert queue.max_depth is None
    assert queue.paused is False


def test_collection_create__duplicate_name_is_already_exists(queue, group):
    with pytest.raises(err.CollectionExists) as exc:
        services.collection_create(group=group, name="jobs")
    assert exc.value.code == "already_exists"
    assert exc.value.status_code == 409


@pytest.mark.parametrize("name", ["", "a" * 65, "with space", "slash/no", "ümlaut"])
def test_collection_create__bad_name_is_invalid(group, name):
    with pytest.raises(err.InvalidQueueInput) as exc:
        services.collection_create(group=group, name=name)
    assert "name" in exc.value.details


def test_collection_create__bad_settings_are_invalid(group):
    with pytest.raises(err.InvalidQueueInput) as exc:
        services.collection_create(group=group, name="q", visibility_timeout=0)
    assert "visibility_timeout" in exc.value.details
    with pytest.raises(err.InvalidQueueInput):
        services.collection_create(group=group, name="q", default_max_attempts=0)
    with pytest.raises(err.InvalidQueueInput):
        services.collection_create(
            group=group, name="q", retry_backoff_base=10, retry_backoff_max=1
        )


def test_collection_update__changes_only_given_settings(queue):
    services.collection_update(collection=queue, paused=True, max_depth=5)
    queue.refresh_from_db()
    assert (queue.paused, queue.max_depth, queue.visibility_timeout) == (True, 5, 30)
    services.collection_update(collection=queue, max_depth=None)
    queue.refresh_from_db()
    assert queue.max_depth is None


def test_collection_resolve__nearest_declaring_group_wins(tree):
    root_q = services.collection_create(group=tree["root"], name="emails")
    child_q = services.collection_create(group=tree["child"], name="emails")
    found = services.collection_resolve(app=tree["app_grandchild"], name="emails")
    assert found.pk == child_q.pk
    assert services.collection_resolve(app=tree["app_sibling"], name="emails").pk == root_q.pk


def test_collection_resolve__other_kinds_and_other_branches_are_not_found(tree):
    services.collection_create(group=tree["child"], name="store", kind="kv")
    services.collection_create(group=tree["sibling"], name="theirs")
    with pytest.raises(err.CollectionNotFound) as exc:
        services.collection_resolve(app=tree["app_grandchild"], name="store")
    assert (exc.value.code, exc.value.status_code) == ("collection_not_found", 404)
    with pytest.raises(err.CollectionNotFound):
        services.collection_resolve(app=tree["app_grandchild"], name="theirs")


def test_queue_operations__refuse_non_queue_kinds(group):
    kv = services.collection_create(group=group, name="kv", kind="kv")
    with pytest.raises(err.CollectionNotFound):
        services.message_enqueue(collection=kv, payload={}, enqueued_by=ENQUEUER)
    with pytest.raises(err.CollectionNotFound):
        services.message_claim(collection=kv, worker_id=WORKER)
    with pytest.raises(err.CollectionNotFound):
        services.collection_get(group=group, name="kv")


def test_group_delete__cascades_to_collections_and_messages():
    group = GroupFactory()
    queue = services.collection_create(group=group, name="q")
    enqueue(queue)
    group.delete()
    assert not Collection.objects.exists()
    assert not Message.objects.exists()


# -------------------------------------------------------------------- enqueue


def test_enqueue__inserts_a_ready_message(queue, frozen):
    result = services.message_enqueue(
        collection=queue, payload={"to": "a@b.c"}, enqueued_by="user:7", priority=5
    )
    assert result.created is True
    message = services.message_get(collection=queue, id=result.id)
    assert message.state == "ready"
    assert message.payload == {"to": "a@b.c"}
    assert message.priority == 5
    assert message.enqueued_by == "user:7"
    assert message.enqueued_at == message.deliver_after == clock.now()
    assert (message.attempt, message.max_attempts) == (0, 3)
    assert message.group_id == queue.group_id


def test_enqueue__delay_and_expiry(queue, frozen):
    message_id = enqueue(queue, delay_seconds=10, expires_in_seconds=60, max_attempts=7)
    message = services.message_get(collection=queue, id=message_id)
    assert message.deliver_after == clock.now() + timedelta(seconds=10)
    assert message.expires_at == clock.now() + timedelta(seconds=60)
    assert message.max_attempts == 7
    at = clock.now() + timedelta(hours=1)
    message_id = enqueue(queue, deliver_after=at, expires_at=at + timedelta(hours=1))
    assert services.message_get(collection=queue, id=message_id).deliver_after == at


def test_enqueue__payload_over_cap_is_413(group):
    small = services.collection_create(group=group, name="small", max_payload_bytes=10)
    enqueue(small, "é" * 4)  # '"éééé"' is 10 UTF-8 bytes
    with pytest.raises(err.MessageTooLarge) as exc:
        enqueue(small, "é" * 5)
    assert (exc.value.status_code, exc.value.code) == (413, "payload_too_large")


@pytest.mark.parametrize(
    ("opts", "field"),
    [
        ({"priority": 1001}, "priority"),
        ({"priority": -1001}, "priority"),
        ({"priority": "1"}, "priority"),
        ({"delay_seconds": -1}, "delay_seconds"),
        ({"expires_in_seconds": -0.5}, "expires_in_seconds"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"delay_seconds": 1, "deliver_after": clock.now()}, "deliver_after"),
    ],
)
def test_enqueue__invalid_options_are_400_with_the_field(queue, opts, field):
    with pytest.raises(err.InvalidQueueInput) as exc:
        enqueue(queue, **opts)
    assert exc.value.status_code == 400
    assert field in exc.value.details


def test_enqueue__unstorable_payload_is_invalid(queue):
    with pytest.raises(err.InvalidQueueInput):
        enqueue(queue, {"nul": "a\x00b"})
    with pytest.raises(err.InvalidQueueInput):
        enqueue(queue, float("nan"))


def test_enqueue__paused_collection_still_accepts(queue):
    services.collection_update(collection=queue, paused=True)
    enqueue(queue)
    assert services.collection_depth(collection=queue) == 1


def test_enqueue__idempotency_key_returns_the_existing_id(queue):
    first = services.message_enqueue(
        collection=queue, payload=1, enqueued_by=ENQUEUER, idempotency_key="k"
    )
    again = services.message_enqueue(
        collection=queue, payload=2, enqueued_by=ENQUEUER, idempotency_key="k"
    )
    assert again == services.EnqueueResult(first.id, created=False)
    assert Message.objects.count() == 1
    # while dead too; gone (acked) frees the key
    message = claim_one(queue)
    services.message_fail(
        collection=queue, id=message.id, claim_token=message.claim_token, error="x"
    )
    assert enqueue(queue, idempotency_key="k") == first.id
    services.collection_purge(collection=queue, include_dead=True)
    assert enqueue(queue, idempotency_key="k") != first.id


def test_enqueue__same_key_in_another_collection_is_independent(queue, group):
    other = services.collection_create(group=group, name="other")
    assert enqueue(queue, idempotency_key="k") != enqueue(other, idempotency_key="k")


def test_enqueue__over_max_depth_is_429_queue_full(group):
    bounded = services.collection_create(group=group, name="bounded", max_depth=2)
    enqueue(bounded)
    enqueue(bounded)
    with pytest.raises(err.QueueFull) as exc:
        enqueue(bounded)
    assert (exc.value.status_code, exc.value.code) == (429, "queue_full")
    assert services.collection_depth(collection=bounded) == 2
    message = claim_one(bounded)  # claimed still counts
    with pytest.raises(err.QueueFull):
        enqueue(bounded)
    services.message_ack(collection=bounded, id=message.id, claim_token=message.claim_token)
    enqueue(bounded)


@pytest.mark.parametrize("max_depth", [None, 100])
@pytest.mark.parametrize("size", [1, 3])
def test_enqueue__into_a_deleted_collection_is_404_and_stores_nothing(group, size, max_depth):
    doomed = services.collection_create(group=group, name="doomed", max_depth=max_depth)
    stale = Collection.objects.get(pk=doomed.pk)  # a caller still holding the row
    doomed.delete()
    messages = [services.NewMessage(payload=i, idempotency_key=None if i else "k")
                for i in range(size)]  # fmt: skip
    with pytest.raises(err.CollectionNotFound):
        if size == 1:
            enqueue(stale)
        else:
            services.message_enqueue_batch(collection=stale, messages=messages, enqueued_by="t")
    with pytest.raises(err.CollectionNotFound):  # plain messages (PostgreSQL's fast path)
        services.message_enqueue_batch(
            collection=stale, messages=[services.NewMessage(payload=i) for i in range(3)],
            enqueued_by="t",
        )  # fmt: skip
    with pytest.raises(err.CollectionNotFound):  # only keyed rows: told apart from duplicates
        services.message_enqueue_batch(
            collection=stale, messages=[services.NewMessage(payload=1, idempotency_key="k")],
            enqueued_by="t",
        )  # fmt: skip
    assert not Message.objects.filter(collection_id=stale.pk).exists()


def test_enqueue__ids_are_time_ordered_uuid7(queue):
    first = enqueue(queue)
    results = services.message_enqueue_batch(
        collection=queue, messages=[services.NewMessage(payload=i) for i in range(300)],
        enqueued_by=ENQUEUER,
    )  # fmt: skip
    ids = [first] + [r.id for r in results]
    assert {i.version for i in ids} == {7} and {i.variant for i in ids} == {uuid.RFC_4122}
    assert len(set(ids)) == len(ids)
    assert [r.id for r in results] == sorted(r.id for r in results)  # rising within a batch
    assert first.int >> 80 <= results[0].id.int >> 80  # millisecond timestamps never go back


def test_enqueue_batch__inserts_all_in_order(queue):
    results = services.message_enqueue_batch(
        collection=queue,
        messages=[services.NewMessage(payload=i) for i in range(5)],
        enqueued_by=ENQUEUER,
    )
    assert [r.created for r in results] == [True] * 5
    claimed = claim(queue, 10)
    assert [m.payload for m in claimed] == [0, 1, 2, 3, 4]
    assert [m.id for m in claimed] == [r.id for r in results]


@pytest.mark.parametrize(
    "payloads",
    [
        [{"i": 1, "s": "é"}, None, "x", 2**70],  # flat: serialised with the batch
        [{"i": 1}, {"nested": [1, {"a": "b"}]}, [None]],  # not flat: one by one
    ],
)
def test_enqueue_batch__payloads_round_trip(queue, payloads):
    services.message_enqueue_batch(
        collection=queue,
        messages=[services.NewMessage(payload=p) for p in payloads],
        enqueued_by=ENQUEUER,
    )
    assert [m.payload for m in claim(queue, 10)] == payloads


def test_enqueue_batch__each_payload_is_held_to_the_size_limit(group):
    small = services.collection_create(group=group, name="small", max_payload_bytes=20)
    fits = [services.NewMessage(payload={"k": "x" * 10}) for _ in range(3)]  # 30 bytes together
    services.message_enqueue_batch(collection=small, messages=fits, enqueued_by=ENQUEUER)
    too_big = [*fits, services.NewMessage(payload={"k": "é" * 10})]  # 28 bytes in UTF-8
    with pytest.raises(err.MessageTooLarge) as exc:
        services.message_enqueue_batch(collection=small, messages=too_big, enqueued_by=ENQUEUER)
    assert exc.value.details == {"payload_bytes": 28, "max_payload_bytes": 20, "index": 3}
    assert Message.objects.filter(collection=small).count() == 3


def test_enqueue_batch__an_unstorable_payload_is_named_by_its_index(queue):
    messages = [services.NewMessage(payload={"i": i}) for i in range(3)]
    messages[1] = services.NewMessage(payload={"nul": "a\x00b"})
    with pytest.raises(err.InvalidQueueInput) as exc:
        services.message_enqueue_batch(collection=queue, messages=messages, enqueued_by=ENQUEUER)
    assert exc.value.details["index"] == 1
    assert not Message.objects.exists()


def test_enqueue_batch__an_invalid_entry_rejects_all_with_its_index(queue):
    messages = [services.NewMessage(payload=i) for i in range(4)]
    messages[2] = services.NewMessage(payload=2, priority=5000)
    with pytest.raises(err.InvalidQueueInput) as exc:
        services.message_enqueue_batch(collection=queue, messages=messages, enqueued_by=ENQUEUER)
    assert exc.value.details["index"] == 2
    assert "priority" in exc.value.details["messages"]["2"]
    assert not Message.objects.exists()


def test_enqueue_batch__size_limits(queue):
    with pytest.raises(err.InvalidQueueInput):
        services.message_enqueue_batch(collection=queue, messages=[], enqueued_by=ENQUEUER)
    too_many = [services.NewMessage(payload=i) for i in range(501)]
    with pytest.raises(err.InvalidQueueInput):
        services.message_enqueue_batch(collection=queue, messages=too_many, enqueued_by=ENQUEUER)
    assert not Message.objects.exists()


def test_enqueue_batch__over_max_depth_inserts_nothing(group):
    bounded = services.collection_create(group=group, name="bounded", max_depth=3)
    with pytest.raises(err.QueueFull):
        services.message_enqueue_batch(
            collection=bounded,
            messages=[services.NewMessage(payload=i) for i in range(4)],
            enqueued_by=ENQUEUER,
        )
    assert not Message.objects.exists()


def test_enqueue_batch__idempotent_entries(queue):
    first = enqueue(queue, idempotency_key="a")
    results = services.message_enqueue_batch(
        collection=queue,
        messages=[
            services.NewMessage(payload=1),
            services.NewMessage(payload=2, idempotency_key="a"),
            services.NewMessage(payload=3, idempotency_key="b"),
            services.NewMessage(payload=4, idempotency_key="b"),
        ],
        enqueued_by=ENQUEUER,
    )
    assert [r.created for r in results] == [True, False, True, False]
    assert results[1].id == first
    assert results[2].id == results[3].id
    assert Message.objects.count() == 3


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


def test_claim__batch_decodes_every_payload_kind(queue):
    payloads = [None, 0, "text", [1, {"a": None}], {"é": "✓"}, 2**70, -1.5, True]
    for payload in payloads:
        services.message_enqueue(collection=queue, payload=payload, enqueued_by=ENQUEUER)
    assert [m.payload for m in claim(queue, 100)] == payloads


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


# ---------------------------------------------------------------------- stats


def test_stats__counts_each_kind(queue, frozen):
    enqueue(queue, "old")
    clock.advance(10)
    enqueue(queue, "pending")
    enqueue(queue, "delayed", delay_seconds=60)
    enqueue(queue, "expired", expires_in_seconds=1)
    enqueue(queue, "last-try", max_attempts=1)
    clock.advance(2)
    assert claim_one(queue).payload == "old"  # in flight from now on
    back = claim_one(queue)
    assert back.payload == "pending"
    services.message_release(collection=queue, id=back.id, claim_token=back.claim_token)
    stats = services.collection_stats(collection=queue)
    # live: old (claimed), pending, delayed, expired (not yet swept), last-try
    assert stats.depth == 5
    assert stats.in_flight == 1
    assert stats.delayed == 1
    assert stats.depth_pending == 2  # pending and last-try
    assert stats.dead == 0
    assert stats.oldest_pending_age_seconds == pytest.approx(2)  # "pending", ready since t+10
    assert services.collection_depth(collection=queue) == 5
    assert services.collection_depth_pending(collection=queue) == 2


def test_stats__empty_queue(queue):
    stats = services.collection_stats(collection=queue)
    assert stats == services.QueueStats(0, 0, 0, 0, 0, None)


# ---------------------------------------------------------------- maintenance


def test_reclaim_expired__lapsed_leases_return_to_ready_or_die(queue, frozen):
    enqueue(queue, "again")
    enqueue(queue, "tired", max_attempts=1)
    enqueue(queue, "fresh")
    again, tired = claim(queue, 2, visibility_timeout=5)
    kept = claim_one(queue, visibility_timeout=60)
    clock.advance(5)
    assert services.messages_reclaim_expired(collection=queue) == 2
    assert state_of(again.id) == ("ready", None)
    assert state_of(tired.id) == ("dead", "exhausted")
    assert state_of(kept.id) == ("claimed", None)
    with pytest.raises(err.LeaseLost):
        services.message_ack(collection=queue, id=again.id, claim_token=again.claim_token)
    assert services.messages_reclaim_expired() == 0


def test_sweep_expired__kills_expired_and_prunes_old_dead(group, frozen):
    queue = services.collection_create(group=group, name="sweep", dead_retention=100)
    ready = enqueue(queue, expires_in_seconds=5)
    held_id = enqueue(queue, expires_in_seconds=5)
    enqueue(queue, "keep")
    held = claim(queue, 2, visibility_timeout=600)
    assert {m.id for m in held} == {ready, held_id}
    services.message_release(collection=queue, id=held[0].id, claim_token=held[0].claim_token)
    clock.advance(5)
    assert services.messages_sweep_expired(collection=queue) == services.SweepResult(2, 0)
    assert state_of(ready)[1] == state_of(held_id)[1] == "expired"
    clock.advance(100)
    assert services.messages_sweep_expired() == services.SweepResult(0, 2)
    assert services.collection_stats(collection=queue).dead == 0
    assert services.collection_depth(collection=queue) == 1


def test_drop_exhausted__ready_out_of_attempts_becomes_dead(queue):
    message_id = enqueue(queue)
    Message.objects.filter(id=message_id).update(attempt=3)  # e.g. left by an older release
    assert services.messages_drop_exhausted(collection=queue) == 1
    assert state_of(message_id) == ("dead", "exhausted")


def test_redrive__dead_to_ready_resets_attempts_keeps_error(queue):
    enqueue(queue, "a")
    enqueue(queue, "b")
    for message in claim(queue, 2):
        services.message_fail(
            collection=queue, id=message.id, claim_token=message.claim_token, error="why"
        )
    first = Message.objects.order_by("seq").first()
    assert services.messages_redrive(collection=queue, ids=[first.id]) == 1
    row = services.message_get(collection=queue, id=first.id)
    assert (row.state, row.attempt, row.last_error, row.dead_reason) == ("ready", 0, "why", None)
    assert services.messages_redrive(collection=queue, all=True) == 1
    assert services.messages_redrive(collection=queue, all=True) == 0
    assert len(claim(queue, 5)) == 2


def test_redrive__needs_ids_or_all(queue):
    with pytest.raises(err.InvalidQueueInput):
        services.messages_redrive(collection=queue)


def test_purge__ready_and_optionally_dead(queue):
    enqueue(queue, "held")
    enqueue(queue, "ready")
    enqueue(queue, "dead")
    claim(queue, 1)  # "held" stays claimed
    ready, dead = claim(queue, 2)
    services.message_fail(collection=queue, id=dead.id, claim_token=dead.claim_token, error="x")
    services.message_release(collection=queue, id=ready.id, claim_token=ready.claim_token)
    assert services.collection_purge(collection=queue) == 1
    assert services.collection_purge(collection=queue, include_dead=True) == 1
    stats = services.collection_stats(collection=queue)
    assert (stats.depth, stats.in_flight, stats.dead) == (1, 1, 0)


def test_resolve_then_enqueue_through_the_chain(tree):
    services.collection_create(group=tree["root"], name="emails")
    app = AppFactory(group=tree["grandchild"])
    queue = services.collection_resolve(app=app, name="emails")
    enqueue(queue)
    assert services.collection_depth(collection=queue) == 1


def test_enqueue_batch__options_per_entry(queue, frozen):
    at = clock.now() + timedelta(minutes=5)
    results = services.message_enqueue_batch(
        collection=queue,
        messages=[
            services.NewMessage(payload={"plain": "é"}),
            services.NewMessage(
                payload=[1, 2], priority=-7, delay_seconds=30, expires_in_seconds=90,
                max_attempts=9, idempotency_key='k"ey',
            ),
            services.NewMessage(payload=None, deliver_after=at, expires_at=at),
        ],
        enqueued_by="user:1",
    )  # fmt: skip
    plain, rich, nulls = (services.message_get(collection=queue, id=r.id) for r in results)
    assert (plain.payload, plain.priority, plain.deliver_after) == ({"plain": "é"}, 0, clock.now())
    assert (plain.max_attempts, plain.expires_at, plain.idempotency_key) == (3, None, None)
    assert (rich.payload, rich.priority, rich.max_attempts, rich.idempotency_key) == (
        [1, 2], -7, 9, 'k"ey',
    )  # fmt: skip
    assert rich.deliver_after == clock.now() + timedelta(seconds=30)
    assert rich.expires_at == clock.now() + timedelta(seconds=90)
    assert (nulls.payload, nulls.deliver_after, nulls.expires_at) == (None, at, at)
    assert {m.enqueued_by for m in (plain, rich, nulls)} == {"user:1"}


def test_maintenance__without_a_collection_covers_every_queue(queue, group, frozen):
    other = services.collection_create(group=group, name="other")
    for q in (queue, other):
        enqueue(q, expires_in_seconds=100)
        enqueue(q)
        claim(q, 1, visibility_timeout=5)
    clock.advance(5)
    assert services.messages_reclaim_expired() == 2
    clock.advance(100)
    assert services.messages_sweep_expired() == services.SweepResult(2, 0)
    assert Message.objects.filter(state="ready").count() == 2


def test_reads__collections_of_a_group_and_its_dead_list(queue, group, frozen):
    services.collection_create(group=group, name="alpha")
    services.collection_create(group=group, name="store", kind="docs")
    assert [c.name for c in services.collections_of(group=group)] == ["alpha", "jobs"]
    first, second = enqueue(queue), enqueue(queue)
    for message in claim(queue, 2):
        services.message_fail(
            collection=queue, id=message.id, claim_token=message.claim_token, error=""
        )
        clock.advance(1)
    assert [m.id for m in services.messages_dead(collection=queue)] == [second, first]


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
