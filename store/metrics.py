"""The store-primitive families of ``/metrics`` (docs/observability.md).

Schedules now; the outbox (pending / dead) and streams (consumer lag) add
their collectors here, or in a ``metrics`` module of their own app, with one
``@collectors.register`` function each.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from queueproject import clock
from queueproject.metrics import collectors
from store.models import Schedule


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
