"""Group-queue services, maintenance: reclaim, sweep, prune, drop, redrive, purge.

Rows of the SPEC §2 operations table, on both databases (split from
test_services.py along the seams of the services package)."""

from __future__ import annotations

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Message
from queueproject import clock
from tests.groupqueues.conftest import claim, claim_one, enqueue, state_of

pytestmark = pytest.mark.django_db


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
    ready_state, held_state = state_of(ready), state_of(held_id)
    assert ready_state is not None and held_state is not None
    assert ready_state[1] == held_state[1] == "expired"
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
    assert first is not None
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
