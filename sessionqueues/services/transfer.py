"""Whole-queue moves and removals across sessions of a task: transfer, replace
and purge (SPEC §3). Several sessions are always locked in id order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import F

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import positions
from sessionqueues.models import PendingMove, QueuedMessage, SendNowClaim, Session, Task
from sessionqueues.services.common import (
    Generations,
    SessionIdentity,
    as_uuids,
    bump_generation,
    check_generations,
    check_identity,
    from_snapshot,
    lock_session,
    lock_task,
    wake,
)
from sessionqueues.services.pending_moves import store_pending


def _lock_pair(first_id: Any, second_id: Any) -> tuple[Session, Session]:
    """Lock two sessions in id order (the order every multi-session write uses)."""
    ids = as_uuids([first_id, second_id])
    if ids is None:
        raise err.SessionQueueNotFound("No such session.")
    locked = {pk: lock_session(pk) for pk in sorted(ids, key=str)}
    return locked[ids[0]], locked[ids[1]]


@transaction.atomic
def queue_transfer(
    *,
    source_id: Any,
    destination_id: Any,
    source_identity: SessionIdentity | None = None,
    destination_identity: SessionIdentity | None = None,
) -> Session:
    """Move every entry (in order) and the pending move of ``source`` to
    ``destination``, after the destination's entries; destination auto-run =
    source AND destination. Both must be sessions of the same task, else
    SessionIdentityMismatch. Returns the destination."""
    if as_uuids([source_id]) == as_uuids([destination_id]):
        raise err.InvalidSessionInput(details={"to_session": ["Choose another session."]})
    source, destination = _lock_pair(source_id, destination_id)
    check_identity(source, source_identity)
    check_identity(destination, destination_identity)
    if source.task_id != destination.task_id:
        raise err.SessionIdentityMismatch("Sessions of different tasks cannot exchange entries.")
    _move_entries(source, destination)
    _move_pending(source, destination)
    both = source.auto_run and destination.auto_run
    destination.save(update_fields=destination.set_auto_run(both, clock.now()))
    bump_generation(source)
    bump_generation(destination)
    wake(destination)
    return destination


def _move_entries(source: Session, destination: Session) -> None:
    base = positions.tail_position(destination)
    moving = list(positions.rows(source).in_order())
    for offset, row in enumerate(moving, start=1):
        row.session = destination
        row.position = base + offset
    QueuedMessage.objects.bulk_update(moving, ["session", "position"])


def _move_pending(source: Session, destination: Session) -> None:
    move = PendingMove.objects.filter(session=source).first()
    if move is None:
        return
    PendingMove.objects.filter(session=destination).delete()
    PendingMove.objects.create(
        session=destination,
        move_id=move.move_id,
        workflow_id=move.workflow_id,
        workflow_step_id=move.workflow_step_id,
        actor=move.actor,
        queued_at=move.queued_at,
    )
    move.delete()


@transaction.atomic
def queue_replace(
    *,
    session_id: Any,
    entries: Sequence[dict[str, Any]],
    pending_move: dict[str, Any] | None,
    identity: SessionIdentity | None = None,
    generations: Generations | None = None,
) -> list[QueuedMessage]:
    """Replace the session's entries and pending move with a snapshot (entries as
    :func:`snapshot` gives them), keeping ids, positions and owners. A snapshot
    that repeats an id or a position, or ``generations`` that moved, raise
    QueueChanged; an id stored in another session raises EntryExists. Nothing
    changes then."""
    session = lock_session(session_id, identity)
    check_generations(session, generations)
    _check_snapshot(session, entries)
    positions.rows(session).delete()
    PendingMove.objects.filter(session=session).delete()
    rows = [from_snapshot(session, data) for data in entries]
    QueuedMessage.objects.bulk_create(rows)
    if pending_move is not None:
        store_pending(session, pending_move)
    bump_generation(session)
    wake(session)
    return sorted(rows, key=lambda row: row.position)


def _check_snapshot(session: Session, entries: Sequence[dict[str, Any]]) -> None:
    ids = as_uuids([data["id"] for data in entries])
    places = [data["position"] for data in entries]
    if ids is None or len(set(ids)) != len(ids) or len(set(places)) != len(places):
        raise err.QueueChanged("The snapshot repeats an id or a position; nothing changed.")
    if QueuedMessage.objects.filter(pk__in=ids).exclude(session=session).exists():
        raise err.EntryExists("An entry of the snapshot is stored in another session.")


@transaction.atomic
def queue_purge_session(*, session_id: Any, identity: SessionIdentity | None = None) -> int:
    """Remove every entry of the session (reserved ones too), its pending move and
    its send-now claims, and bump its generation (a deleted session's clean-up).
    Returns how many entries were removed."""
    session = lock_session(session_id, identity)
    removed, _ = positions.rows(session).delete()
    PendingMove.objects.filter(session=session).delete()
    SendNowClaim.objects.filter(session=session).delete()
    bump_generation(session)
    return removed


@transaction.atomic
def queue_purge_task(*, task_id: Any) -> tuple[int, int]:
    """Delete every entry of every session of the task (reserved ones too) and
    their send-now claims, bump the task's generation (stale lifecycle retries
    are then refused) and each session's. Locks the sessions (in id order, as
    every multi-session operation does) and then the task. Returns (removed,
    new generation)."""
    sessions = list(
        Session.objects.select_for_update(no_key=True).filter(task_id=task_id).order_by("pk")
    )
    task = lock_task(task_id)
    _, counts = QueuedMessage.objects.filter(task=task).delete()
    SendNowClaim.objects.filter(session__task=task).delete()
    Task.objects.filter(pk=task.pk).update(generation=F("generation") + 1)
    for session in sessions:
        bump_generation(session)
    task.refresh_from_db(fields=["generation"])
    return counts.get(QueuedMessage._meta.label, 0), task.generation
