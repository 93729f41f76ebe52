"""The store-primitive families of ``/metrics`` (docs/observability.md):
schedule lateness, outbox rows waiting or dead, stream consumer lag. Each is
read from an index or a small table: delivered (``done``) outbox rows, which
retention may keep by the hundred thousand, are never counted.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, F
from prometheus_client.core import GaugeMetricFamily, Metric

from queueproject import clock
from queueproject.metrics import collectors
from store.models import OutboxMessage, OutboxState, Schedule, StreamConsumer


@collectors.register("store.schedules")
def collect_schedules() -> Iterator[Metric]:
    """How late each active schedule's next boundary is (0 while not due);
    due schedules are served by the st_sched_due index."""
    now = clock.now()
    late = GaugeMetricFamily(
        "store_schedule_lateness_seconds",
        "Seconds the next boundary of an active schedule is overdue (0 when not due yet).",
        labels=["group", "schedule"],
    )
    rows = Schedule.objects.filter(paused=False).values_list("group__slug", "name", "next_at")
    for group, name, next_at in rows.order_by("group__slug", "name"):
        overdue = (now - next_at).total_seconds() if next_at is not None else 0.0
        late.add_metric([group, name], max(0.0, overdue))
    yield late


OUTBOX_STATES = (OutboxState.PENDING, OutboxState.CLAIMED, OutboxState.DEAD)


@collectors.register("store.outbox")
def collect_outbox() -> Iterator[Metric]:
    """Outbox rows not yet delivered, per group and state (pending, claimed,
    dead; st_outbox_group_state)."""
    rows = GaugeMetricFamily(
        "store_outbox_messages",
        "Outbox rows waiting for the relay (pending, claimed) or given up (dead), per group.",
        labels=["group", "state"],
    )
    counts = (
        OutboxMessage.objects.filter(state__in=OUTBOX_STATES)
        .values_list("group__slug", "state")
        .annotate(n=Count("pk"))
        .order_by("group__slug", "state")
    )
    for group, state, n in counts:
        rows.add_metric([group, state], n)
    yield rows


@collectors.register("store.streams")
def collect_stream_lag() -> Iterator[Metric]:
    """Each stream consumer's lag: its topic's head offset minus its committed
    offset (the consumers table; no entry is read)."""
    lag = GaugeMetricFamily(
        "store_stream_consumer_lag",
        "Entries a stream consumer has not committed yet (head offset - committed offset).",
        labels=["group", "topic", "consumer"],
    )
    consumers = StreamConsumer.objects.annotate(lag=F("topic__head_offset") - F("committed_offset"))
    rows = consumers.values_list("topic__group__slug", "topic__name", "name", "lag")
    for group, topic, name, behind in rows.order_by("topic__group__slug", "topic__name", "name"):
        lag.add_metric([group, topic, name], max(0, behind))
    yield lag
