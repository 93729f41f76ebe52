"""The session-queue families of ``/metrics`` (docs/observability.md).
Dispatcher deliveries and failures are per process: the worker registry's
``session_dispatcher_*`` families (``queueproject.metrics``)."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Q
from prometheus_client.core import GaugeMetricFamily, Metric

from queueproject.metrics import collectors
from sessionqueues.models import QueuedMessage


@collectors.register("sessionqueues")
def collect() -> Iterator[Metric]:
    entries = GaugeMetricFamily(
        "session_queue_entries",
        "Queued entries (not reserved) of an app's sessions.",
        labels=["app"],
    )
    reserved = GaugeMetricFamily(
        "session_queue_reserved",
        "Entries reserved for delivery (in flight) of an app's sessions.",
        labels=["app"],
    )
    # Session queues are capped per session (SESSIONQUEUES_MAX_PER_SESSION):
    # the table holds only live entries, so one grouped count is cheap.
    rows = (
        QueuedMessage.objects.values("task__app__slug")
        .annotate(
            entries=Count("pk", filter=Q(reservation_id__isnull=True)),
            in_flight=Count("pk", filter=Q(reservation_id__isnull=False)),
        )
        .order_by("task__app__slug")
    )
    for row in rows:
        entries.add_metric([row["task__app__slug"]], row["entries"])
        reserved.add_metric([row["task__app__slug"]], row["in_flight"])
    yield entries
    yield reserved
