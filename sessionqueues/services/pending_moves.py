"""A session's deferred workflow move: set, take, delete, delete-if-match (SPEC §3)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import positions
from sessionqueues.models import PendingMove, Session
from sessionqueues.services.common import SessionIdentity, lock_session

PENDING_FIELDS = ("move_id", "workflow_id", "workflow_step_id", "actor")


def store_pending(session: Session, move: dict[str, Any]) -> PendingMove:
    """Upsert the locked session's move from ``move``'s fields (queued_at = now)."""
    values = {name: move.get(name) or "" for name in PENDING_FIELDS}
    values["queued_at"] = clock.now()
    pending, _ = PendingMove.objects.update_or_create(session=session, defaults=values)
    return pending


@transaction.atomic
def pending_move_set(
    *, session_id: Any, move: dict[str, Any], identity: SessionIdentity | None = None
) -> PendingMove:
    """Upsert the session's deferred workflow move (queued_at = now)."""
    return store_pending(lock_session(session_id, identity), move)


@transaction.atomic
def pending_move_take(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> PendingMove | None:
    """Return and remove the session's move; a stale one (over 24 h) is removed
    and None returned."""
    session = lock_session(session_id, identity)
    move = PendingMove.objects.filter(session=session).first()
    if move is None:
        return None
    PendingMove.objects.filter(session=session).delete()
    return None if move.is_stale(clock.now()) else move


@transaction.atomic
def pending_move_delete(*, session_id: Any, identity: SessionIdentity | None = None) -> bool:
    """Remove the session's move. Returns whether one existed."""
    session = lock_session(session_id, identity)
    deleted, _ = PendingMove.objects.filter(session=session).delete()
    return deleted > 0


@transaction.atomic
def pending_move_delete_if_match(
    *,
    expected: dict[str, Any],
    handoff_entry_id: Any = None,
    identity: SessionIdentity | None = None,
) -> bool:
    """Remove the move only while the stored row equals ``expected`` (a record of
    :func:`selectors.pending_moves`), and the linked entry in the same
    transaction. A missing or replaced move is a no-op (False); a stale
    ``identity`` raises SessionIdentityMismatch."""
    try:
        session = lock_session(expected["session_id"], identity)
    except err.SessionQueueNotFound:
        return False
    move = PendingMove.objects.filter(session=session).first()
    if move is None or move.as_record() != expected:
        return False
    move.delete()
    if handoff_entry_id:
        positions.rows(session).filter(pk=handoff_entry_id).delete()
    return True
