"""Ordering keys, fairness and limits (SPEC §7), one rule per test, on both
databases: a key's messages one at a time in enqueue order across nack,
retry, extend, release and lease expiry; a dead head unblocks its key;
messages without a key as before; fairness order; each limit."""

from __future__ import annotations

from typing import Any

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Collection, Message
from queueproject import clock
from tests.groupqueues.conftest import ENQUEUER, WORKER, claim, enqueue

pytestmark = pytest.mark.django_db


def _ids(messages):
    return [m.id for m in messages]


def _ack(queue, messages):
    for m in messages:
        services.message_ack(collection=queue, id=m.id, claim_token=m.claim_token)


def test_key__one_at_a_time_in_enqueue_order(queue):
    a1, a2, a3 = (enqueue(queue, i, ordering_key="a") for i in range(3))
    plain = enqueue(queue, "plain")
    b1 = enqueue(queue, "b", ordering_key="b")
    got = claim(queue, 10)
    assert _ids(got) == [a1, plain, b1]  # one of each key, plus the keyless one
    assert claim(queue, 10) == []
    _ack(queue, got)
    assert _ids(claim(queue, 10)) == [a2]
    assert Message.objects.get(id=a3).state == "ready"


def test_key__priority_does_not_jump_the_key(queue):
    first = enqueue(queue, 1, ordering_key="k")
    enqueue(queue, 2, ordering_key="k", priority=100)
    assert _ids(claim(queue, 10)) == [first]


def test_key__a_nacked_head_keeps_its_place(queue, frozen):
    a1 = enqueue(queue, 1, ordering_key="a")
    a2 = enqueue(queue, 2, ordering_key="a")
    (m,) = claim(queue)
    services.message_nack(collection=queue, id=m.id, claim_token=m.claim_token, delay_seconds=5)
    assert claim(queue, 10) == []  # a2 waits behind the head's retry
    clock.advance(6)
    (again,) = claim(queue, 10)
    assert again.id == a1 and again.attempt == 2
    _ack(queue, [again])
    assert _ids(claim(queue, 10)) == [a2]


def test_key__released_and_extended_heads_keep_the_key(queue, frozen):
    a1 = enqueue(queue, 1, ordering_key="a")
    enqueue(queue, 2, ordering_key="a")
    (m,) = claim(queue)
    services.message_extend(
        collection=queue, id=m.id, claim_token=m.claim_token, visibility_timeout=600
    )
    clock.advance(60)  # past the first lease, within the extension
    assert claim(queue, 10) == []
    services.message_release(collection=queue, id=m.id, claim_token=m.claim_token)
    assert _ids(claim(queue, 10)) == [a1]


def test_key__a_lapsed_lease_hands_the_head_out_again_not_the_next(queue, frozen):
    a1 = enqueue(queue, 1, ordering_key="a")
    enqueue(queue, 2, ordering_key="a")
    claim(queue, visibility_timeout=10)
    clock.advance(11)
    (again,) = claim(queue, 10)
    assert again.id == a1


def test_key__a_dead_head_unblocks_the_key_and_says_it_was_the_head(queue):
    a1 = enqueue(queue, 1, ordering_key="a")
    a2 = enqueue(queue, 2, ordering_key="a")
    (m,) = claim(queue)
    services.message_fail(collection=queue, id=m.id, claim_token=m.claim_token, error="boom")
    dead = Message.objects.get(id=a1)
    assert dead.state == "dead" and dead.died_key_head
    assert _ids(claim(queue, 10)) == [a2]


def test_key__an_exhausted_head_dies_as_head(queue):
    a1 = enqueue(queue, 1, ordering_key="a", max_attempts=1)
    a2 = enqueue(queue, 2, ordering_key="a")
    (m,) = claim(queue)
    services.message_nack(collection=queue, id=m.id, claim_token=m.claim_token, delay_seconds=0)
    assert Message.objects.get(id=a1).died_key_head
    assert _ids(claim(queue, 10)) == [a2]


def test_key__an_expired_waiting_message_is_not_a_head(queue, frozen):
    enqueue(queue, 1, ordering_key="a")
    a2 = enqueue(queue, 2, ordering_key="a", expires_in_seconds=5)
    clock.advance(6)
    services.messages_sweep_expired(collection=queue)
    dead = Message.objects.get(id=a2)
    assert dead.state == "dead" and not dead.died_key_head


def test_key__a_redriven_dead_head_waits_for_the_claimed_one(queue):
    a1 = enqueue(queue, 1, ordering_key="a")
    a2 = enqueue(queue, 2, ordering_key="a")
    (m,) = claim(queue)
    services.message_fail(collection=queue, id=m.id, claim_token=m.claim_token, error="x")
    (m2,) = claim(queue)
    assert m2.id == a2
    services.messages_redrive(collection=queue, ids=[a1])
    assert claim(queue, 10) == []  # a1 is first again, but a2 is still claimed
    _ack(queue, [m2])
    assert _ids(claim(queue, 10)) == [a1]


def test_key__batch_enqueue_keeps_the_order(queue):
    results = services.message_enqueue_batch(
        collection=queue,
        messages=[services.NewMessage(payload=i, ordering_key=f"k{i % 2}") for i in range(6)],
        enqueued_by=ENQUEUER,
    )
    ids = [r.id for r in results]
    seen = []
    while batch := claim(queue, 10):
        seen += _ids(batch)
        _ack(queue, batch)
    assert seen == [ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]]


def test_key__bad_ordering_key_is_refused_with_the_field(queue):
    for bad in ("", "x" * 201, 5):
        with pytest.raises(err.InvalidQueueInput) as exc:
            enqueue(queue, 1, ordering_key=bad)
        assert "ordering_key" in str(exc.value.details)


def test_no_key__messages_keep_the_plain_order_and_path(queue):
    ids = [enqueue(queue, i) for i in range(3)]
    assert not Collection.objects.get(pk=queue.pk).uses_ordering_keys
    assert _ids(claim(queue, 10)) == ids


def test_key__an_old_copy_of_the_collection_still_honours_keys(queue):
    stale = Collection.objects.get(pk=queue.pk)
    a1 = enqueue(queue, 1, ordering_key="a")
    enqueue(queue, 2, ordering_key="a")
    got = services.message_claim(collection=stale, worker_id=WORKER, n=10)
    assert _ids(got) == [a1]


# ------------------------------------------------------------------ fairness


def _fill_tenants(queue, counts):
    ids = {}
    for tenant, count in counts.items():
        results = services.message_enqueue_batch(
            collection=queue,
            messages=[services.NewMessage(payload=i) for i in range(count)],
            enqueued_by=tenant,
        )
        ids[tenant] = [r.id for r in results]
    return ids


def test_fairness__enqueuer_round_robin(queue):
    services.collection_update(collection=queue, fairness="enqueuer")
    ids = _fill_tenants(queue, {"app:a": 20, "app:b": 2})
    got = set(_ids(claim(queue, 4)))  # handed out in claim order
    assert got == {ids["app:a"][0], ids["app:b"][0], ids["app:a"][1], ids["app:b"][1]}


def test_fairness__without_it_the_backlog_comes_first(queue):
    ids = _fill_tenants(queue, {"app:a": 20, "app:b": 2})
    assert _ids(claim(queue, 4)) == ids["app:a"][:4]


def test_fairness__priority_still_wins(queue):
    services.collection_update(collection=queue, fairness="enqueuer")
    ids = _fill_tenants(queue, {"app:a": 3})
    urgent = services.message_enqueue(
        collection=queue, payload=1, enqueued_by="app:b", priority=5
    ).id
    got = _ids(claim(queue, 2))
    assert got == [urgent, ids["app:a"][0]]


def _fill_priority(queue, tenant, count, priority):
    results = services.message_enqueue_batch(
        collection=queue,
        messages=[services.NewMessage(payload=i, priority=priority) for i in range(count)],
        enqueued_by=tenant,
    )
    return [r.id for r in results]


def test_fairness__large_backlogs_alternate_exactly(queue):
    """Every tenant with more than its share: one round from each in turn
    (PostgreSQL reads only each tenant's first share and one more)."""
    services.collection_update(collection=queue, fairness="enqueuer")
    ids = _fill_tenants(queue, {"app:a": 30, "app:b": 30, "app:c": 30})
    assert set(_ids(claim(queue, 9))) == {i for t in ids.values() for i in t[:3]}
    assert set(_ids(claim(queue, 3))) == {t[3] for t in ids.values()}


def test_fairness__a_tenants_backlog_of_higher_priority_comes_whole(queue):
    """Priority first, even past a tenant's share of the claim (PostgreSQL
    then chooses from every tenant's first n, not only their first shares)."""
    services.collection_update(collection=queue, fairness="enqueuer")
    urgent = _fill_priority(queue, "app:a", 20, 5)
    _fill_priority(queue, "app:b", 20, 0)
    assert set(_ids(claim(queue, 10))) == set(urgent[:10])


def test_fairness__a_short_tenant_leaves_its_share_to_the_others(queue):
    services.collection_update(collection=queue, fairness="enqueuer")
    ids = _fill_tenants(queue, {"app:a": 1, "app:b": 30})
    assert set(_ids(claim(queue, 10))) == {ids["app:a"][0], *ids["app:b"][:9]}


def test_fairness__by_ordering_key(queue):
    services.collection_update(collection=queue, fairness="ordering_key")
    x = [enqueue(queue, i, ordering_key="x") for i in range(3)]
    y = enqueue(queue, "y", ordering_key="y")
    z = enqueue(queue, "z")
    assert set(_ids(claim(queue, 10))) == {x[0], y, z}


def test_fairness__turned_on_later_repartitions_waiting_messages(queue):
    ids = _fill_tenants(queue, {"app:a": 5, "app:b": 1})
    services.collection_update(collection=queue, fairness="enqueuer")
    assert set(_ids(claim(queue, 2))) == {ids["app:a"][0], ids["app:b"][0]}


# -------------------------------------------------------------------- limits


def test_limit__max_in_flight(queue):
    services.collection_update(collection=queue, max_in_flight=3)
    for i in range(10):
        enqueue(queue, i)
    first = claim(queue, 10)
    assert len(first) == 3
    assert claim(queue, 10) == []
    _ack(queue, first[:2])
    assert len(claim(queue, 10)) == 2


def test_limit__max_in_flight_counts_only_running_leases(queue, frozen):
    services.collection_update(collection=queue, max_in_flight=1)
    enqueue(queue, 1)
    enqueue(queue, 2)
    claim(queue, visibility_timeout=10)
    assert claim(queue) == []
    clock.advance(11)
    assert len(claim(queue, 10)) == 1  # the lapsed one again, no more


def test_limit__max_in_flight_per_key_is_per_enqueuer(queue):
    services.collection_update(collection=queue, max_in_flight_per_key=2)
    ids = _fill_tenants(queue, {"app:a": 5, "app:b": 5})
    got = set(_ids(claim(queue, 10)))
    assert got == set(ids["app:a"][:2] + ids["app:b"][:2])
    assert claim(queue, 10) == []


def test_limit__max_in_flight_per_key_with_fairness_by_enqueuer_is_per_enqueuer(queue):
    services.collection_update(collection=queue, fairness="enqueuer", max_in_flight_per_key=1)
    ids = _fill_tenants(queue, {"app:a": 3, "app:b": 3})
    assert set(_ids(claim(queue, 10))) == {ids["app:a"][0], ids["app:b"][0]}
    assert claim(queue, 10) == []


def test_limit__max_in_flight_per_key_with_fairness_by_ordering_key(queue):
    """Per ordering key, and the messages without one count together (their
    partition is ""): a keyed message is alone in flight anyway, so the limit
    only holds the keyless ones back."""
    services.collection_update(collection=queue, fairness="ordering_key", max_in_flight_per_key=2)
    keyless = [enqueue(queue, i) for i in range(4)]
    a1 = enqueue(queue, "a1", ordering_key="a")
    enqueue(queue, "a2", ordering_key="a")
    b1 = enqueue(queue, "b1", ordering_key="b")
    assert set(_ids(claim(queue, 10))) == {*keyless[:2], a1, b1}
    assert claim(queue, 10) == []


def test_limit__rate_limit(queue, frozen):
    services.collection_update(collection=queue, rate_limit="3/s")
    for i in range(10):
        enqueue(queue, i)
    assert len(claim(queue, 10)) == 3
    assert claim(queue, 10) == []
    clock.advance(0.34)
    assert len(claim(queue, 10)) == 1
    clock.advance(10)
    assert len(claim(queue, 10)) == 3  # the bucket holds at most n


def test_limit__settings_are_checked(queue):
    for name, bad in (("rate_limit", "3/week"), ("rate_limit", "0/s"), ("rate_limit", 3),
                      ("max_in_flight", 0), ("max_in_flight_per_key", -1),
                      ("fairness", "tenant")):  # fmt: skip
        setting: dict[str, Any] = {name: bad}
        with pytest.raises(err.InvalidQueueInput) as exc:
            services.collection_update(collection=queue, **setting)
        assert name in str(exc.value.details)
    updated = services.collection_update(collection=queue, rate_limit="1000/min")
    assert updated.rate_limit == "1000/min"
    assert services.collection_update(collection=queue, rate_limit=None).rate_limit is None


def test_limit__an_old_copy_of_the_collection_still_honours_limits(queue):
    stale = Collection.objects.get(pk=queue.pk)
    services.collection_update(collection=queue, max_in_flight=1)
    for i in range(3):
        enqueue(queue, i)
    got = services.message_claim(collection=stale, worker_id=WORKER, n=10)
    assert len(got) == 1


# --------------------------------------------------------- replace, debounce


def test_replace__keeps_id_and_position(queue):
    first = enqueue(queue, "old", idempotency_key="report", priority=1)
    later = enqueue(queue, "later", priority=1)
    result = services.message_enqueue(
        collection=queue, payload="new", enqueued_by=ENQUEUER, idempotency_key="report",
        on_conflict="replace", priority=1,
    )  # fmt: skip
    assert (result.id, result.created, result.replaced) == (first, False, True)
    got = claim(queue, 10)
    assert _ids(got) == [first, later]
    assert got[0].payload == "new"


def test_replace__a_claimed_holder_is_left_alone(queue):
    first = enqueue(queue, "old", idempotency_key="report")
    claim(queue)
    result = services.message_enqueue(
        collection=queue, payload="new", enqueued_by=ENQUEUER, idempotency_key="report",
        on_conflict="replace",
    )  # fmt: skip
    assert (result.id, result.replaced) == (first, False)
    assert Message.objects.get(id=first).payload == "old"


def test_replace__without_it_the_holder_keeps_its_payload(queue):
    first = enqueue(queue, "old", idempotency_key="report")
    result = services.message_enqueue(
        collection=queue, payload="new", enqueued_by=ENQUEUER, idempotency_key="report"
    )
    assert (result.id, result.replaced) == (first, False)
    assert Message.objects.get(id=first).payload == "old"


def test_debounce__due_that_long_after_the_last_replace(queue, frozen):
    def send(payload):
        return services.message_enqueue(
            collection=queue, payload=payload, enqueued_by=ENQUEUER, idempotency_key="r",
            on_conflict="replace", debounce_seconds=10,
        )  # fmt: skip

    first = send(1).id
    clock.advance(8)
    assert claim(queue) == []
    assert send(2).replaced
    clock.advance(8)  # 16 s after the first, 8 after the last
    assert claim(queue) == []
    clock.advance(3)
    (m,) = claim(queue)
    assert (m.id, m.payload) == (first, 2)


def test_replace__bad_input_names_the_field(queue):
    cases = (
        ({"on_conflict": "replace"}, "on_conflict"),  # no idempotency key
        ({"on_conflict": "merge", "idempotency_key": "k"}, "on_conflict"),
        ({"debounce_seconds": -1}, "debounce_seconds"),
        ({"debounce_seconds": 1, "delay_seconds": 1}, "debounce_seconds"),
    )
    for opts, field in cases:
        with pytest.raises(err.InvalidQueueInput) as exc:
            services.message_enqueue(collection=queue, payload=1, enqueued_by=ENQUEUER, **opts)
        assert field in str(exc.value.details), opts
