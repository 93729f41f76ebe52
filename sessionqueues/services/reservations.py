"""Draining a session: take or reserve the head, then acknowledge, release,
mark attempted or discard the reservation (SPEC §3)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, models, transaction

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import positions, sql
from sessionqueues.models import QueuedMessage, Session
from sessionqueues.services.common import (
    SessionIdentity,
    delete_row,
    head_row,
    lock_session,
    unreserve,
    wake,
)


def _db(field: str, value: Any) -> Any:
    """``value`` as the model field ``field`` stores it (raw SQL parameters).
    Raises ValidationError for a malformed value."""
    model_field = QueuedMessage._meta.get_field(field)
    assert isinstance(model_field, models.Field)  # a concrete column, not a reverse relation
    return model_field.get_db_prep_value(value, connection, prepared=False)


def _returning(statement: str, **params: Any) -> QueuedMessage | None:
    """Run an ``… RETURNING *`` statement of ``sessionqueues.sql``; its row or None."""
    found = list(QueuedMessage.objects.raw(statement, params))
    return found[0] if found else None


def _reserve_head(session: Session) -> QueuedMessage | None:
    """Reserve the visible head for the session's incarnation in one statement
    (the caller holds the session lock). None when nothing is visible."""
    return _returning(
        sql.RESERVE_HEAD,
        session_id=_db("session", session.pk),
        reservation_id=_db("reservation_id", uuid.uuid4()),
        owner=_db("reservation_owner", session.incarnation_id),
        now=_db("reserved_at", clock.now()),
    )


def _reserve(session: Session, row: QueuedMessage) -> QueuedMessage:
    row.reservation_id = uuid.uuid4()
    row.reservation_owner = session.incarnation_id
    row.reserved_at = clock.now()
    row.save(update_fields=["reservation_id", "reservation_owner", "reserved_at"])
    return row


@transaction.atomic
def entry_take_head(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage | None:
    """Delete and return the visible entry with the lowest position (None if empty)."""
    session = lock_session(session_id, identity)
    head = head_row(session)
    if head is not None:
        delete_row(head)
    return head


@transaction.atomic
def reservation_reserve_head(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage | None:
    """Ordinary head entries are taken (deleted); a durable head stays stored,
    reserved, until acknowledged. None when empty."""
    session = lock_session(session_id, identity)
    return _reserve_or_take(session)


def _reserve_or_take(session: Session) -> QueuedMessage | None:
    head = head_row(session)
    if head is None:
        return None
    if head.durable:
        return _reserve(session, head)
    delete_row(head)
    return head


@transaction.atomic
def reservation_reserve_head_if_auto_run(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> tuple[QueuedMessage | None, bool]:
    """Read the policy and reserve the head in one transaction. Returns
    (entry, auto_run): (None, False) is paused, (None, True) is empty."""
    session = lock_session(session_id, identity)
    if not session.auto_run:
        return None, False
    return _reserve_or_take(session), True


@transaction.atomic
def reservation_reserve_for_delivery(
    *, session_id: Any, identity: SessionIdentity | None = None, require_auto_run: bool = True
) -> tuple[QueuedMessage | None, bool]:
    """Reserve the head (ordinary or durable) for delivery: it stays stored and
    reserved, bound to the session incarnation, until acknowledged or released.
    Returns (entry, auto_run) like :func:`reservation_reserve_head_if_auto_run`."""
    session = lock_session(session_id, identity)
    if require_auto_run and not session.auto_run:
        return None, False
    return _reserve_head(session), session.auto_run


@transaction.atomic
def reservation_reserve_for_agent(
    *,
    session_id: Any,
    holder: str,
    at_most_once: bool = False,
    not_served_since: datetime | None = None,
) -> QueuedMessage | None:
    """The dispatcher's reserve: only while auto-run is ON, the agent is ready
    and no dispatcher reservation of the session is open, reserve the head for
    delivery held by ``holder`` (the dispatcher's worker id) and mark the agent
    busy in the same transaction (the agent reports ready again; so does the
    dispatcher when the delivery failed or the deliverer says the agent can
    take more). ``at_most_once`` marks the delivery attempted at once: from
    then on the entry is dropped, never offered again, whatever happens to
    the delivery. ``not_served_since``: nothing when a dispatcher reserved an
    entry of this session after that time (a pass's fairness across
    processes). None when paused, busy, in flight, served or empty."""
    session = _lock_if_deliverable(session_id, not_served_since)
    if session is None:
        return None
    now = clock.now()
    row = _returning(
        sql.RESERVE_HEAD_FOR_AGENT,
        session_id=_db("session", session.pk),
        reservation_id=_db("reservation_id", uuid.uuid4()),
        owner=_db("reservation_owner", session.incarnation_id),
        now=_db("reserved_at", now),
        holder=_db("reserved_by", holder),
        attempted=_db("delivery_attempted", at_most_once),
    )
    if row is not None:
        session.dispatched_at = now
        session.save(update_fields=[*session.set_agent_ready(False, now), "dispatched_at"])
    return row


def _lock_if_deliverable(session_id: Any, not_served_since: datetime | None) -> Session | None:
    """Lock the session's row only when its agent may take an entry now (a
    session that may not is neither locked nor written: a dispatcher that
    loses a race for it spends one read, not a row lock and a commit)."""
    sessions = Session.objects.select_for_update(no_key=True).filter(
        pk=session_id, auto_run=True, agent_ready=True
    )
    if not_served_since is not None:
        sessions = sessions.exclude(dispatched_at__gt=not_served_since)
    return sessions.first()


def _reserved_row(session: Session, reservation_id: Any) -> QueuedMessage:
    try:
        row = positions.rows(session).filter(reservation_id=reservation_id).first()
    except ValidationError:
        row = None
    if row is None:
        raise err.ReservationChanged()
    return row


@transaction.atomic
def reservation_acknowledge(
    *, session_id: Any, reservation_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage:
    """Delete exactly the entry reserved under ``reservation_id``; any other
    (or a closed) reservation raises ReservationChanged."""
    session = lock_session(session_id, identity)
    try:
        row = _returning(
            sql.ACKNOWLEDGE,
            session_id=_db("session", session.pk),
            reservation_id=_db("reservation_id", reservation_id),
        )
    except ValidationError:
        row = None
    if row is None:
        raise err.ReservationChanged()
    return row


@transaction.atomic
def reservation_acknowledge_delivery(
    *, session_id: Any, reservation_id: Any, holder: str, agent_ready: bool
) -> QueuedMessage:
    """The dispatcher's acknowledge: delete exactly the entry reserved under
    ``reservation_id`` and held by ``holder`` and, when ``agent_ready``, mark
    the agent ready again (and wake dispatchers) in the same transaction: one
    commit where an acknowledge and a ready would take two. Any other (or a
    closed) reservation raises ReservationChanged."""
    session = lock_session(session_id)
    try:
        row = _returning(
            sql.ACKNOWLEDGE_HELD,
            session_id=_db("session", session.pk),
            reservation_id=_db("reservation_id", reservation_id),
            holder=_db("reserved_by", holder),
        )
    except ValidationError:
        row = None
    if row is None:
        raise err.ReservationChanged()
    if agent_ready:
        session.save(update_fields=session.set_agent_ready(True, clock.now()))
        wake(session)
    return row


@transaction.atomic
def reservation_release(
    *, session_id: Any, reservation_id: Any, identity: SessionIdentity | None = None
) -> tuple[QueuedMessage, bool]:
    """Make the reserved entry visible again at its position. An entry whose
    delivery was marked attempted cannot go back: it is dropped instead.
    Returns (entry, released). Raises ReservationChanged."""
    session = lock_session(session_id, identity)
    row = _reserved_row(session, reservation_id)
    if row.delivery_attempted:
        delete_row(row)
        return row, False
    unreserve(row)
    wake(session)
    return row, True


@transaction.atomic
def reservation_mark_attempted(
    *, session_id: Any, reservation_ids: Iterable[Any], identity: SessionIdentity | None = None
) -> None:
    """Cross the at-most-once boundary for every given reservation (all or
    nothing): such entries can no longer be released back to pending."""
    session = lock_session(session_id, identity)
    rows = [_reserved_row(session, rid) for rid in reservation_ids]
    QueuedMessage.objects.filter(pk__in=[r.pk for r in rows]).update(delivery_attempted=True)


@transaction.atomic
def reservation_discard(*, session_id: Any, reservation_id: Any, owner: uuid.UUID) -> bool:
    """Remove a reserved row only when its reservation owner (incarnation) is
    ``owner``; the identity need not be current (stale workers clean up)."""
    session = lock_session(session_id)
    deleted, _ = (
        positions.rows(session)
        .filter(reservation_id=reservation_id, reservation_owner=owner)
        .delete()
    )
    return deleted > 0


@transaction.atomic
def reservation_acknowledge_by_id(
    *, session_id: Any, entry_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage:
    """Delete the reserved entry ``entry_id`` of this session whatever its
    reservation and owner (the seed's ``AcknowledgeByID``: internal dispatch
    code that knows the entry, not the reservation). An entry that is not
    stored here or not reserved raises ReservationChanged."""
    session = lock_session(session_id, identity)
    try:
        row = positions.rows(session).reserved().filter(pk=entry_id).first()
    except ValidationError:
        row = None
    if row is None:
        raise err.ReservationChanged()
    delete_row(row)
    return row
