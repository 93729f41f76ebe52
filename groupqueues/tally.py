"""Per-process counts of messages enqueued and acked, per collection, added
to ``CollectionTally`` every ``FLUSH_SECONDS`` (at the next count after that,
outside a transaction) and at each maintenance pass. The hot paths only add to a dict under
a lock: no statement of theirs touches a shared row, so the counts cost
nothing measurable; the history samples difference the totals into
per-minute throughput. A process that exits or dies loses the counts since its
last flush (a few seconds' worth; the depths in the samples are exact).
Nothing is flushed at exit: a test process would write into whatever
database its settings name by then."""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict

from django.db import DatabaseError, transaction
from django.db.models import F

logger = logging.getLogger("groupqueues.tally")

FLUSH_SECONDS = 5.0

_lock = threading.Lock()
_pending: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0])
_last_flush = time.monotonic()


def count(collection_id: int, *, enqueued: int = 0, acked: int = 0) -> None:
    """Count ``enqueued`` and ``acked`` messages of a collection (call after
    the service's transaction committed); flushes when the last flush is
    FLUSH_SECONDS old and no transaction is open on this thread."""
    if enqueued <= 0 and acked <= 0:
        return
    with _lock:
        entry = _pending[collection_id]
        entry[0] += max(enqueued, 0)
        entry[1] += max(acked, 0)
        due = time.monotonic() - _last_flush >= FLUSH_SECONDS
    if due and not transaction.get_connection().in_atomic_block:
        flush()


def flush() -> int:
    """Add the pending counts to the tallies (one UPDATE per collection, an
    INSERT for a collection's first); how many collections. On a database
    error the counts go back to pending."""
    global _last_flush
    from groupqueues.models import CollectionTally

    with _lock:
        taken = dict(_pending)
        _pending.clear()
        _last_flush = time.monotonic()
    done = 0
    try:
        for collection_id, (enqueued, acked) in taken.items():
            updated = CollectionTally.objects.filter(collection_id=collection_id).update(
                enqueued=F("enqueued") + enqueued, acked=F("acked") + acked
            )
            if not updated:
                _create(collection_id, enqueued, acked)
            done += 1
    except DatabaseError:
        logger.warning("could not flush the queue tallies; they stay pending", exc_info=True)
        with _lock:
            for collection_id, (enqueued, acked) in list(taken.items())[done:]:
                entry = _pending[collection_id]
                entry[0] += enqueued
                entry[1] += acked
    return done


def _create(collection_id: int, enqueued: int, acked: int) -> None:
    from groupqueues.models import Collection, CollectionTally

    if not Collection.objects.filter(pk=collection_id).exists():
        return  # deleted meanwhile: its counts go with it
    CollectionTally.objects.bulk_create(
        [CollectionTally(collection_id=collection_id)], ignore_conflicts=True
    )
    CollectionTally.objects.filter(collection_id=collection_id).update(
        enqueued=F("enqueued") + enqueued, acked=F("acked") + acked
    )


def reset() -> None:
    """Drop the pending counts (tests: a rolled-back test's counts must not
    reach a later collection with the same id)."""
    global _last_flush
    with _lock:
        _pending.clear()
        _last_flush = time.monotonic()
