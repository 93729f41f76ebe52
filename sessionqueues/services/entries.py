"""One-entry writes: insert (auto-merging), append-or-insert, coalesce and
lifecycle upserts, restore, requeue, edit and delete (SPEC §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import positions
from sessionqueues.models import RESERVED_OWNERS, QueuedMessage, Session, Task
from sessionqueues.services.common import (
    APPEND_SEPARATOR,
    Generations,
    SessionIdentity,
    bump_generation,
    check_cap,
    check_generations,
    current_generations,
    delete_row,
    lock_session,
    resolve_cap,
    restore_row,
    visible_row,
    wake,
)
from sessionqueues.services.folding import can_fold, fold
from sessionqueues.services.reservations import entry_take_head


@dataclass
class NewEntry:
    """What a caller asks to queue (not yet stored)."""

    content: str
    queued_by: str
    model: str = ""
    plan_mode: bool = False
    attachments: list[Any] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    coalesce_key: str = ""
    durable: bool = False
    lifecycle_generation: int | None = None


@dataclass(frozen=True)
class Admission:
    """The stored entry an admission produced; ``merged`` when it folded into
    its predecessor, ``appended`` when it was appended to the tail entry,
    ``replaced`` when a coalesce key matched."""

    entry: QueuedMessage
    merged: bool = False
    appended: bool = False
    replaced: bool = False


@dataclass(frozen=True)
class LifecycleResult:
    accepted: bool
    admission: Admission | None = None


def _create(session: Session, entry: NewEntry, position: int) -> QueuedMessage:
    return QueuedMessage.objects.create(
        session=session,
        task_id=session.task_id,
        position=position,
        content=entry.content,
        model=entry.model,
        plan_mode=entry.plan_mode,
        attachments=list(entry.attachments),
        metadata=dict(entry.metadata),
        queued_by=entry.queued_by,
        queued_at=clock.now(),
        coalesce_key=entry.coalesce_key,
        durable=entry.durable,
        lifecycle_generation=entry.lifecycle_generation,
    )


def _admit(session: Session, entry: NewEntry, cap: int) -> Admission:
    """Auto-merge into the tail when enabled and compatible (even at full
    capacity: the fold is the admission), else insert at the tail under the cap."""
    if session.auto_merge_enabled:
        last = positions.last_row(session)
        if last is not None and can_fold(last, entry):
            fold(last, entry.content, entry.attachments, entry.metadata, clock.now())
            wake(session)
            return Admission(last, merged=True)
    return Admission(_insert_tail(session, entry, cap))


def _insert_tail(session: Session, entry: NewEntry, cap: int) -> QueuedMessage:
    """Insert at the position after the last one, under the cap (raises QueueFull)."""
    tail = positions.tail(session)
    check_cap(tail.visible, cap)
    row = _create(session, entry, tail.position + 1)
    wake(session)
    return row


@transaction.atomic
def entry_insert(
    *,
    session_id: Any,
    entry: NewEntry,
    max_per_session: int | None = None,
    identity: SessionIdentity | None = None,
) -> Admission:
    """Append ``entry`` at the tail (position = max + 1), auto-merging into its
    predecessor when enabled and compatible. Raises QueueFull (count ≥ cap)."""
    session = lock_session(session_id, identity)
    return _admit(session, entry, resolve_cap(max_per_session))


@transaction.atomic
def entry_append_or_insert_tail(
    *,
    session_id: Any,
    entry: NewEntry,
    max_per_session: int | None = None,
    identity: SessionIdentity | None = None,
) -> Admission:
    """When the tail entry has the same queued_by (and is visible), append the
    content after a ``---`` separator line; otherwise insert (cap applies)."""
    session = lock_session(session_id, identity)
    tail = positions.last_row(session)
    if tail is not None and not tail.reserved and tail.queued_by == entry.queued_by:
        tail.content = f"{tail.content}{APPEND_SEPARATOR}{entry.content}"
        tail.attachments = [*tail.attachments, *entry.attachments]
        tail.save(update_fields=["content", "attachments"])
        return Admission(tail, appended=True)
    return _admit(session, entry, resolve_cap(max_per_session))


def _coalesce_match(session: Session, entry: NewEntry) -> QueuedMessage | None:
    return (
        positions.rows(session)
        .visible()
        .filter(queued_by=entry.queued_by, coalesce_key=entry.coalesce_key)
        .first()
    )


def _replace(row: QueuedMessage, entry: NewEntry) -> QueuedMessage:
    """Replace a coalesced entry's payload in place (id and position kept)."""
    row.content = entry.content
    row.model = entry.model
    row.plan_mode = entry.plan_mode
    row.attachments = list(entry.attachments)
    row.metadata = dict(entry.metadata)
    row.queued_at = clock.now()
    row.lifecycle_generation = entry.lifecycle_generation
    row.save()
    return row


def _upsert(session: Session, entry: NewEntry, cap: int, allow_insert: bool) -> Admission:
    if not entry.coalesce_key:
        raise err.InvalidSessionInput(details={"coalesce_key": ["This field is required."]})
    match = _coalesce_match(session, entry)
    if match is not None:
        return Admission(_replace(match, entry), replaced=True)
    if not allow_insert:
        raise err.SessionQueueNotFound("No entry with that coalesce key.")
    return Admission(_insert_tail(session, entry, cap))


@transaction.atomic
def entry_upsert_by_coalesce_key(
    *,
    session_id: Any,
    entry: NewEntry,
    max_per_session: int | None = None,
    allow_insert: bool = True,
    identity: SessionIdentity | None = None,
) -> Admission:
    """Replace the visible entry with the same (session, queued_by, coalesce key)
    keeping its id and position; else insert at the tail when ``allow_insert``
    (never auto-merged). Raises SessionQueueNotFound, QueueFull."""
    session = lock_session(session_id, identity)
    return _upsert(session, entry, resolve_cap(max_per_session), allow_insert)


@transaction.atomic
def entry_lifecycle_upsert(
    *,
    session_id: Any,
    entry: NewEntry,
    generation: int,
    max_per_session: int | None = None,
    allow_insert: bool = True,
    identity: SessionIdentity | None = None,
) -> LifecycleResult:
    """A durable coalesce upsert accepted only while the task exists, is not
    archived and is at ``generation``; otherwise ``accepted=False`` and nothing
    changes. Locks the session, then the task (the purge order)."""
    try:
        session = lock_session(session_id, identity)
    except err.SessionQueueNotFound:
        return LifecycleResult(accepted=False)
    task = Task.objects.select_for_update(no_key=True).get(pk=session.task_id)
    if task.archived or task.generation != generation:
        return LifecycleResult(accepted=False)
    entry.durable = True
    entry.lifecycle_generation = generation
    return LifecycleResult(
        True, _upsert(session, entry, resolve_cap(max_per_session), allow_insert)
    )


@transaction.atomic
def entry_restore(
    *,
    session_id: Any,
    entry: QueuedMessage,
    identity: SessionIdentity | None = None,
    generations: Generations | None = None,
) -> QueuedMessage:
    """Re-insert a taken entry at its own old position (later entries shift back
    when that slot is taken), keeping its id; bypasses the cap. Restoring an
    entry that is still stored in this session changes nothing; its id stored
    in another session raises EntryExists; ``generations`` that moved raise
    QueueChanged (e.g. the task was purged since the entry was taken)."""
    session = lock_session(session_id, identity)
    check_generations(session, generations)
    existing = QueuedMessage.objects.filter(pk=entry.pk).first()
    if existing is not None:
        if existing.session_id != session.pk:
            raise err.EntryExists()
        return existing
    return restore_row(session, entry)


@transaction.atomic
def entry_take_head_with_generations(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> tuple[QueuedMessage | None, Generations]:
    """Take the head (``entry_take_head``) and read the generations in the same
    transaction, so a restore fenced by them refuses exactly when a purge or a
    destructive change came after the take."""
    row = entry_take_head(session_id=session_id, identity=identity)
    return row, current_generations(lock_session(session_id))


@transaction.atomic
def entry_requeue(
    *,
    session_id: Any,
    entry: NewEntry,
    identity: SessionIdentity | None = None,
    generations: Generations | None = None,
) -> Admission:
    """Requeue preserving FIFO: a coalesce match is replaced in place; an empty
    queue gets position 1; otherwise the entry goes right before the current
    head (shifting positions back when the head is already at 1). Bypasses the
    cap and never auto-merges, so a superseded retry is always served before
    newer arrivals. ``generations`` that moved raise QueueChanged."""
    session = lock_session(session_id, identity)
    check_generations(session, generations)
    if entry.coalesce_key:
        match = _coalesce_match(session, entry)
        if match is not None:
            return Admission(_replace(match, entry), replaced=True)
    head = positions.rows(session).visible().in_order().first()
    if head is None:
        position = positions.tail_position(session) + 1
    else:
        position = positions.free_slot_before(session, head)
    row = _create(session, entry, position)
    wake(session)
    return Admission(row)


def apply_metadata_updates(current: dict[str, Any], updates: dict[str, Any]) -> dict[str, Any]:
    """Merge key updates into ``current``; a None value removes that key."""
    merged = dict(current)
    for key, value in updates.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


@transaction.atomic
def entry_edit(
    *,
    session_id: Any,
    entry_id: Any,
    queued_by: str,
    content: str | None = None,
    attachments: list[Any] | None = None,
    metadata_updates: dict[str, Any] | None = None,
    identity: SessionIdentity | None = None,
) -> QueuedMessage:
    """Replace content/attachments and apply metadata key updates of an entry
    owned by ``queued_by``. Missing, another owner's, reserved-owner or
    reserved entries raise SessionQueueNotFound."""
    session = lock_session(session_id, identity)
    row = visible_row(session, entry_id)
    if row.queued_by != queued_by or queued_by in RESERVED_OWNERS:
        raise err.SessionQueueNotFound("No such entry.")
    if content is not None:
        row.content = content
    if attachments is not None:
        row.attachments = list(attachments)
    if metadata_updates:
        row.metadata = apply_metadata_updates(row.metadata, metadata_updates)
    row.save(update_fields=["content", "attachments", "metadata"])
    return row


@transaction.atomic
def entry_delete(
    *, session_id: Any, entry_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage:
    """Delete one visible entry of this session (another session's id, or a
    reserved entry, raises SessionQueueNotFound)."""
    session = lock_session(session_id, identity)
    row = visible_row(session, entry_id)
    delete_row(row)
    bump_generation(session)
    return row
