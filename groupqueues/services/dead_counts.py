"""The dead-message snapshot behind the ``/metrics`` dead gauges
(``models.DeadCount``): refreshed by the maintenance leader at most every
``QUEUE_METRICS_DEAD_REFRESH_SECONDS`` so that no scrape counts dead history.
"""

from __future__ import annotations

import time

from django.db import transaction
from django.db.models import Count

from groupqueues.models import DeadCount, Message
from queueproject import clock
from queueproject.conf import product_settings

_last_refresh: float | None = None  # time.monotonic() of this process's last refresh


def dead_counts_refresh() -> dict[int, int]:
    """Recount the dead messages per collection and reason (one grouped
    count, served by the gq_msg_dead partial index) and replace the snapshot
    in one transaction. Returns the dead messages per collection pk (those
    with none left out): the history samples take theirs from here."""
    global _last_refresh
    rows = (
        Message.objects.dead()
        .values("collection_id", "dead_reason")
        .annotate(n=Count("*"))
        .order_by()
    )
    now = clock.now()
    snapshot = [
        DeadCount(
            collection_id=r["collection_id"],
            reason=r["dead_reason"] or "",
            count=r["n"],
            counted_at=now,
        )
        for r in rows
    ]
    with transaction.atomic():
        DeadCount.objects.all().delete()
        DeadCount.objects.bulk_create(snapshot)
    _last_refresh = time.monotonic()
    per_collection: dict[int, int] = {}
    for row in snapshot:
        per_collection[row.collection_id] = per_collection.get(row.collection_id, 0) + row.count
    return per_collection


def dead_counts_refresh_if_due(every: float | None = None) -> bool:
    """``dead_counts_refresh`` when this process has not refreshed for
    ``every`` seconds (default ``QUEUE_METRICS_DEAD_REFRESH_SECONDS``; a new
    leader refreshes on its first pass)."""
    every = every if every is not None else product_settings().metrics_dead_refresh_seconds
    if _last_refresh is not None and time.monotonic() - _last_refresh < every:
        return False
    dead_counts_refresh()
    return True
