"""What every session-queue write shares: the session identity, the lock row,
wake-ups, the session generation, the cap, and entry snapshots (SPEC §3).

Every service is one transaction that first locks the session's lock row with
:func:`lock_session`; the helpers here assume the caller is in that transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import F

from queueproject import clock, notify
from queueproject.conf import product_settings
from sessionqueues import exceptions as err
from sessionqueues import positions
from sessionqueues.models import ANY_SESSION_CHANNEL, QueuedMessage, Session, Task, session_channel

APPEND_SEPARATOR = "\n\n---\n\n"
MERGE_SEPARATOR = "\n\n"
MAX_ATTACHMENTS = 20
MAX_REFERENCES = 20
REFERENCES_KEY = "references"
SENDER_TASK_KEY = "sender_task_id"


@dataclass(frozen=True)
class SessionIdentity:
    """(task, session, incarnation): who a session is right now."""

    task_id: uuid.UUID
    session_id: uuid.UUID
    incarnation_id: uuid.UUID

    @classmethod
    def of(cls, session: Session) -> SessionIdentity:
        return cls(session.task_id, session.pk, session.incarnation_id)


@dataclass(frozen=True)
class Generations:
    """The generations a caller read (``QueueStatus.generations``): the task's
    lifecycle generation (bumped by purges) and the session generation (bumped
    by every destructive change). None: not checked."""

    task: int | None = None
    session: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        return {"task": self.task, "session": self.session}


def current_generations(session: Session) -> Generations:
    """The locked session's generations now. The caller holds the session lock,
    which a purge of the task takes before it bumps the task's generation, so
    the read cannot race one."""
    task = Task.objects.values_list("generation", flat=True).get(pk=session.task_id)
    return Generations(task=task, session=session.generation)


def check_generations(session: Session, expected: Generations | None) -> None:
    """Raise QueueChanged unless every generation in ``expected`` is current
    (the caller holds the session lock)."""
    if expected is None or (expected.task is None and expected.session is None):
        return
    now = current_generations(session)
    moved = (expected.task is not None and expected.task != now.task) or (
        expected.session is not None and expected.session != now.session
    )
    if moved:
        raise err.QueueChanged(
            "The queue changed since you read its generations; nothing changed.",
            details={"generations": now.as_dict()},
        )


def lock_session(session_id: Any, identity: SessionIdentity | None = None) -> Session:
    """Lock and return the session's lock row; the caller is in a transaction.
    ``FOR NO KEY UPDATE``: it serialises writers of this session without
    blocking foreign-key checks of rows inserted elsewhere.
    Raises SessionQueueNotFound, SessionIdentityMismatch."""
    try:
        session = Session.objects.select_for_update(no_key=True).get(pk=session_id)
    except (Session.DoesNotExist, ValidationError, ValueError) as exc:
        raise err.SessionQueueNotFound("No such session.") from exc
    check_identity(session, identity)
    return session


def check_identity(session: Session, identity: SessionIdentity | None) -> None:
    """Raise SessionIdentityMismatch unless ``identity`` is None or current."""
    if identity is not None and SessionIdentity.of(session) != identity:
        raise err.SessionIdentityMismatch()


def lock_task(task_id: Any) -> Task:
    """Lock and return the task row (raises SessionQueueNotFound)."""
    try:
        return Task.objects.select_for_update(no_key=True).get(pk=task_id)
    except (Task.DoesNotExist, ValidationError, ValueError) as exc:
        raise err.SessionQueueNotFound("No such task.") from exc


def wake(session: Session) -> None:
    """Tell dispatchers that the session may have something deliverable."""
    notify.notify_many([session_channel(session.pk), ANY_SESSION_CHANNEL])


def bump_generation(session: Session) -> None:
    """Advance the session generation (every destructive change; fences send-now restores)."""
    Session.objects.filter(pk=session.pk).update(generation=F("generation") + 1)
    session.generation += 1


def resolve_cap(max_per_session: int | None) -> int:
    """The cap to enforce: the caller's, else the configured one (≤ 0: none)."""
    if max_per_session is None:
        return product_settings().session_max_per_session
    return max_per_session


def check_cap(count: int, cap: int) -> None:
    """Raise QueueFull when ``cap > 0`` and ``count`` visible entries already fill it."""
    if cap > 0 and count >= cap:
        raise err.QueueFull(details={"count": count, "max": cap})


def as_uuids(values: Sequence[Any]) -> list[uuid.UUID] | None:
    """``values`` as UUIDs, or None when any is malformed."""
    try:
        return [v if isinstance(v, uuid.UUID) else uuid.UUID(str(v)) for v in values]
    except ValueError:
        return None


def delete_row(row: QueuedMessage) -> None:
    """Delete by query so ``row`` keeps its id and fields for the caller."""
    QueuedMessage.objects.filter(pk=row.pk).delete()


RESERVATION_FIELDS = ["reservation_id", "reservation_owner", "reserved_at", "reserved_by"]


def unreserve(row: QueuedMessage) -> None:
    """Make a reserved row visible again where it stands (same position)."""
    row.reservation_id = row.reservation_owner = row.reserved_at = None
    row.reserved_by = ""
    row.save(update_fields=RESERVATION_FIELDS)


def visible_row(session: Session, entry_id: Any) -> QueuedMessage:
    try:
        row = positions.rows(session).visible().filter(pk=entry_id).first()
    except ValidationError:
        row = None
    if row is None:
        raise err.SessionQueueNotFound("No such entry.")
    return row


def head_row(session: Session) -> QueuedMessage | None:
    """The visible entry with the lowest position."""
    return positions.rows(session).visible().in_order().first()


def snapshot(row: QueuedMessage) -> dict[str, Any]:
    """A queued entry as JSON data (send-now claims, session snapshots)."""
    return {
        "id": str(row.pk),
        "position": row.position,
        "content": row.content,
        "model": row.model,
        "plan_mode": row.plan_mode,
        "attachments": row.attachments,
        "metadata": row.metadata,
        "queued_by": row.queued_by,
        "queued_at": row.queued_at.isoformat(),
        "coalesce_key": row.coalesce_key,
        "durable": row.durable,
        "lifecycle_generation": row.lifecycle_generation,
    }


def from_snapshot(session: Session, data: dict[str, Any]) -> QueuedMessage:
    """An unsaved entry of ``session`` from :func:`snapshot` data (same id)."""
    fields = {k: v for k, v in data.items() if k not in ("id", "queued_at")}
    queued_at = data.get("queued_at")
    return QueuedMessage(
        id=uuid.UUID(str(data["id"])),
        session=session,
        task_id=session.task_id,
        queued_at=datetime.fromisoformat(queued_at) if queued_at else clock.now(),
        **fields,
    )


def restore_row(session: Session, entry: QueuedMessage) -> QueuedMessage:
    """Insert ``entry`` at its own position (later entries shift back when the
    slot is taken), unreserved, keeping its id; no cap. Wakes dispatchers."""
    positions.open_slot(session, entry.position)
    entry.session = session
    entry.task_id = session.task_id
    entry.reservation_id = entry.reservation_owner = entry.reserved_at = None
    entry.reserved_by = ""
    entry.save(force_insert=True)
    wake(session)
    return entry
