"""Crash recovery of reservations (the seed's startup recovery over
``ListDurableDeliveryEntries``, narrowed to what it may settle:
``selectors.recovery_candidates``; the rules and why: docs/session-dispatch.md).

A reserved entry stays stored, invisible, until whoever holds the reservation
acknowledges or releases it. When that holder is gone nobody will, so
:func:`reservation_recover` finds those reservations and settles them.

Who is gone:

- a reservation held by a dispatcher (``reserved_by``: its worker id) is gone
  when the id is in ``gone`` (a dispatcher starting under the id of a crashed
  one; ``session_recover --holder``) or, with the worker registry on, when no
  live ``session_dispatch`` row has that id. Ids in ``live`` (the process
  running the pass) are never gone;
- any other reservation (a REST consumer's, a send-now claim's) is bound to
  the session incarnation only: it is gone once the session was re-created
  (its incarnation id changed).

What becomes of the entry:

- its delivery was attempted (at most once) → **dropped**: it may have reached
  the agent, so it is never offered again;
- a lifecycle entry of an older task generation (the task was purged since)
  → **removed**, reserved or not: a stale retry;
- otherwise → **released**: visible again at its own position. When a
  dispatcher held it for the current incarnation, the agent is marked ready
  again (the dispatcher's reserve had marked it busy).
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Collection
from dataclasses import asdict, dataclass
from itertools import groupby
from typing import Any

from django.db import transaction

from queueproject import clock
from queueproject.conf import product_settings
from queueproject.workers_registry import workers_live
from sessionqueues import exceptions as err
from sessionqueues import positions, selectors
from sessionqueues.models import QueuedMessage, SendNowClaim, Session
from sessionqueues.services.common import (
    bump_generation,
    delete_row,
    lock_session,
    unreserve,
    wake,
)

logger = logging.getLogger("sessionqueues.recovery")

#: The worker-registry kind of ``session_dispatch`` processes.
DISPATCHER_KIND = "session_dispatch"


class Reason(enum.StrEnum):
    HOLDER_GONE = "holder_gone"  # the dispatcher holding it is gone
    INCARNATION_GONE = "incarnation_gone"  # the session was re-created since
    STALE_GENERATION = "stale_generation"  # a lifecycle entry of a purged generation


class Action(enum.StrEnum):
    RELEASED = "released"  # visible again at its position
    DROPPED = "dropped"  # delivery attempted: at most once, deleted
    REMOVED = "removed"  # a stale lifecycle entry, deleted


@dataclass(frozen=True)
class Recovered:
    """One entry the pass settled (or, in a dry run, would settle)."""

    entry_id: uuid.UUID
    session_id: uuid.UUID
    task_id: uuid.UUID
    position: int
    reservation_id: uuid.UUID | None
    holder: str
    reason: Reason
    action: Action

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``session_recover --json``)."""
        data = asdict(self)
        return {k: v if isinstance(v, int | None) else str(v) for k, v in data.items()}


def reservation_recover(
    *, gone: Collection[str] = (), live: Collection[str] = (), dry_run: bool = False
) -> list[Recovered]:
    """Settle every reservation whose holder or owner incarnation is gone and
    remove stale lifecycle entries, by the rules of the module docstring.
    One transaction per session (its lock row), each row re-checked under
    the lock, so a reservation settled meanwhile is left alone. Returns what
    was settled; ``dry_run`` returns the plan and changes nothing."""
    rows = selectors.recovery_candidates()
    # The registry is read after the rows: a dispatcher beats before it first
    # reserves, so a reservation seen above has a registry row by now.
    alive = _live_dispatchers()
    plan = [p for p in (_judge(row, set(gone), set(live), alive) for row in rows) if p is not None]
    if dry_run:
        return plan
    done: list[Recovered] = []
    for session_id, items in groupby(plan, key=lambda p: p.session_id):
        done += _settle(session_id, list(items))
    for item in done:
        logger.warning(
            "recovered entry=%s session=%s %s (%s, holder=%s)",
            item.entry_id, item.session_id, item.action, item.reason, item.holder or "-",
        )  # fmt: skip
    return done


def _live_dispatchers() -> set[str] | None:
    """Worker ids of the live dispatchers; None when the registry is off (then
    only ``gone`` names a gone dispatcher)."""
    if not product_settings().worker_registry:
        return None
    return {w.id for w in workers_live() if w.kind == DISPATCHER_KIND}


def _judge(
    row: QueuedMessage, gone: set[str], live: set[str], alive: set[str] | None
) -> Recovered | None:
    stale = row.lifecycle_generation is not None and row.lifecycle_generation < row.task.generation
    if row.reservation_id is None:
        return _planned(row, Reason.STALE_GENERATION, Action.REMOVED) if stale else None
    reason = _gone_reason(row, gone, live, alive)
    if reason is None:
        return None
    if row.delivery_attempted:
        return _planned(row, reason, Action.DROPPED)
    return _planned(row, reason, Action.REMOVED if stale else Action.RELEASED)


def _gone_reason(
    row: QueuedMessage, gone: set[str], live: set[str], alive: set[str] | None
) -> Reason | None:
    holder = row.reserved_by
    if holder:
        if holder in live:
            return None
        if holder in gone or (alive is not None and holder not in alive):
            return Reason.HOLDER_GONE
        return None
    if row.reservation_owner != row.session.incarnation_id:
        return Reason.INCARNATION_GONE
    return None


def _planned(row: QueuedMessage, reason: Reason, action: Action) -> Recovered:
    return Recovered(
        entry_id=row.pk,
        session_id=row.session_id,
        task_id=row.task_id,
        position=row.position,
        reservation_id=row.reservation_id,
        holder=row.reserved_by,
        reason=reason,
        action=action,
    )


@transaction.atomic
def _settle(session_id: uuid.UUID, items: list[Recovered]) -> list[Recovered]:
    """Apply the plan of one session under its lock; skip rows that changed."""
    try:
        session = lock_session(session_id)
    except err.SessionQueueNotFound:
        return []
    done = [item for item in items if _settle_one(session, item)]
    closed = {item.reservation_id for item in done if item.reservation_id is not None}
    SendNowClaim.objects.filter(session=session, pk__in=closed).delete()
    if any(item.reservation_id is None for item in done):
        bump_generation(session)  # a visible entry was removed, as a delete does
    if done:
        wake(session)
    return done


def _settle_one(session: Session, item: Recovered) -> bool:
    rows = positions.rows(session).filter(pk=item.entry_id)
    if item.reservation_id is None:
        row = rows.filter(reservation_id__isnull=True).first()
    else:
        row = rows.filter(reservation_id=item.reservation_id, reserved_by=item.holder).first()
    if row is None:
        return False  # settled meanwhile
    if item.action is not Action.RELEASED:
        delete_row(row)
        return True
    busy_for_us = bool(row.reserved_by) and row.reservation_owner == session.incarnation_id
    unreserve(row)
    if busy_for_us and not session.agent_ready:
        session.save(update_fields=session.set_agent_ready(True, clock.now()))
    return True
