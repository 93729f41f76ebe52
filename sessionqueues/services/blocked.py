"""Blocked heads (issue 20 point 4): the dispatcher's record of a session's
failing deliveries, and the operator's audited actions on a head that cannot
move: release a stuck reservation, skip the head (behind the next entry),
resume auto-run.

Each action is one transaction that locks the session, acts through the same
service an API caller would use, and writes an :class:`AuditRecord` (who, how,
what, when) in that transaction, so a record exists exactly when the action
happened. Which head is blocked and why is a read: ``selectors.blocked_sessions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import positions
from sessionqueues.models import (
    AuditAction,
    AuditRecord,
    AuditVia,
    DeliveryFailure,
    QueuedMessage,
    Session,
)
from sessionqueues.services.common import SessionIdentity, as_uuids, lock_session, wake
from sessionqueues.services.reservations import reservation_release
from sessionqueues.services.sessions import session_set_auto_run

MAX_ERROR = 2000  # characters of a delivery error kept


@dataclass(frozen=True)
class Actor:
    """Who acts, for the audit record: a principal label (``user:<id>``,
    ``app:<slug>``) or ``cli:<login>``, and through which door."""

    label: str
    via: AuditVia


# --- the dispatcher's record ------------------------------------------------


@transaction.atomic
def delivery_failure_record(
    *, session_id: Any, error: str, retry_in: float
) -> DeliveryFailure | None:
    """Count one more failed delivery to the session, due again in ``retry_in``
    seconds. None when the session is gone."""
    try:
        session = lock_session(session_id)
    except err.SessionQueueNotFound:
        return None
    now = clock.now()
    retry_at = now + timedelta(seconds=max(0.0, retry_in))
    failure = DeliveryFailure.objects.filter(session=session).first()
    if failure is None:
        failure = DeliveryFailure(session=session, failures=0, first_failed_at=now)
    failure.failures += 1
    failure.last_failed_at, failure.retry_at = now, retry_at
    failure.last_error = error[:MAX_ERROR]
    failure.save()
    return failure


def delivery_failure_clear(*, session_id: Any) -> bool:
    """Forget the session's failed deliveries (a delivery succeeded). One
    autocommit DELETE; whether there was a record."""
    deleted, _ = DeliveryFailure.objects.filter(session_id=session_id).delete()
    return deleted > 0


# --- the operator's actions ---------------------------------------------------


def _audit(
    actor: Actor,
    session: Session,
    action: AuditAction,
    *,
    entry: QueuedMessage | None,
    note: str,
    details: dict[str, Any],
) -> AuditRecord:
    return AuditRecord.objects.create(
        at=clock.now(),
        actor=actor.label,
        via=actor.via,
        action=action,
        app_id=session.task.app_id,
        task_id=session.task_id,
        session_id=session.pk,
        entry_id=entry.pk if entry is not None else None,
        note=note,
        details=details,
    )


def _locked(session_id: Any, identity: SessionIdentity | None) -> Session:
    session = lock_session(session_id, identity)
    session.task  # noqa: B018  # the app id for the record, read once under the lock
    return session


@transaction.atomic
def reservation_release_stuck(
    *,
    session_id: Any,
    reservation_id: Any,
    actor: Actor,
    note: str = "",
    identity: SessionIdentity | None = None,
) -> AuditRecord:
    """Release a reservation of the session whoever holds it (as
    ``reservation_release``: visible again at its position, or dropped when its
    delivery was marked attempted: at most once). The agent stays as it is
    (busy until it reports ready). Raises ReservationChanged when that
    reservation is not open."""
    session = _locked(session_id, identity)
    try:
        held = positions.rows(session).filter(reservation_id=reservation_id).first()
    except ValidationError:
        held = None
    if held is None:
        raise err.ReservationChanged()
    reserved_at = held.reserved_at
    row, released = reservation_release(session_id=session.pk, reservation_id=reservation_id)
    details = {
        "reservation_id": str(reservation_id),
        "position": row.position,
        "released": released,
        "reserved_at": reserved_at.isoformat() if reserved_at else None,
        "held_seconds": (clock.now() - reserved_at).total_seconds() if reserved_at else None,
    }
    return _audit(
        actor, session, AuditAction.RELEASE_RESERVATION, entry=row, note=note, details=details
    )


@transaction.atomic
def queue_skip_head(
    *,
    session_id: Any,
    actor: Actor,
    head_id: Any = None,
    note: str = "",
    identity: SessionIdentity | None = None,
) -> AuditRecord:
    """Move the visible head behind the next visible entry (their positions are
    exchanged; reserved entries keep theirs). ``head_id``: the head the operator
    saw. Raises QueueChanged when the head is another entry, or nothing is
    behind it."""
    session = _locked(session_id, identity)
    pair = list(positions.rows(session).visible().in_order()[:2])
    wanted = as_uuids([head_id]) if head_id is not None else None
    if head_id is not None and (wanted is None or not pair or pair[0].pk != wanted[0]):
        raise err.QueueChanged("The head is not the entry you saw; nothing moved.")
    if len(pair) < 2:
        raise err.QueueChanged("Nothing is queued behind the head; nothing moved.")
    head, following = pair
    before = head.position
    positions.swap(session, head, following)
    wake(session)
    details = {"from_position": before, "to_position": head.position, "now_head": str(following.pk)}
    return _audit(actor, session, AuditAction.SKIP_HEAD, entry=head, note=note, details=details)


@transaction.atomic
def session_resume_auto_run(
    *,
    session_id: Any,
    actor: Actor,
    note: str = "",
    identity: SessionIdentity | None = None,
) -> AuditRecord:
    """Turn auto-run on (as ``session_set_auto_run``) and record it; recorded
    with ``changed`` false when it was on already."""
    session = _locked(session_id, identity)
    was = session.auto_run
    session_set_auto_run(session_id=session.pk, enabled=True)
    details = {"changed": not was}
    return _audit(
        actor, session, AuditAction.RESUME_AUTO_RUN, entry=None, note=note, details=details
    )
