"""The incremental claim floor (issue 12): claimers advance the floor every
QUEUE_CLAIM_FLOOR_INTERVAL (0.5 s) from where it was (``services.collection_advance_claim_floor``,
``sql.CLAIM_FLOOR_ADVANCE_POSTGRES``), so that behind a held transaction a
claim walks about one interval of dead entries. Every message stays
claimable: those put back in their old place (release, reclaim) lower the
floor, the others come back above it (nack, retry, enqueue, a higher
priority) or are claimed through the lease floor; stragglers wait for the
next full refresh. Concurrent refreshers add one version between them."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import connection

from groupqueues import services, sql
from groupqueues.models import ClaimFloor, Collection, Message
from groupqueues.services import claim_floor
from queueproject import clock
from tests.conftest import subprocess_env
from tests.groupqueues.conftest import claim, claim_one, enqueue
from tests.groupqueues.test_claim_floor import _scan_buffers, straggler

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def refresh() -> None:
    services.collections_refresh_claim_floors()


def advance(queue: Collection) -> bool:
    return services.collection_advance_claim_floor(queue.pk, interval=1)


def newest(queue: Collection) -> ClaimFloor:
    return ClaimFloor.objects.filter(collection=queue).order_by("-version")[0]


def position(message_id: uuid.UUID) -> tuple:
    return Message.objects.filter(id=message_id).values_list("deliver_after", "seq").get()


def settle() -> None:
    """Let the messages' ready times fall more than the margin behind the clock,
    so that the floor is the head of the collection, not ``now - margin``."""
    clock.advance(3)


def take(queue: Collection, n: int) -> list[uuid.UUID]:
    """Claim and ack n messages; their ids."""
    held = claim(queue, n)
    services.message_ack_batch(collection=queue, acks=[(m.id, m.claim_token) for m in held])
    return [m.id for m in held]


def test_advance__moves_past_what_was_claimed_since(queue, frozen):
    ids = [enqueue(queue) for _ in range(6)]
    settle()
    refresh()
    assert (newest(queue).ready, newest(queue).seq) == position(ids[0])
    take(queue, 4)
    clock.advance(1.5)
    assert advance(queue)
    assert (newest(queue).ready, newest(queue).seq) == position(ids[4])
    assert [m.id for m in claim(queue, 5)] == ids[4:]


def test_advance__fenced_by_the_interval_and_by_freshness(queue, frozen):
    enqueue(queue)
    assert not advance(queue)  # no floor yet: the full refresh makes the first
    refresh()
    assert not advance(queue)  # computed less than an interval ago
    clock.advance(1.1)
    assert advance(queue)
    assert not advance(queue)  # the first of two advances in the interval adds the version
    clock.advance(sql.FLOOR_FRESH_SECONDS + 1)
    assert not advance(queue)  # stale: claims ignore it, and so does the advance
    assert ClaimFloor.objects.filter(collection=queue).count() == 2  # older ones deleted


def test_advance__a_released_message_lowers_the_floor_and_comes_back_first(queue, frozen):
    first, second, third = enqueue(queue), enqueue(queue), enqueue(queue)
    settle()
    refresh()
    held, acked = claim(queue, 2)
    services.message_ack(collection=queue, id=acked.id, claim_token=acked.claim_token)
    clock.advance(1.5)
    assert advance(queue)  # past both: the floor does not count claimed rows
    assert newest(queue).seq == position(third)[1]
    services.message_release(collection=queue, id=held.id, claim_token=held.claim_token)
    assert newest(queue).seq == position(first)[1]
    assert [m.id for m in claim(queue, 3)] == [first, third]
    assert second == acked.id


def test_advance__a_reclaimed_message_lowers_the_floor_and_comes_back_first(queue, frozen):
    first, second = enqueue(queue), enqueue(queue)
    settle()
    refresh()
    claim_one(queue, visibility_timeout=1)
    clock.advance(1.5)
    assert advance(queue)
    assert newest(queue).seq == position(second)[1]
    clock.advance(1)
    assert services.messages_reclaim_expired(collection=queue) == 1
    assert newest(queue).seq == position(first)[1]
    clock.advance(5)
    assert [m.id for m in claim(queue, 2)] == [first, second]


def test_advance__a_lease_that_lapses_above_or_below_the_lease_floor_is_claimed(queue, frozen):
    early, late, rest = enqueue(queue), enqueue(queue), enqueue(queue)
    refresh()
    claim_one(queue, visibility_timeout=1)  # lapses before the next advance
    clock.advance(5)
    claim_one(queue, visibility_timeout=2)  # lapses after it
    assert advance(queue)
    assert newest(queue).lease <= clock.now() + claim_floor.LEASE_LEAD
    clock.advance(3)
    assert [m.id for m in claim(queue, 3)] == [early, late, rest]


def test_advance__a_lease_straggler_is_given_back_by_the_maintenance_reclaim(queue, frozen):
    lost, other = enqueue(queue), enqueue(queue)
    settle()
    refresh()
    held = claim_one(queue)
    clock.advance(1.5)
    assert advance(queue)
    # as a claim that read its clock long before the advance and committed
    # after it: a lease below the lease floor
    Message.objects.filter(id=held.id).update(lease_expires_at=newest(queue).lease
                                              - timedelta(seconds=1))  # fmt: skip
    assert [m.id for m in claim(queue, 2)] == [other]  # its lapse is not seen by claims …
    assert services.messages_reclaim_expired(collection=queue) == 1  # … but by maintenance
    assert [m.id for m in claim(queue, 2)] == [lost]


def test_advance__nacked_retried_enqueued_and_higher_priority_are_claimed(queue, frozen):
    nacked, retried = enqueue(queue), enqueue(queue)
    settle()
    refresh()
    a, b = claim(queue, 2)
    services.message_nack(collection=queue, id=a.id, claim_token=a.claim_token, delay_seconds=3)
    services.message_nack(collection=queue, id=b.id, claim_token=b.claim_token)  # backoff ≤ 1 s
    clock.advance(1.5)
    assert advance(queue)  # past where both were: they came back later
    later = enqueue(queue)
    urgent = enqueue(queue, priority=5)
    clock.advance(1.5)
    assert advance(queue)
    assert newest(queue).priority == 5  # the priority floor rose with the urgent one
    assert [m.id for m in claim(queue, 4)] == [urgent, retried, later, nacked]


def test_advance__a_higher_priority_released_after_the_floor_rose_is_claimed(queue, frozen):
    enqueue(queue)
    settle()
    refresh()  # priority floor 0
    urgent = enqueue(queue, priority=7)
    settle()
    held = claim_one(queue)  # through ready_above
    assert held.id == urgent
    take(queue, 1)
    later = [enqueue(queue) for _ in range(2)]
    settle()
    assert advance(queue)  # priority floor still 0, ready floor past the urgent one's time
    assert newest(queue).seq == position(later[0])[1]
    services.message_release(collection=queue, id=held.id, claim_token=held.claim_token)
    clock.advance(1.5)
    assert advance(queue)  # the priority floor rises to 7, the ready floor falls to it
    assert (newest(queue).priority, newest(queue).seq) == (7, position(urgent)[1])
    assert [m.id for m in claim(queue, 3)] == [urgent, *later]


def test_advance__a_priority_lowered_below_the_floor_lowers_the_floor(queue, frozen):
    enqueue(queue)
    settle()
    refresh()  # priority floor 0
    moved = enqueue(queue, priority=5)
    settle()
    held = claim_one(queue)  # through ready_above
    take(queue, 1)
    later = [enqueue(queue) for _ in range(2)]
    settle()
    assert advance(queue)  # ready floor past the moved one's time
    services.message_release(collection=queue, id=held.id, claim_token=held.claim_token)
    services.message_set_priority(collection=queue, id=moved, priority=0)
    assert [m.id for m in claim(queue, 3)] == [moved, *later]


def test_advance__a_straggler_below_it_waits_for_the_next_full_refresh(queue, frozen):
    head = enqueue(queue)
    refresh()
    clock.advance(1.5)
    assert advance(queue)
    late = straggler(queue, 10)
    assert [m.id for m in claim(queue, 2)] == [head]
    refresh()
    assert [m.id for m in claim(queue, 2)] == [late]


def _database_url() -> str:
    return subprocess_env()["DATABASE_URL"]


def _advance_params(queue: Collection) -> dict:
    return {"collection_id": queue.pk, "now": clock.now(), "interval": timedelta(seconds=1),
            "margin": services.CLAIM_FLOOR_MARGIN,
            "lease_lead": claim_floor.LEASE_LEAD}  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_advance__concurrent_refreshers_add_one_version_without_waiting(queue):
    enqueue(queue)
    refresh()
    before = newest(queue).version
    time.sleep(1.1)
    with psycopg.connect(_database_url()) as first, psycopg.connect(_database_url()) as second:
        second.autocommit = True
        assert first.execute(sql.CLAIM_FLOOR_ADVANCE_POSTGRES, _advance_params(queue)).fetchone() \
            == (1, 1)  # fmt: skip
        started = time.monotonic()
        # the first holds its lock: the second skips its turn at once
        assert second.execute(
            sql.CLAIM_FLOOR_ADVANCE_POSTGRES, _advance_params(queue)
        ).fetchone() == (0, 1)
        assert time.monotonic() - started < 1
        first.commit()
        # committed: the floor is fresh, nothing to do
        assert second.execute(
            sql.CLAIM_FLOOR_ADVANCE_POSTGRES, _advance_params(queue)
        ).fetchone() == (0, 1)
    assert newest(queue).version == before + 1


@pytest.mark.django_db(transaction=True)
def test_advance__waits_out_a_release_under_way_and_its_version_wins(queue):
    first, second = enqueue(queue), enqueue(queue)
    refresh()
    held = claim_one(queue)
    time.sleep(1.1)
    with psycopg.connect(_database_url()) as releaser:
        # a release in another session takes the floor's lock and adds its
        # version, not yet committed
        releaser.execute("UPDATE groupqueues_message SET state = 'ready', claim_token = NULL,"
                         " claimed_by = '', claimed_at = NULL, lease_expires_at = NULL"
                         " WHERE id = %s", (held.id,))  # fmt: skip
        releaser.execute(sql.CLAIM_FLOOR_LOCK_POSTGRES, {"collection_id": queue.pk})
        assert releaser.execute(
            sql.CLAIM_FLOOR_LOWER_TO_MESSAGE_POSTGRES, {"collection_id": queue.pk, "id": held.id}
        ).fetchone() == (1, 1)
        assert not services.collection_advance_claim_floor(queue.pk, interval=1)
        releaser.commit()
    floor = newest(queue)
    assert (floor.ready, floor.seq) <= position(first)
    assert [m.id for m in claim(queue, 2)] == [first, second]


@pytest.mark.django_db(transaction=True)
def test_claims__advance_the_floor_about_every_interval_behind_a_held_transaction(queue, settings):
    settings.QUEUE_CLAIM_FLOOR_INTERVAL = 0.3
    claim_floor._next_try.clear()
    news = [services.NewMessage(payload=i) for i in range(500)]
    for _ in range(10):
        services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="t")
    # ready since 10 s: the floor is the head, not ``now - margin``
    ready_since = clock.now() - timedelta(seconds=10)
    Message.objects.filter(collection=queue).update(deliver_after=ready_since)
    refresh()
    with psycopg.connect(_database_url()) as holder:
        holder.execute("SELECT txid_current()")  # held open: nothing below is vacuumable
        versions = [newest(queue).version]
        started = time.monotonic()
        while time.monotonic() - started < 2.5:
            take(queue, 20)  # each claim may advance the floor (services.claim_floor)
            time.sleep(0.02)
            versions.append(newest(queue).version)
        assert connection.vendor == "postgresql"
        floor = newest(queue)
        seeking = _scan_buffers(queue)
        holder.rollback()
    # about one version per interval (at most one per interval by the fence)
    assert 4 <= versions[-1] - versions[0] <= 2.5 / 0.3 + 1, versions
    assert (clock.now() - floor.computed_at).total_seconds() < 1.5
    head = Message.objects.filter(collection=queue, state="ready").order_by("seq").first()
    assert floor.seq > 0 and head is not None and head.seq - floor.seq < 1000
    assert seeking < 400, seeking
