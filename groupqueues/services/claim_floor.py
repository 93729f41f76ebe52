"""The claim floor of each queue collection (PostgreSQL; ``models.ClaimFloor``,
the statements and their rules in ``groupqueues.sql``): where claims start
their index scans, so that they do not walk the dead entries that vacuum
cannot remove behind a long-held transaction.

- The maintenance pass recomputes it from the head of every collection
  (``collections_refresh_claim_floors``).
- Claimers advance it from where it was, at most once per
  ``QUEUE_CLAIM_FLOOR_INTERVAL`` per collection (``claim_floor_advance_if_due``,
  called after a claim), so that a claim walks about one interval of dead
  entries instead of one maintenance interval.
- A release or a reclaim, which put claimed rows back in their old place,
  and an operator's change of priority lower it in their own transaction
  (``claim_floor_lower_to_message``, ``claim_floor_lower_lapsed``).

SQLite: no floor (claims scan from the start); every function here does
nothing there."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import connection

from groupqueues import sql
from groupqueues import validation as check
from groupqueues.models import Collection
from queueproject import clock, rawsql
from queueproject.conf import product_settings

logger = logging.getLogger("groupqueues.claim_floor")

# How far below the computed claim floor claims start: covers clocks apart
# and enqueues committing up to this long after they read the time.
CLAIM_FLOOR_MARGIN = timedelta(seconds=sql.FLOOR_MARGIN_SECONDS)
# The incremental refresh's lease floor lies this far ahead of its now (the
# shortest lease a claim or extend gives, less a margin for clocks apart and
# slow claim statements; see sql.CLAIM_FLOOR_ADVANCE_POSTGRES): claims walk
# the dead lease entries between that floor and their own now, so a floor
# behind now would cost each claim every claim acked a lease period ago.
LEASE_MARGIN = timedelta(seconds=0.5)
LEASE_LEAD = timedelta(seconds=check.VISIBILITY_TIMEOUT_MIN) - LEASE_MARGIN
# A writer that lost the race for the next version reads the newest one and
# tries again; each loss means another writer added one meanwhile.
LOWER_ATTEMPTS = 10


def collections_refresh_claim_floors() -> int:
    """Recompute the claim floor of every queue collection from its head (one
    short statement each, in autocommit; ``sql.CLAIM_FLOOR_POSTGRES``): the
    maintenance step, which also lowers the floor under stragglers. A floor
    older than ``sql.FLOOR_FRESH_SECONDS`` is ignored by claims. Returns how
    many collections; 0 on SQLite (its claims use no floor)."""
    if connection.vendor != "postgresql":
        return 0
    ids = list(Collection.objects.queues().values_list("pk", flat=True))
    for pk in ids:
        # A release or reclaim added a version after this one's snapshot:
        # compute it again on top (it now sees the rows put back).
        for _ in range(LOWER_ATTEMPTS):
            params = {"collection_id": pk, "now": clock.now(), "margin": CLAIM_FLOOR_MARGIN,
                      "lease_lead": LEASE_LEAD}  # fmt: skip
            added, found = rawsql.fetch_one(sql.CLAIM_FLOOR_POSTGRES, params)
            if added or not found:  # written, or the collection went meanwhile
                break
    return len(ids)


def collection_advance_claim_floor(collection_id: int, *, interval: float | None = None) -> bool:
    """Advance the collection's claim floor from where it is
    (``sql.CLAIM_FLOOR_ADVANCE_POSTGRES``), if it is fresh and older than
    ``interval`` seconds (default ``QUEUE_CLAIM_FLOOR_INTERVAL``); one
    statement in autocommit. Whether it advanced (False also when another
    process did it first, or on SQLite)."""
    if connection.vendor != "postgresql":
        return False
    if interval is None:
        interval = product_settings().claim_floor_interval
    params = {
        "collection_id": collection_id, "now": clock.now(), "margin": CLAIM_FLOOR_MARGIN,
        "interval": timedelta(seconds=interval),
        "lease_lead": LEASE_LEAD,
    }  # fmt: skip
    added, _found = rawsql.fetch_one(sql.CLAIM_FLOOR_ADVANCE_POSTGRES, params)
    return bool(added)


# When this process next tries to advance each collection's floor
# (time.monotonic()); a dict read per claim otherwise.
_next_try: dict[int, float] = {}
_next_try_lock = threading.Lock()


def claim_floor_advance_if_due(collection_id: int) -> None:
    """After a claim (PostgreSQL, autocommit): advance the collection's floor
    if this process has not tried for ``QUEUE_CLAIM_FLOOR_INTERVAL`` seconds.
    The statement itself is the fence between processes (nothing happens
    unless the newest floor is older than the interval, and of two that race
    one adds nothing). Never inside a transaction (the caller's would carry
    the floor's write), never when the interval is 0 (off). A failure is
    logged, not raised: the claim it follows has committed."""
    interval = product_settings().claim_floor_interval
    if interval <= 0 or connection.in_atomic_block:
        return
    now = time.monotonic()
    if _next_try.get(collection_id, 0.0) > now:
        return
    with _next_try_lock:
        if _next_try.get(collection_id, 0.0) > now:
            return
        _next_try[collection_id] = now + interval
    try:
        collection_advance_claim_floor(collection_id, interval=interval)
    except Exception:  # the claim stands; the next try is an interval away
        logger.exception("claim floor of collection %s: advance failed", collection_id)


def claim_floor_lower_to_message(collection: Collection, message_id: uuid.UUID) -> None:
    """In the transaction that made ``message_id`` ready in a place that may
    lie below the floor (a release puts it back in its old place; a change of
    priority moves it to another priority at the same ready time): lower the
    floor under it (PostgreSQL; both lowering functions hold a lock until
    that transaction commits)."""
    _lower(sql.CLAIM_FLOOR_LOWER_TO_MESSAGE_POSTGRES, {"collection_id": collection.pk,
                                                       "id": message_id})  # fmt: skip


def claim_floor_lower_lapsed(collection: Collection, now: datetime) -> None:
    """In the transaction of a reclaim, before the UPDATE that makes the
    claimed rows whose lease lapsed by ``now`` ready again in their old
    place: lower the floor under them (PostgreSQL)."""
    _lower(sql.CLAIM_FLOOR_LOWER_LAPSED_POSTGRES, {"collection_id": collection.pk, "now": now})


def _lower(query: str, params: dict[str, Any]) -> None:
    if connection.vendor != "postgresql":
        return
    rawsql.execute(sql.CLAIM_FLOOR_LOCK_POSTGRES, {"collection_id": params["collection_id"]})
    for _ in range(LOWER_ATTEMPTS):
        added, found = rawsql.fetch_one(query, params)
        if added or not found:  # lowered, or no floor to lower
            return
    # Ten writers in a row won the race: the next full refresh (the
    # maintenance pass) lowers the floor under the row.
    logger.warning("claim floor of collection %s: not lowered", params["collection_id"])
