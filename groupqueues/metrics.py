"""The group-queue families of ``/metrics`` (registered with
``queueproject.metrics.collectors``; docs/observability.md lists them).

Every number comes from a partial index, never from dead history: ready and
delayed rows from gq_msg_claimable (index-only: ``deliver_after`` is a key
column, ``expires_at`` INCLUDEd), claimed rows from gq_msg_lease, and the
dead numbers from the ``DeadCount`` snapshot the maintenance leader keeps
(refreshed every ``QUEUE_METRICS_DEAD_REFRESH_SECONDS``; its age is a
family of its own). A test pins the plans against 1,000,000 dead rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, Q
from prometheus_client.core import GaugeMetricFamily, Metric

from groupqueues.models import Collection, DeadCount, DeadReason, Message
from queueproject import clock
from queueproject.metrics import collectors


@dataclass
class LiveDepth:
    """One collection's live numbers at ``now``."""

    ready: int = 0  # ready and due
    delayed: int = 0  # ready, not yet due
    claimed: int = 0
    oldest_pending: datetime | None = None
    dead: dict[str, int] = field(default_factory=dict)  # by reason (the snapshot)


def live_depths(*, now: datetime) -> dict[int, LiveDepth]:
    """Live numbers of every collection with messages, by collection pk: two
    grouped index scans (ready, claimed) and the dead snapshot."""
    depths: dict[int, LiveDepth] = {}
    pending = Q(deliver_after__lte=now) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))
    ready = (
        Message.objects.ready()
        .values("collection_id")
        .annotate(
            due=Count("pk", filter=Q(deliver_after__lte=now)),
            delayed=Count("pk", filter=Q(deliver_after__gt=now)),
            oldest=Min("deliver_after", filter=pending),
        )
        .order_by()
    )
    for row in ready:
        depth = depths.setdefault(row["collection_id"], LiveDepth())
        depth.ready, depth.delayed, depth.oldest_pending = row["due"], row["delayed"], row["oldest"]
    # COUNT(*): gq_msg_lease holds no seq, counting a column would visit the table.
    claimed = Message.objects.claimed().values("collection_id").annotate(n=Count("*")).order_by()
    for claimed_row in claimed:
        depths.setdefault(claimed_row["collection_id"], LiveDepth()).claimed = claimed_row["n"]
    for dead in DeadCount.objects.all():
        depths.setdefault(dead.collection_id, LiveDepth()).dead[dead.reason] = dead.count
    return depths


@collectors.register("groupqueues")
def collect() -> Iterator[Metric]:
    now = clock.now()
    collections = list(Collection.objects.queues().select_related("group").order_by("pk"))
    depths = live_depths(now=now)
    labels = ["group", "queue"]
    messages = GaugeMetricFamily(
        "queue_messages",
        "Messages of a collection by state (ready = due now; delayed = "
        "not yet due; claimed = leased; dead = as of the dead snapshot).",
        labels=[*labels, "state"],
    )
    dead = GaugeMetricFamily(
        "queue_dead_messages",
        "Dead messages by reason (the dead snapshot).",
        labels=[*labels, "reason"],
    )
    oldest = GaugeMetricFamily(
        "queue_oldest_pending_age_seconds",
        "Age of the oldest pending message (ready, due, unexpired) since its ready time; "
        "0 when nothing is pending.",
        labels=labels,
    )
    for collection in collections:
        key = [collection.group.slug, collection.name]
        depth = depths.get(collection.pk, LiveDepth())
        for state, value in (
            ("ready", depth.ready),
            ("delayed", depth.delayed),
            ("claimed", depth.claimed),
            ("dead", sum(depth.dead.values())),
        ):
            messages.add_metric([*key, state], value)
        for reason in DeadReason.values:
            dead.add_metric([*key, reason], depth.dead.get(reason, 0))
        age = (now - depth.oldest_pending).total_seconds() if depth.oldest_pending else 0.0
        oldest.add_metric(key, max(0.0, age))
    yield messages
    yield dead
    yield oldest
    yield _snapshot_age(now)


def _snapshot_age(now: datetime) -> Metric:
    family = GaugeMetricFamily(
        "queue_dead_snapshot_age_seconds",
        "Seconds since the maintenance leader last recounted dead messages (absent: never).",
    )
    latest: Any = DeadCount.objects.order_by("-counted_at").values_list("counted_at", flat=True)
    counted = latest.first()
    if counted is not None:
        family.add_metric([], max(0.0, (now - counted).total_seconds()))
    return family
