"""The featured claim: ordering keys, fairness and limits (SPEC §7;
docs/ordering-and-limits.md). ``services.claim`` takes this path only for a
collection that uses one of them; the plain claim stays as it was.

- Ordering keys: only a key's head is a candidate (``sql._KEY_HEAD``).
- Fairness / max_in_flight_per_key: candidates are ranked within their
  partition (``Message.fair_key``) and handed out round-robin / cut to what the
  partition may still take.
- max_in_flight and the rate limit: the claim cuts ``n`` to what they allow
  while holding the collection row's lock (PostgreSQL: FOR NO KEY UPDATE;
  SQLite: the IMMEDIATE write lock), and the rate limit's bucket is written
  in the same transaction, so the limits hold across every worker and host.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from groupqueues import sql
from groupqueues.models import Collection, Fairness, Message
from groupqueues.services import postgres
from groupqueues.services.types import ClaimedMessage
from queueproject import rawsql

# The collection columns that decide how a claim runs (re-read when a claim
# finds nothing: a worker may hold an old copy of the collection).
FEATURE_FIELDS = (
    "paused", "fairness", "max_in_flight", "max_in_flight_per_key", "rate_limit_count",
    "rate_limit_seconds", "uses_ordering_keys",
)  # fmt: skip


def feature_state(collection: Collection) -> tuple[Any, ...]:
    return tuple(getattr(collection, name) for name in FEATURE_FIELDS)


@dataclass(frozen=True)
class Budget:
    """How many a claim may take now (None: no limit), and the rate bucket to
    write back after it."""

    allowed: int | None
    tokens: float | None


def rate_bucket(
    *, count: int, seconds: int, tokens: float | None, at: datetime | None, now: datetime
) -> float:
    """The rate limit's bucket at ``now``: it holds up to ``count`` claims and
    refills at ``count`` per ``seconds`` (full when never used; a clock that
    went back refills nothing)."""
    if tokens is None or at is None:
        return float(count)
    elapsed = max((now - at).total_seconds(), 0.0)
    return min(float(count), tokens + elapsed * count / seconds)


def budget_of(
    *, max_in_flight: int | None, in_flight: int, rate_count: int | None,
    rate_seconds: int | None, tokens: float | None, at: datetime | None, now: datetime,
) -> Budget:  # fmt: skip
    """What max_in_flight (claimed with a running lease) and the rate limit allow."""
    allowed: int | None = None
    if max_in_flight is not None:
        allowed = max(max_in_flight - in_flight, 0)
    bucket = None
    if rate_count is not None and rate_seconds is not None:
        bucket = rate_bucket(count=rate_count, seconds=rate_seconds, tokens=tokens, at=at, now=now)
        by_rate = math.floor(bucket + 1e-9)
        allowed = by_rate if allowed is None else min(allowed, by_rate)
    return Budget(allowed, bucket)


def _shape(collection: Collection) -> tuple[bool, bool]:
    """(partitioned, fair): the statement's shape (``sql.CLAIM_FEATURED_*``)."""
    fair = collection.fairness != Fairness.NONE
    return fair or collection.max_in_flight_per_key is not None, fair


def _params(collection: Collection, worker_id: str, n: int, now: datetime,
            lease: datetime) -> dict[str, Any]:  # fmt: skip
    return {"collection_id": collection.pk, "now": now, "n": n, "worker_id": worker_id,
            "lease_expires_at": lease, "async_commit": False,
            "per_key": collection.max_in_flight_per_key, "fairness": collection.fairness,
            "limited": collection.uses_limits}  # fmt: skip


def claim_featured(
    collection: Collection, worker_id: str, n: int, now: datetime, lease: datetime
) -> tuple[list[ClaimedMessage], int]:
    """One featured claim round: (claimed messages in claim order, candidates
    killed instead). PostgreSQL: one statement, in a transaction that first
    locks the collection row when it has limits."""
    if connection.vendor != "postgresql":
        return _claim_sqlite(collection, worker_id, n, now, lease)
    if not collection.uses_limits:
        return _run_postgres(collection, _params(collection, worker_id, n, now, lease))
    with transaction.atomic():
        params: dict[str, Any] = {"collection_id": collection.pk, "now": now}
        with rawsql.cursor() as cur:
            cur.execute(sql.LIMITS_LOCK_POSTGRES, params)
            found = cur.fetchall()
            if not found:
                return [], 0
            ((max_in_flight, per_key, fairness, rate_count, rate_seconds, tokens, at),) = found
            in_flight = 0
            if max_in_flight is not None:
                cur.execute(sql.IN_FLIGHT_POSTGRES, params)
                ((in_flight,),) = cur.fetchall()
        if (max_in_flight, per_key, fairness, rate_count, rate_seconds) != (
            collection.max_in_flight,
            collection.max_in_flight_per_key,
            collection.fairness,
            collection.rate_limit_count,
            collection.rate_limit_seconds,
        ):  # an old copy: claim by the row as it is (locked, so it stays)
            collection.refresh_from_db(fields=FEATURE_FIELDS)
            if not _has_limits(collection):
                return _run_postgres(collection, _params(collection, worker_id, n, now, lease))
        budget = budget_of(max_in_flight=max_in_flight, in_flight=in_flight,
                           rate_count=rate_count, rate_seconds=rate_seconds, tokens=tokens,
                           at=at, now=now)  # fmt: skip
        got: list[ClaimedMessage] = []
        died = 0
        if budget.allowed is None or budget.allowed > 0:
            take = n if budget.allowed is None else min(n, budget.allowed)
            got, died = _run_postgres(collection, _params(collection, worker_id, take, now, lease))
        _spend(collection, budget, len(got), now)
    return got, died


def _has_limits(collection: Collection) -> bool:
    """``collection.uses_limits`` as it is now (a call, so a type checker does
    not carry an earlier answer over a refresh)."""
    return collection.uses_limits


def _run_postgres(
    collection: Collection, params: dict[str, Any]
) -> tuple[list[ClaimedMessage], int]:
    with rawsql.cursor() as cur:
        cur.execute(sql.CLAIM_FEATURED_POSTGRES[_shape(collection)], params)
        return postgres.claimed_from_rows(cur.fetchall())


def _spend(collection: Collection, budget: Budget, claimed: int, now: datetime) -> None:
    """Write the rate bucket back, ``claimed`` taken from it."""
    if budget.tokens is not None:
        Collection.objects.filter(pk=collection.pk).update(
            rate_tokens=max(budget.tokens - claimed, 0.0), rate_at=now
        )


def _claim_sqlite(
    collection: Collection, worker_id: str, n: int, now: datetime, lease: datetime
) -> tuple[list[ClaimedMessage], int]:
    """The portable featured claim (SQLite), in one IMMEDIATE transaction: the
    budget from the row as it is now, the choice (``sql.CLAIM_FEATURED_SQLITE``),
    then the claim as ``claim._claim_portable`` makes it."""
    from groupqueues.services.claim import claim_rows_portable, kill_candidates

    with transaction.atomic():
        fresh = Collection.objects.filter(pk=collection.pk).first()
        if fresh is None or fresh.paused:
            return [], 0
        in_flight = 0
        if fresh.max_in_flight is not None:
            in_flight = Message.objects.of(fresh).claimed().filter(lease_expires_at__gt=now).count()
        budget = budget_of(max_in_flight=fresh.max_in_flight, in_flight=in_flight,
                           rate_count=fresh.rate_limit_count,
                           rate_seconds=fresh.rate_limit_seconds, tokens=fresh.rate_tokens,
                           at=fresh.rate_at, now=now)  # fmt: skip
        take = n if budget.allowed is None else min(n, budget.allowed)
        got: list[ClaimedMessage] = []
        died: set[int] = set()
        if take > 0:
            candidates = _choose_sqlite(fresh, take, now)
            died = kill_candidates(candidates, now, key_heads=True)
            tokens = {c["seq"]: uuid.uuid4() for c in candidates if c["seq"] not in died}
            got = claim_rows_portable(tokens, worker_id, now, lease)
        _spend(fresh, budget, len(got), now)
    return got, len(died)


def _choose_sqlite(collection: Collection, n: int, now: datetime) -> list[dict[str, Any]]:
    params = _params(collection, "", n, now, now)
    ops = connection.ops
    params["now"] = ops.adapt_datetimefield_value(now)
    for unused in ("worker_id", "lease_expires_at", "async_commit", "fairness", "limited"):
        del params[unused]
    with rawsql.cursor() as cur:
        cur.execute(sql.CLAIM_FEATURED_SQLITE[_shape(collection)], params)
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    for row in rows:
        if row["expires_at"] is not None and not isinstance(row["expires_at"], datetime):
            row["expires_at"] = datetime.fromisoformat(row["expires_at"]).replace(tzinfo=UTC)
    return rows
