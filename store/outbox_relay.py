"""The outbox relay: claims due outbox rows and delivers them to their targets.

The claim follows the queue claim's discipline (``groupqueues.services.claim``):
one short transaction locks candidates in a deterministic order with a LIMIT
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL, the IMMEDIATE write lock on SQLite),
stamps a fresh claim token, the relay's id and a lease, counts the attempt and
commits; delivery happens afterwards. Every later change of a row is
conditional on its state and claim token, so a relay whose lease lapsed and was
taken over cannot mark the row (it gets no row back and moves on).

Exactly once into this product's own tables (queue, stream, channel): the
relay fences the row (``claimed`` with its token → ``done``) and delivers in
ONE transaction, with the outbox id as the target's idempotency key. A relay
killed before the commit leaves neither the message nor the mark; after it,
both. Webhooks are delivered outside any transaction: at least once.

Failures are retried with ``queueproject.backoff`` (exponential, capped,
jittered) until ``max_attempts``; then the row is dead until redriven. Any
number of relays may run at once (every ``queue_worker`` runs one in a thread,
``manage.py outbox_relay`` runs one alone): SKIP LOCKED spreads the rows.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import InterfaceError, OperationalError, transaction
from django.db.models import F, QuerySet

from queueproject import clock
from queueproject.backoff import backoff_delay
from queueproject.runner import Runner
from store.models import OutboxMessage, OutboxState
from store.outbox import outbox_prune_done
from store.outbox_conf import outbox_settings
from store.outbox_targets import adapter_for

logger = logging.getLogger("store.outbox")

ERROR_LIMIT = 2000
PRUNE_EVERY = 60.0  # seconds between prunes of delivered rows
CLAIM_ORDER = ("deliver_after", "created_at", "id")
_UNCLAIMED = {"claim_token": None, "claimed_by": "", "lease_expires_at": None}


def outbox_claim(*, relay_id: str, n: int, lease_seconds: float) -> list[OutboxMessage]:
    """Claim up to ``n`` due rows (pending and due, or claimed under a lapsed
    lease) in due order for ``lease_seconds``: each gets the claim's token,
    ``claimed_by`` and attempt + 1. A row whose relay died on its last attempt
    becomes dead instead. Cheap when nothing is due: a plain read first, so an
    idle relay takes no write lock (SQLite's one writer)."""
    now = clock.now()
    if n <= 0 or not OutboxMessage.objects.claimable(now).exists():
        return []
    token = uuid.uuid4()
    with transaction.atomic():
        candidates = list(
            OutboxMessage.objects.claimable(now).order_by(*CLAIM_ORDER)
            .select_for_update(skip_locked=True)
            .values_list("id", "attempt", "max_attempts")[:n]
        )  # fmt: skip
        spent = [id for id, attempt, most in candidates if attempt >= most]
        ids = [id for id, attempt, most in candidates if attempt < most]
        if spent:
            OutboxMessage.objects.filter(id__in=spent).update(
                state=OutboxState.DEAD, dead_at=now, **_UNCLAIMED,
                last_error="the relay lost its lease on the last attempt",
            )  # fmt: skip
        if ids:
            OutboxMessage.objects.filter(id__in=ids).update(
                state=OutboxState.CLAIMED, claim_token=token, claimed_by=relay_id,
                lease_expires_at=now + timedelta(seconds=lease_seconds), attempt=F("attempt") + 1,
            )  # fmt: skip
    if not ids:
        return []
    claimed = OutboxMessage.objects.filter(id__in=ids, claim_token=token)
    return list(claimed.select_related("group", "app").order_by(*CLAIM_ORDER))


def _held(row: OutboxMessage) -> QuerySet[OutboxMessage]:
    """The row as long as this claim holds it (state and token unchanged)."""
    return OutboxMessage.objects.filter(id=row.id, state=OutboxState.CLAIMED,
                                        claim_token=row.claim_token)  # fmt: skip


def outbox_mark_done(*, row: OutboxMessage, now: datetime | None = None) -> bool:
    """``claimed`` under this row's token → ``done``; False when the claim was
    lost (reclaimed after its lease lapsed, or redriven)."""
    held = _held(row)
    return held.update(state=OutboxState.DONE, done_at=now or clock.now(), last_error="",
                       **_UNCLAIMED) == 1  # fmt: skip


def outbox_retry_or_die(*, row: OutboxMessage, error: str) -> OutboxState | None:
    """After a failed attempt: pending again after the backoff, or dead when
    it was the last one. Answers the new state, None when the claim was lost."""
    now = clock.now()
    held = _held(row)
    error = error[:ERROR_LIMIT]
    if row.attempt >= row.max_attempts:
        changed = held.update(state=OutboxState.DEAD, dead_at=now, last_error=error, **_UNCLAIMED)
        return OutboxState.DEAD if changed else None
    conf = outbox_settings()
    delay = backoff_delay(row.attempt, base=conf.backoff_base, cap=conf.backoff_max)
    changed = held.update(state=OutboxState.PENDING, last_error=error, **_UNCLAIMED,
                          deliver_after=now + timedelta(seconds=delay))  # fmt: skip
    return OutboxState.PENDING if changed else None


def outbox_release(*, rows: list[OutboxMessage]) -> int:
    """Give claimed rows back unattempted (a stopping relay): pending, due now,
    the attempt not counted."""
    released = 0
    for row in rows:
        released += _held(row).update(state=OutboxState.PENDING, attempt=F("attempt") - 1,
                                      **_UNCLAIMED)  # fmt: skip
    return released


class LeaseLost(Exception):
    """The claim on a row was lost before it could be marked done."""


@dataclass
class Outcome:
    done: int = 0
    retried: int = 0
    dead: int = 0
    lost: int = 0

    def __str__(self) -> str:
        return f"delivered {self.done}, retried {self.retried}, dead {self.dead}, lost {self.lost}"


def outbox_deliver(*, row: OutboxMessage, outcome: Outcome) -> None:
    """Deliver one claimed row and record the result in ``outcome``."""
    adapter = adapter_for(row.target_kind)
    try:
        if adapter.in_database:
            with transaction.atomic():
                # The fence first: on PostgreSQL it locks the row, so a relay
                # reclaiming it after a lapsed lease skips it until we commit.
                if not outbox_mark_done(row=row):
                    raise LeaseLost()
                adapter.deliver(row)
        else:
            adapter.deliver(row)
            if not outbox_mark_done(row=row):
                raise LeaseLost()
    except LeaseLost:
        outcome.lost += 1
        logger.warning("outbox %s: claim lost before it was marked done", row.id)
        return
    except (OperationalError, InterfaceError):
        raise  # the connection is gone: the Runner reconnects; the lease lapses
    except Exception as exc:  # a target's refusal, a bug in an adapter: retried
        _failed(row, f"{type(exc).__name__}: {exc}", outcome)
        return
    outcome.done += 1


def outbox_deliver_together(*, rows: list[OutboxMessage], outcome: Outcome) -> bool:
    """Deliver claimed rows of one in-database target in ONE transaction: all
    fenced and marked done, then delivered together (a batch enqueue). False,
    with nothing changed, when any row's claim was lost or the target refused:
    the caller then delivers them one by one (which finds the culprit)."""
    adapter = adapter_for(rows[0].target_kind)
    assert adapter.in_database
    ids = [row.id for row in rows]
    try:
        with transaction.atomic():
            fenced = OutboxMessage.objects.filter(
                id__in=ids, state=OutboxState.CLAIMED, claim_token=rows[0].claim_token
            ).update(state=OutboxState.DONE, done_at=clock.now(), last_error="", **_UNCLAIMED)
            if fenced != len(rows):
                raise LeaseLost()
            adapter.deliver_many(rows)
    except (OperationalError, InterfaceError):
        raise
    except Exception:  # one by one instead: each row gets its own outcome
        logger.debug("outbox batch of %d fell back to one by one", len(rows), exc_info=True)
        return False
    outcome.done += len(rows)
    return True


def _by_target(rows: list[OutboxMessage]) -> list[list[OutboxMessage]]:
    """Runs of rows of one claim grouped by target, in claim order."""
    groups: dict[tuple[str, object, str], list[OutboxMessage]] = {}
    for row in rows:
        groups.setdefault((row.target_kind, row.group_id, row.target_name), []).append(row)
    return list(groups.values())


def _failed(row: OutboxMessage, error: str, outcome: Outcome) -> None:
    state = outbox_retry_or_die(row=row, error=error)
    if state is OutboxState.DEAD:
        outcome.dead += 1
        logger.error("outbox %s dead after %d attempts: %s", row.id, row.attempt, error)
    elif state is OutboxState.PENDING:
        outcome.retried += 1
        logger.info("outbox %s attempt %d failed: %s", row.id, row.attempt, error)
    else:
        outcome.lost += 1


class OutboxRelay(Runner):
    """The relay loop: claim a batch, deliver each row, repeat while rows come;
    sleep ``poll_interval`` when nothing is due. ``once``: stop when nothing is
    due now; ``max_rows``: stop after handling that many rows."""

    def __init__(
        self,
        *,
        relay_id: str,
        batch: int | None = None,
        lease_seconds: float | None = None,
        poll_interval: float | None = None,
        once: bool = False,
        max_rows: int | None = None,
    ) -> None:
        super().__init__()
        conf = outbox_settings()
        self.relay_id = relay_id
        self.batch = batch or conf.batch
        self.lease_seconds = lease_seconds or conf.lease_seconds
        self.idle_timeout = poll_interval or conf.poll_interval
        self.once, self.max_rows = once, max_rows
        self.outcome = Outcome()
        self.handled = 0
        self._pruned = time.monotonic()

    def should_continue(self) -> bool:
        if self.max_rows is not None and self.handled >= self.max_rows:
            return False
        return super().should_continue()

    def tick(self) -> bool:
        n = self.batch if self.max_rows is None else min(self.batch, self.max_rows - self.handled)
        rows = outbox_claim(relay_id=self.relay_id, n=n, lease_seconds=self.lease_seconds)
        for same_target in _by_target(rows):
            self._deliver(same_target)
        self._maybe_prune()
        if not rows and self.once:
            self.request_stop()
        return bool(rows)

    def _deliver(self, rows: list[OutboxMessage]) -> None:
        """Rows of one target: together when they live in this database, else
        (or when together failed) one by one, releasing the rest on a stop."""
        in_database = adapter_for(rows[0].target_kind).in_database
        if (
            in_database
            and len(rows) > 1
            and outbox_deliver_together(rows=rows, outcome=self.outcome)
        ):
            self.handled += len(rows)
            return
        for i, row in enumerate(rows):
            if self.stopping.is_set():
                outbox_release(rows=rows[i:])
                return
            outbox_deliver(row=row, outcome=self.outcome)
            self.handled += 1

    def _maybe_prune(self) -> None:
        if time.monotonic() - self._pruned >= PRUNE_EVERY:
            self._pruned = time.monotonic()
            outbox_prune_done()
