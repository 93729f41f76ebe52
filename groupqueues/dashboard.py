"""The reads of the admin dashboard (issue 16): the history samples of a
window bucketed into chart series, per collection and summed per group, and
the current top collections by backlog and by dead. Reads only; the charts
are drawn by ``groupqueues.charts``."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Sum
from django.db.models.functions import TruncHour

from groupqueues import selectors
from groupqueues.charts import Series, line_chart
from groupqueues.models import Collection, CollectionSample
from groupqueues.selectors import QueueStats
from queueproject import clock

# window name -> (length, bucket) in seconds: about 60 to 300 points a line.
WINDOWS = {"hour": (3600, 60), "day": (86400, 300), "week": (7 * 86400, 3600)}
DEFAULT_WINDOW = "hour"
DEPTHS = ("ready", "delayed", "claimed", "dead")
FLOWS = ("enqueued", "acked")
MAX_CHARTED = 50  # collections drawn, most backlogged first
TOP = 10

# bucket -> series name -> value
Buckets = dict[int, dict[str, float]]


@dataclass(frozen=True)
class Panel:
    """One collection's or one group's pair of charts."""

    label: str
    depth_svg: str
    flow_svg: str
    group_slug: str = ""  # a group's panel: its slug (links to its queues)


@dataclass(frozen=True)
class Dashboard:
    window: str
    groups: list[Panel]
    collections: list[Panel]
    top_backlog: list[tuple[Collection, QueueStats]]
    top_dead: list[tuple[Collection, QueueStats]]
    charted: int  # how many collections have panels (at most MAX_CHARTED)
    total: int


def backlog(stats: QueueStats) -> int:
    return stats.depth + stats.delayed


def dashboard(*, collections: list[Collection], window: str = DEFAULT_WINDOW) -> Dashboard:
    """The dashboard of ``collections`` (those the viewer may read) over
    ``window`` (a WINDOWS key)."""
    span, bucket = WINDOWS[window]
    now = clock.now()
    stats = selectors.collections_stats(collections=collections) if collections else {}
    ranked = sorted(collections, key=lambda c: (-backlog(stats[c.pk]), str(c)))
    charted = ranked[:MAX_CHARTED]
    per_collection = _buckets([c.pk for c in charted], now - timedelta(seconds=span), bucket)
    panels = [_panel(str(c), per_collection.get(c.pk, {}), span, bucket) for c in charted]
    by_group: defaultdict[str, list[Buckets]] = defaultdict(list)
    for c in charted:
        by_group[c.group.slug].append(per_collection.get(c.pk, {}))
    groups = [
        _panel(f"group {slug}", _summed(parts), span, bucket, group_slug=slug)
        for slug, parts in sorted(by_group.items())
    ]
    top_backlog = [(c, stats[c.pk]) for c in ranked if backlog(stats[c.pk])][:TOP]
    by_dead = sorted(collections, key=lambda c: (-stats[c.pk].dead, str(c)))
    top_dead = [(c, stats[c.pk]) for c in by_dead if stats[c.pk].dead][:TOP]
    return Dashboard(window, groups, panels, top_backlog, top_dead, len(charted), len(collections))


def _buckets(ids: list[int], start: datetime, bucket: int) -> dict[int, Buckets]:
    """Per collection, per bucket: the peak of each depth and the sum of each
    flow over the bucket's samples. Hour-long buckets (the week) are grouped
    by the database (``TruncHour``: 168 rows a collection, not 10,080);
    shorter ones from the samples themselves (at most 1,440 a collection).
    Both read the (collection, taken_at) index."""
    samples = CollectionSample.objects.filter(collection_id__in=ids, taken_at__gte=start)
    found: dict[int, Buckets] = defaultdict(dict)
    if bucket == 3600:
        grouped = (
            samples.annotate(hour=TruncHour("taken_at"))
            .values("collection_id", "hour")
            .annotate(**{n: Max(n) for n in DEPTHS}, **{n: Sum(n) for n in FLOWS})
            .order_by()
        )
        row: dict[str, Any]
        for row in grouped:  # type: ignore[assignment]  # annotated keys: not in the stubs' TypedDict
            b = int((row["hour"] - start).total_seconds() // bucket)
            cell = found[row["collection_id"]].setdefault(b, dict.fromkeys(FLOWS, 0.0))
            for name in DEPTHS:
                cell[name] = max(cell.get(name, 0.0), float(row[name]))
            for name in FLOWS:
                cell[name] += float(row[name])
        return found
    rows = samples.order_by("taken_at").values_list("collection_id", "taken_at", *DEPTHS, *FLOWS)
    for collection_id, taken_at, *values in rows:
        b = int((taken_at - start).total_seconds() // bucket)
        cell = found[collection_id].setdefault(b, dict.fromkeys(FLOWS, 0.0))
        for name, value in zip(DEPTHS, values[: len(DEPTHS)], strict=True):
            cell[name] = max(cell.get(name, 0.0), float(value))
        for name, value in zip(FLOWS, values[len(DEPTHS) :], strict=True):
            cell[name] += float(value)
    return found


def _summed(parts: list[Buckets]) -> Buckets:
    total: Buckets = defaultdict(dict)
    for buckets in parts:
        for b, cell in buckets.items():
            for name, value in cell.items():
                total[b][name] = total[b].get(name, 0.0) + value
    return total


def _panel(label: str, buckets: Buckets, span: int, bucket: int, group_slug: str = "") -> Panel:
    ordered = sorted(buckets.items())
    per_minute = 60.0 / bucket

    def series(name: str, scale: float = 1.0) -> Series:
        points = [
            (float((b + 1) * bucket), cell[name] * scale) for b, cell in ordered if name in cell
        ]
        return Series(name, points)

    depth = line_chart(title=f"{label}: depth", series=[series(n) for n in DEPTHS], span=span)
    flow = line_chart(
        title=f"{label}: throughput (per minute)",
        series=[series(n, per_minute) for n in FLOWS], span=span, unit="/min",
    )  # fmt: skip
    return Panel(label, depth, flow, group_slug)
