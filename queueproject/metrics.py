"""Prometheus metrics: the collector hook every app fills, and the worker
families of the shared layer (docs/observability.md lists every family).

Apps register collectors in their ``metrics`` module::

    from queueproject.metrics import collectors

    @collectors.register("groupqueues")
    def collect() -> Iterable[Metric]:
        yield GaugeMetricFamily(...)

``render()`` autodiscovers them, runs each on the scrape (fresh numbers, no
background thread in the web process) and returns the text exposition.
Each collector must be cheap: read indexes, never scan history (the scrape
of a database with 1,000,000 dead messages is pinned by a test).

Store primitives landing later (outbox pending/dead, stream consumer lag)
add a ``metrics`` module to their app with one ``@collectors.register``
function; nothing here changes.

Worker processes push their counts through the database (the registry row's
``counts``, every heartbeat) rather than serving ``--metrics-port``: one
scrape target for any number of workers on any number of hosts, no port to
allocate per process, nothing to expose from worker hosts; the price is a
heartbeat's delay (``QUEUE_WORKER_HEARTBEAT_SECONDS``) and one UPDATE per
heartbeat.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from queueproject import clock
from queueproject.registry import Registry

Collect = Callable[[], Iterable[Metric]]
collectors: Registry[Collect] = Registry("metrics collector", "metrics")

# Handler duration buckets (seconds, upper bounds; +Inf is implied).
DURATION_BUCKETS: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class DurationHistogram:
    """A thread-safe histogram of handler durations, kept by a worker process
    and pushed in its registry row (``as_counts``). Observing is one bisect and
    one locked increment."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets = [0] * (len(DURATION_BUCKETS) + 1)  # the last one: +Inf
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        i = bisect.bisect_left(DURATION_BUCKETS, seconds)
        with self._lock:
            self._buckets[i] += 1
            self._sum += seconds

    def observe_many(self, seconds: list[float]) -> None:
        """``observe`` each of ``seconds``, under one lock."""
        found = [bisect.bisect_left(DURATION_BUCKETS, s) for s in seconds]
        with self._lock:
            buckets = self._buckets
            for i in found:
                buckets[i] += 1
            self._sum += sum(seconds)

    def as_counts(self) -> dict[str, Any]:
        """``{"buckets": [per-bucket counts, +Inf last], "sum": seconds}``."""
        with self._lock:
            return {"buckets": list(self._buckets), "sum": self._sum}


class _AppCollectors:
    """The prometheus_client collector that runs every registered collector."""

    def collect(self) -> Iterator[Metric]:
        for name in collectors.names():
            yield from collectors.get(name)()


def render() -> bytes:
    """The text exposition of every registered collector, computed now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_AppCollectors())
    return generate_latest(registry)


# --------------------------------------------------------- worker families

# Registry ``counts`` keys → (family suffix, help). Group-queue workers:
WORKER_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("claimed", "claimed", "Messages claimed."),
    ("acked", "acked", "Messages acknowledged after their handler succeeded."),
    ("retried", "nacked", "Handler failures nacked back to ready with a backoff."),
    ("dead", "failed", "Handler failures that made the message dead (permanent or exhausted)."),
    ("lease_lost", "lease_expiries", "Outcomes that found the lease lapsed (lease_lost)."),
    ("released", "released", "Claims given back unstarted at a graceful stop."),
)
# Session dispatchers:
DISPATCHER_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("delivered", "deliveries", "Entries delivered and acknowledged."),
    ("failed", "failures", "Deliveries that failed (entry released or dropped)."),
)


@collectors.register("workers")
def collect_workers() -> Iterator[Metric]:
    """Per worker process, from the live registry rows."""
    from queueproject.workers_registry import workers_live  # the model: after apps load

    rows = workers_live()
    now = clock.now()
    up = GaugeMetricFamily(
        "queue_worker_up",
        "A live registered worker process (1).",
        labels=["worker", "kind", "host", "version"],
    )
    seen = GaugeMetricFamily(
        "queue_worker_last_seen_age_seconds",
        "Seconds since the worker's last heartbeat.",
        labels=["worker"],
    )
    for row in rows:
        up.add_metric([row.id, row.kind, row.host, row.version], 1)
        seen.add_metric([row.id], max(0.0, (now - row.last_seen_at).total_seconds()))
    yield up
    yield seen
    workers = [r for r in rows if r.kind == "queue_worker"]
    yield from _counters("queue_worker", WORKER_COUNTERS, workers)
    yield _durations(workers)
    dispatchers = [r for r in rows if r.kind == "session_dispatch"]
    yield from _counters("session_dispatcher", DISPATCHER_COUNTERS, dispatchers)


def _counters(
    prefix: str, spec: Iterable[tuple[str, str, str]], rows: list[Any]
) -> Iterator[Metric]:
    for key, suffix, help_text in spec:
        family = CounterMetricFamily(f"{prefix}_{suffix}", help_text, labels=["worker"])
        for row in rows:
            family.add_metric([row.id], float(row.counts.get(key, 0)))
        yield family


def _durations(rows: list[Any]) -> Metric:
    family = HistogramMetricFamily(
        "queue_worker_handler_duration_seconds", "Handler run time.", labels=["worker"]
    )
    bounds = [*(str(b) for b in DURATION_BUCKETS), "+Inf"]
    for row in rows:
        hist = row.counts.get("duration") or {}
        per_bucket = hist.get("buckets") or [0] * len(bounds)
        if len(per_bucket) != len(bounds):  # another version's buckets: leave it out
            continue
        cumulative, total = [], 0
        for bound, n in zip(bounds, per_bucket, strict=True):
            total += n
            cumulative.append((bound, float(total)))
        family.add_metric([row.id], cumulative, sum_value=float(hist.get("sum", 0.0)))
    return family
