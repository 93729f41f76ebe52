"""The claim floor (issue 12): claims start their index scans where the last
maintenance pass found the head of the collection, so that the dead entries
below it, which vacuum cannot remove behind a long-held transaction, are not
walked by every claim; the claim order and every message stay reachable."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta

import psycopg
import pytest
from django.db import connection

from groupqueues import services, sql
from groupqueues.models import ClaimFloor, Collection, Message
from queueproject import clock
from tests.conftest import is_postgres, subprocess_env
from tests.groupqueues.conftest import WORKER, claim, claim_one, enqueue

pytestmark = pytest.mark.django_db


def refresh() -> None:
    services.collections_refresh_claim_floors()


def test_refresh__sets_the_floor_on_postgresql_only(queue, frozen):
    enqueue(queue)
    assert services.collections_refresh_claim_floors() == (1 if is_postgres() else 0)
    assert ClaimFloor.objects.filter(collection=queue).exists() == is_postgres()


def test_floor__a_higher_priority_enqueued_after_the_pass_comes_first(queue, frozen):
    low = enqueue(queue)
    refresh()
    high = enqueue(queue, priority=5)
    assert [m.id for m in claim(queue, 2)] == [high, low]


def test_floor__a_released_message_comes_back_in_its_old_place(queue, frozen):
    first, second = enqueue(queue), enqueue(queue)
    held = claim_one(queue)
    refresh()
    services.message_release(collection=queue, id=held.id, claim_token=held.claim_token)
    assert [m.id for m in claim(queue, 2)] == [first, second]


def test_floor__lapsed_and_reclaimed_leases_are_claimed_again(queue, frozen):
    lapsing, reclaimed = enqueue(queue), enqueue(queue)
    claim(queue, 2, visibility_timeout=1)
    refresh()
    clock.advance(2)
    services.messages_reclaim_expired(collection=queue)  # both back to ready …
    refresh()
    clock.advance(1)
    assert [m.id for m in claim(queue, 2)] == [lapsing, reclaimed]
    refresh()
    clock.advance(31)  # … and lapsed again: claimed through the lease index
    assert [m.id for m in claim(queue, 2)] == [lapsing, reclaimed]


def straggler(queue: Collection, seconds_before: float) -> uuid.UUID:
    """A message whose ready time lies before the last pass: as an enqueue that
    read the clock and committed more than the margin later."""
    message_id = enqueue(queue)
    late = clock.now() - timedelta(seconds=seconds_before)
    Message.objects.filter(id=message_id).update(deliver_after=late, enqueued_at=late)
    return message_id


@pytest.mark.postgres
def test_floor__a_straggler_below_it_waits_for_the_next_pass(queue, frozen):
    head = enqueue(queue)
    refresh()
    late = straggler(queue, 10)
    assert [m.id for m in claim(queue, 2)] == [head]
    refresh()
    assert [m.id for m in claim(queue, 2)] == [late]


@pytest.mark.postgres
def test_floor__a_straggler_within_the_margin_is_claimed_at_once(queue, frozen):
    refresh()
    late = straggler(queue, services.CLAIM_FLOOR_MARGIN.total_seconds() / 2)
    assert [m.id for m in claim(queue, 2)] == [late]


@pytest.mark.postgres
def test_floor__a_stale_or_future_floor_is_ignored(queue, frozen):
    refresh()
    late = straggler(queue, 10)
    clock.advance(sql.FLOOR_FRESH_SECONDS + 1)
    assert [m.id for m in claim(queue, 2)] == [late]
    # computed "later" than the claim's clock (clocks apart): ignored too
    clock.advance(30)
    refresh()
    clock.advance(-30)
    second = straggler(queue, 100)
    assert [m.id for m in claim(queue, 2)] == [second]


@pytest.mark.postgres
def test_floor__computed_a_moment_after_the_claim_read_its_clock_is_used(queue, frozen):
    head = enqueue(queue)
    clock.advance(10.01)  # a refresh that read its clock just after the claim did
    refresh()
    clock.advance(-0.01)
    late = straggler(queue, 100)  # below the floor
    assert [m.id for m in claim(queue, 2)] == [head]  # the floor is used: the straggler waits
    refresh()
    assert [m.id for m in claim(queue, 2)] == [late]


def _scan_buffers(queue: Collection) -> int:
    """Shared buffers the claim's candidate scans (``lapsed`` and ``ready``)
    touch, from EXPLAIN (ANALYZE, BUFFERS) of a claim of 10, rolled back."""
    now = clock.now()
    params: dict[str, int | str | bool | datetime] = {
        "collection_id": queue.pk, "now": now, "n": 10, "worker_id": WORKER,
        "lease_expires_at": now, "async_commit": False,
    }  # fmt: skip
    with connection.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql.CLAIM_POSTGRES, params)
        plan = cur.fetchone()[0]
        cur.execute("ROLLBACK")
    plan = json.loads(plan) if isinstance(plan, str) else plan
    scans = [node for node in _nodes(plan[0]["Plan"])
             if node.get("Subplan Name") in ("CTE lapsed", "CTE ready")]  # fmt: skip
    assert len(scans) == 2, plan
    return sum(node["Shared Hit Blocks"] + node["Shared Read Blocks"] for node in scans)


def _nodes(node):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_claim__behind_a_held_transaction_does_not_walk_the_dead_head(queue, frozen):
    news = [services.NewMessage(payload=i) for i in range(500)]
    for _ in range(8):  # ready times further apart than the floor's margin
        services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="t")
        clock.advance(3)
    with psycopg.connect(subprocess_env()["DATABASE_URL"]) as holder:
        holder.execute("SELECT txid_current()")  # held open: nothing below is vacuumable
        for _ in range(35):
            held = claim(queue, 100)
            services.message_ack_batch(collection=queue, acks=[(m.id, m.claim_token) for m in held])
        with connection.cursor() as cur:
            cur.execute("VACUUM groupqueues_message")  # removes nothing: the horizon is held
        clock.advance(40)  # the acked claims' leases lie in the past too (and below the margin)
        walking = _scan_buffers(queue)
        refresh()
        seeking = _scan_buffers(queue)
        holder.rollback()
    assert seeking * 4 < walking, (seeking, walking)
    assert len(claim(queue, 10)) == 10
