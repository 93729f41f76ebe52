"""Group-queue services, enqueue, one and batch.

Rows of the SPEC §2 operations table, on both databases (split from
test_services.py along the seams of the services package)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Collection, Message
from queueproject import clock
from tests.groupqueues.conftest import ENQUEUER, claim, claim_one, enqueue

pytestmark = pytest.mark.django_db


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
