"""History (issue 16): the maintenance pass writes one sample per collection
per interval (depths by state, oldest age, enqueued and acked since the
previous sample) and prunes samples past the retention."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from groupqueues import services, tally
from groupqueues.maintenance import maintenance_pass
from groupqueues.models import Collection, CollectionSample, CollectionTally
from groupqueues.services import history
from queueproject import clock
from tests.groupqueues.conftest import claim, enqueue


@pytest.fixture(autouse=True)
def _fresh_tally() -> Iterator[None]:
    tally.reset()
    yield
    tally.reset()


def samples(queue: Collection) -> list[CollectionSample]:
    return list(CollectionSample.objects.filter(collection=queue).order_by("taken_at"))


def test_sample__depths_by_state_and_throughput_since_the_previous(queue, frozen):
    for _ in range(5):
        enqueue(queue)
    enqueue(queue, delay_seconds=600)
    first = claim(queue, 2)
    services.message_ack(collection=queue, id=first[0].id, claim_token=first[0].claim_token)
    services.message_fail(collection=queue, id=first[1].id, claim_token=first[1].claim_token,
                          error="boom")  # fmt: skip
    clock.advance(30)
    assert maintenance_pass().samples_written == 1
    (s,) = samples(queue)
    assert (s.ready, s.delayed, s.claimed, s.dead) == (3, 1, 0, 1)
    assert s.oldest_pending_age == pytest.approx(30, abs=1)
    assert (s.enqueued_total, s.acked_total) == (6, 1)
    assert (s.enqueued, s.acked) == (0, 0)  # the first sample has nothing to difference

    batch = claim(queue, 3)
    services.message_ack_batch(collection=queue, acks=[(m.id, m.claim_token) for m in batch])
    services.message_enqueue_batch(
        collection=queue, messages=[services.NewMessage(payload=i) for i in range(4)],
        enqueued_by="t",
    )  # fmt: skip
    clock.advance(30)
    assert maintenance_pass().samples_written == 0  # within the interval: no sample
    clock.advance(31)
    assert maintenance_pass().samples_written == 1
    s2 = samples(queue)[-1]
    assert (s2.enqueued, s2.acked) == (4, 3)
    assert (s2.ready, s2.delayed, s2.claimed, s2.dead) == (4, 1, 0, 1)
    assert CollectionTally.objects.get(collection=queue).enqueued == 10


def test_sample__ack_and_claim_counts_the_ack(queue, frozen):
    enqueue(queue)
    enqueue(queue)
    (held,) = claim(queue, 1)
    services.message_ack_and_claim(collection=queue, id=held.id, claim_token=held.claim_token,
                                   worker_id="w")  # fmt: skip
    history.collection_samples_record(force=True)
    assert samples(queue)[-1].acked_total == 1


def test_samples__pruned_after_the_retention(queue, frozen, settings):
    settings.QUEUE_SAMPLE_RETENTION = 3600
    now = clock.now()
    CollectionSample.objects.bulk_create([
        CollectionSample(collection=queue, taken_at=now - timedelta(seconds=age))
        for age in (7200, 3700, 3500, 60)
    ])  # fmt: skip
    assert maintenance_pass().samples_pruned == 2
    ages = sorted(round((now - s.taken_at).total_seconds()) for s in samples(queue))
    assert ages == [0, 60, 3500]  # the two kept, and the pass's own sample


def test_tally__flushes_when_due_and_keeps_counts_of_a_failed_flush(queue, monkeypatch):
    monkeypatch.setattr(tally, "FLUSH_SECONDS", 0.0)
    enqueue(queue)  # inside the test's transaction: no flush from the hot path
    assert not CollectionTally.objects.filter(collection=queue).exists()
    assert tally.flush() == 1
    assert CollectionTally.objects.get(collection=queue).enqueued == 1
    tally.count(queue.pk, enqueued=2, acked=1)
    tally.flush()
    row = CollectionTally.objects.get(collection=queue)
    assert (row.enqueued, row.acked) == (3, 1)


def test_tally__a_deleted_collection_is_skipped(queue):
    tally.count(queue.pk + 1000, enqueued=1)
    assert tally.flush() == 1
    assert not CollectionTally.objects.exists()


def test_sample__counts_the_dead_history_once_per_pass(queue, frozen):
    """The sample's dead counts come from the /metrics dead snapshot, which the
    sampling pass refreshes: one count of the dead rows, not one for each."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from groupqueues.services import dead_counts as dead_counts_module

    enqueue(queue)
    (m,) = claim(queue, 1)
    services.message_fail(collection=queue, id=m.id, claim_token=m.claim_token, error="x")
    clock.advance(61)
    dead_counts_module._last_refresh = None  # the gauges' refresh is due as well
    with CaptureQueriesContext(connection) as ctx:
        assert maintenance_pass().samples_written == 1
    statements = [q["sql"] or "" for q in ctx.captured_queries]
    dead_counts = [sql for sql in statements if "COUNT(" in sql.upper() and "'dead'" in sql]
    assert len(dead_counts) == 1, dead_counts
    assert samples(queue)[-1].dead == 1
