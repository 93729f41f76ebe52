"""The history of the queue collections (issue 16): one ``CollectionSample``
per collection per ``QUEUE_SAMPLE_INTERVAL`` (default 60 s), written by the
maintenance pass, pruned after ``QUEUE_SAMPLE_RETENTION`` (default 7 days).
Depths come from the index-backed stats (``selectors.collections_stats``:
two queries whatever the number of collections), the dead counts from the
snapshot behind the ``/metrics`` dead gauges, refreshed here (so the dead
history is counted once per interval, not once for each); throughput is the
difference of the collection's tally (``groupqueues.tally``) since its
previous sample."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from groupqueues import selectors, tally
from groupqueues.models import Collection, CollectionSample, CollectionTally
from groupqueues.services.dead_counts import dead_counts_refresh
from queueproject import clock

DEFAULT_SAMPLE_INTERVAL = 60.0  # seconds
DEFAULT_SAMPLE_RETENTION = 7 * 24 * 3600.0  # seconds
# A pass a little early still samples: maintenance runs every 10 s by default,
# so "at least 60 s since the last sample" would drift to one per 70 s.
EARLY_MARGIN = 0.9
PRUNE_CHUNK = 5000


def sample_interval() -> float:
    return float(getattr(settings, "QUEUE_SAMPLE_INTERVAL", DEFAULT_SAMPLE_INTERVAL))


def sample_retention() -> float:
    return float(getattr(settings, "QUEUE_SAMPLE_RETENTION", DEFAULT_SAMPLE_RETENTION))


def collection_samples_record(*, now: datetime | None = None, force: bool = False) -> int:
    """Write one sample per queue collection when the newest sample is at
    least (about) ``QUEUE_SAMPLE_INTERVAL`` old (or ``force``); how many.
    Flushes this process's tally first, so its own counts are in."""
    now = now or clock.now()
    latest = CollectionSample.objects.aggregate(t=Max("taken_at"))["t"]
    if not force and latest is not None and latest > now - _interval(EARLY_MARGIN):
        return 0
    tally.flush()
    collections = list(Collection.objects.queues())
    if not collections:
        return 0
    dead = dead_counts_refresh()
    stats = selectors.collections_stats(collections=collections, dead=dead)
    totals = {
        t.collection_id: (t.enqueued, t.acked)
        for t in CollectionTally.objects.filter(collection__in=collections)
    }
    previous = _previous_totals(latest)
    samples = []
    for c in collections:
        s = stats[c.pk]
        enqueued_total, acked_total = totals.get(c.pk, (0, 0))
        prev_enqueued, prev_acked = previous.get(c.pk, (enqueued_total, acked_total))
        samples.append(CollectionSample(
            collection_id=c.pk, taken_at=now, ready=s.depth_pending, delayed=s.delayed,
            claimed=s.in_flight, dead=s.dead, oldest_pending_age=s.oldest_pending_age_seconds,
            enqueued=max(0, enqueued_total - prev_enqueued), acked=max(0, acked_total - prev_acked),
            enqueued_total=enqueued_total, acked_total=acked_total,
        ))  # fmt: skip
    with transaction.atomic():
        CollectionSample.objects.bulk_create(samples)
    return len(samples)


def _previous_totals(latest: datetime | None) -> dict[int, tuple[int, int]]:
    """The tally totals in the previous round of samples (one query: every
    round samples all queue collections at one ``taken_at``). A collection
    missing from it (created since) starts its differences now."""
    if latest is None:
        return {}
    rows = CollectionSample.objects.filter(taken_at=latest).values_list(
        "collection_id", "enqueued_total", "acked_total"
    )
    return {pk: (enqueued, acked) for pk, enqueued, acked in rows}


def collection_samples_prune(*, now: datetime | None = None) -> int:
    """Delete samples older than ``QUEUE_SAMPLE_RETENTION`` (in chunks of
    PRUNE_CHUNK, one short transaction each); how many."""
    cutoff = (now or clock.now()) - timedelta(seconds=sample_retention())
    total = 0
    while True:
        chunk = list(
            CollectionSample.objects.filter(taken_at__lt=cutoff).values_list("pk", flat=True)[
                :PRUNE_CHUNK
            ]
        )
        if not chunk:
            return total
        deleted, _ = CollectionSample.objects.filter(pk__in=chunk).delete()
        total += deleted


def _interval(fraction: float) -> timedelta:
    return timedelta(seconds=sample_interval() * fraction)
