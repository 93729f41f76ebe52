"""Writes of the session queues (SPEC §3). Every function is one transaction that
first locks the session's lock row (the Session row: ``select_for_update`` on
PostgreSQL; SQLite's IMMEDIATE write transactions serialise writers), so caps,
positions and reservations hold under concurrency. Identity-bound calls pass a
:class:`SessionIdentity` and get ``SessionIdentityMismatch`` when it is stale.

Errors are ``sessionqueues.exceptions``; time comes from ``queueproject.clock``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F

from principals.models import App
from queueproject import clock, notify
from queueproject.conf import product_settings
from sessionqueues import exceptions as err
from sessionqueues import positions, sql
from sessionqueues.models import (
    ANY_SESSION_CHANNEL,
    RESERVED_OWNERS,
    PendingMove,
    QueuedMessage,
    SendNowClaim,
    Session,
    Task,
    session_channel,
)

APPEND_SEPARATOR = "\n\n---\n\n"
MERGE_SEPARATOR = "\n\n"
MAX_ATTACHMENTS = 20
MAX_REFERENCES = 20
REFERENCES_KEY = "references"
SENDER_TASK_KEY = "sender_task_id"

# ---------------------------------------------------------------------------
# Value objects


@dataclass(frozen=True)
class SessionIdentity:
    """(task, session, incarnation): who a session is right now."""

    task_id: uuid.UUID
    session_id: uuid.UUID
    incarnation_id: uuid.UUID

    @classmethod
    def of(cls, session: Session) -> SessionIdentity:
        return cls(session.task_id, session.pk, session.incarnation_id)


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


# ---------------------------------------------------------------------------
# Locking, identity, wake-ups


def _lock(session_id: Any, identity: SessionIdentity | None = None) -> Session:
    """Lock and return the session's lock row; the caller is in a transaction.
    ``FOR NO KEY UPDATE``: it serialises writers of this session without
    blocking foreign-key checks of rows inserted elsewhere.
    Raises SessionQueueNotFound, SessionIdentityMismatch."""
    try:
        session = Session.objects.select_for_update(no_key=True).get(pk=session_id)
    except (Session.DoesNotExist, ValidationError, ValueError) as exc:
        raise err.SessionQueueNotFound("No such session.") from exc
    if identity is not None and (
        session.task_id != identity.task_id
        or session.pk != identity.session_id
        or session.incarnation_id != identity.incarnation_id
    ):
        raise err.SessionIdentityMismatch()
    return session


def _wake(session: Session) -> None:
    """Tell dispatchers that the session may have something deliverable."""
    notify.notify_many([session_channel(session.pk), ANY_SESSION_CHANNEL])


def _bump_generation(session: Session) -> None:
    Session.objects.filter(pk=session.pk).update(generation=F("generation") + 1)
    session.generation += 1


def _cap(max_per_session: int | None) -> int:
    if max_per_session is None:
        return product_settings().session_max_per_session
    return max_per_session


def _check_cap(count: int, cap: int) -> None:
    """Raise QueueFull when ``cap > 0`` and ``count`` visible entries already fill it."""
    if cap > 0 and count >= cap:
        raise err.QueueFull(details={"count": count, "max": cap})


# ---------------------------------------------------------------------------
# Tasks and sessions


@transaction.atomic
def task_create(*, app: App, title: str = "") -> Task:
    """Create a task of ``app``."""
    return Task.objects.create(app=app, title=title)


@transaction.atomic
def task_archive(*, task_id: Any) -> Task:
    """Mark the task archived: lifecycle inserts are refused from now on."""
    task = _lock_task(task_id)
    if not task.archived:
        task.archived = True
        task.save(update_fields=["archived"])
    return task


def _lock_task(task_id: Any) -> Task:
    try:
        return Task.objects.select_for_update(no_key=True).get(pk=task_id)
    except (Task.DoesNotExist, ValidationError, ValueError) as exc:
        raise err.SessionQueueNotFound("No such task.") from exc


@transaction.atomic
def task_purge(*, task_id: Any) -> tuple[int, int]:
    """Delete every entry of every session of the task (reserved ones too) and
    their send-now claims, bump the task's generation (stale lifecycle retries
    are then refused) and each session's. Locks the sessions (in id order, as
    every multi-session operation does) and then the task. Returns (removed,
    new generation)."""
    sessions = list(
        Session.objects.select_for_update(no_key=True).filter(task_id=task_id).order_by("pk")
    )
    task = _lock_task(task_id)
    _, counts = QueuedMessage.objects.filter(task=task).delete()
    SendNowClaim.objects.filter(session__task=task).delete()
    Task.objects.filter(pk=task.pk).update(generation=F("generation") + 1)
    for session in sessions:
        _bump_generation(session)
    task.refresh_from_db(fields=["generation"])
    return counts.get(QueuedMessage._meta.label, 0), task.generation


@transaction.atomic
def session_create(*, task: Task) -> Session:
    """Create a session of ``task`` (auto-run on, a fresh incarnation)."""
    return Session.objects.create(task=task)


@transaction.atomic
def session_reincarnate(*, session_id: Any) -> Session:
    """Re-create the session's identity: a new incarnation id, so stale callers
    holding the old identity get SessionIdentityMismatch."""
    session = _lock(session_id)
    session.incarnation_id = uuid.uuid4()
    session.save(update_fields=["incarnation_id"])
    _bump_generation(session)
    return session


@transaction.atomic
def session_set_auto_run(
    *, session_id: Any, enabled: bool, identity: SessionIdentity | None = None
) -> Session:
    """Persist the automatic-drain policy (independent of queue contents)."""
    session = _lock(session_id, identity)
    session.auto_run = enabled
    session.save(update_fields=["auto_run"])
    if enabled:
        _wake(session)
    return session


@transaction.atomic
def session_pause_auto_run_if_pending(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> bool:
    """Set auto-run OFF only when a visible entry exists (reserved ones do not
    count). Returns whether it paused."""
    session = _lock(session_id, identity)
    if not positions.rows(session).visible().exists():
        return False
    session.auto_run = False
    session.save(update_fields=["auto_run"])
    return True


@transaction.atomic
def session_set_auto_merge(
    *, session_id: Any, enabled: bool | None, identity: SessionIdentity | None = None
) -> Session:
    """Set the auto-merge override (None inherits the global setting) and
    advance its revision."""
    session = _lock(session_id, identity)
    session.auto_merge = enabled
    session.auto_merge_revision += 1
    session.save(update_fields=["auto_merge", "auto_merge_revision"])
    return session


@transaction.atomic
def session_set_agent_ready(
    *, session_id: Any, ready: bool, identity: SessionIdentity | None = None
) -> Session:
    """Record whether the session's agent can take a prompt (the dispatcher
    delivers only to ready agents)."""
    session = _lock(session_id, identity)
    session.agent_ready = ready
    session.save(update_fields=["agent_ready"])
    if ready:
        _wake(session)
    return session


# ---------------------------------------------------------------------------
# Admission


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


def _same_sender(target: QueuedMessage, queued_by: str, metadata: dict[str, Any]) -> bool:
    """User/app entries of the same owner, or agent entries of the same sender task."""
    if target.queued_by == "agent" and queued_by == "agent":
        sender = metadata.get(SENDER_TASK_KEY)
        return sender is not None and target.metadata.get(SENDER_TASK_KEY) == sender
    if target.queued_by in RESERVED_OWNERS or queued_by in RESERVED_OWNERS:
        return False
    return target.queued_by == queued_by


def _without_references(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k != REFERENCES_KEY}


def _can_fold(target: QueuedMessage | None, entry: NewEntry) -> bool:
    """Auto-merge compatibility: same model, plan mode and owner, equal metadata
    apart from references, attachments within limits; never durable, coalesced
    or reserved rows."""
    return (
        target is not None
        and not target.reserved
        and not (target.durable or entry.durable or target.coalesce_key or entry.coalesce_key)
        and target.model == entry.model
        and target.plan_mode == entry.plan_mode
        and _same_sender(target, entry.queued_by, entry.metadata)
        and _without_references(target.metadata) == _without_references(entry.metadata)
        and len(target.attachments) + len(entry.attachments) <= MAX_ATTACHMENTS
    )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _union_references(first: Any, second: Any) -> list[Any]:
    """Both reference lists, each reference once, in order, capped."""
    merged: list[Any] = []
    for ref in [*_as_list(first), *_as_list(second)]:
        if ref not in merged:
            merged.append(ref)
    return merged[:MAX_REFERENCES]


def _fold(
    target: QueuedMessage,
    content: str,
    attachments: list[Any],
    metadata: dict[str, Any],
    at: datetime,
) -> None:
    """Fold content into ``target``: blank-line join, attachments concatenated,
    references unioned (capped), the later queued_at."""
    target.content = f"{target.content}{MERGE_SEPARATOR}{content}"
    target.attachments = [*target.attachments, *attachments]
    refs = _union_references(target.metadata.get(REFERENCES_KEY), metadata.get(REFERENCES_KEY))
    if refs:
        target.metadata = {**target.metadata, REFERENCES_KEY: refs}
    target.queued_at = max(target.queued_at, at)
    target.save(update_fields=["content", "attachments", "metadata", "queued_at"])


def _admit(session: Session, entry: NewEntry, cap: int) -> Admission:
    """Auto-merge into the tail when enabled and compatible (even at full
    capacity: the fold is the admission), else insert at the tail under the cap."""
    if session.auto_merge_enabled:
        last = positions.last_row(session)
        if last is not None and _can_fold(last, entry):
            _fold(last, entry.content, entry.attachments, entry.metadata, clock.now())
            _wake(session)
            return Admission(last, merged=True)
    return Admission(_insert_tail(session, entry, cap))


def _insert_tail(session: Session, entry: NewEntry, cap: int) -> QueuedMessage:
    """Insert at the position after the last one, under the cap (raises QueueFull)."""
    tail = positions.tail(session)
    _check_cap(tail.visible, cap)
    row = _create(session, entry, tail.position + 1)
    _wake(session)
    return row


@transaction.atomic
def message_insert(
    *,
    session_id: Any,
    entry: NewEntry,
    max_per_session: int | None = None,
    identity: SessionIdentity | None = None,
) -> Admission:
    """Append ``entry`` at the tail (position = max + 1), auto-merging into its
    predecessor when enabled and compatible. Raises QueueFull (count ≥ cap)."""
    session = _lock(session_id, identity)
    return _admit(session, entry, _cap(max_per_session))


@transaction.atomic
def message_append_or_insert_tail(
    *,
    session_id: Any,
    entry: NewEntry,
    max_per_session: int | None = None,
    identity: SessionIdentity | None = None,
) -> Admission:
    """When the tail entry has the same queued_by (and is visible), append the
    content after a ``---`` separator line; otherwise insert (cap applies)."""
    session = _lock(session_id, identity)
    tail = positions.last_row(session)
    if tail is not None and not tail.reserved and tail.queued_by == entry.queued_by:
        tail.content = f"{tail.content}{APPEND_SEPARATOR}{entry.content}"
        tail.attachments = [*tail.attachments, *entry.attachments]
        tail.save(update_fields=["content", "attachments"])
        return Admission(tail, appended=True)
    return _admit(session, entry, _cap(max_per_session))


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
def message_upsert_by_coalesce_key(
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
    session = _lock(session_id, identity)
    return _upsert(session, entry, _cap(max_per_session), allow_insert)


@transaction.atomic
def message_lifecycle_upsert(
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
        session = _lock(session_id, identity)
    except err.SessionQueueNotFound:
        return LifecycleResult(accepted=False)
    task = Task.objects.select_for_update(no_key=True).get(pk=session.task_id)
    if task.archived or task.generation != generation:
        return LifecycleResult(accepted=False)
    entry.durable = True
    entry.lifecycle_generation = generation
    return LifecycleResult(True, _upsert(session, entry, _cap(max_per_session), allow_insert))


@transaction.atomic
def message_restore(*, session_id: Any, message: QueuedMessage) -> QueuedMessage:
    """Re-insert a taken entry at its own old position (later entries shift back
    when that slot is taken), keeping its id; bypasses the cap. Restoring an
    entry that is still stored changes nothing."""
    session = _lock(session_id)
    existing = positions.rows(session).filter(pk=message.pk).first()
    if existing is not None:
        return existing
    return _restore_row(session, message)


def _restore_row(session: Session, message: QueuedMessage) -> QueuedMessage:
    positions.open_slot(session, message.position)
    message.session = session
    message.task_id = session.task_id
    message.reservation_id = message.reservation_owner = message.reserved_at = None
    message.save(force_insert=True)
    _wake(session)
    return message


@transaction.atomic
def message_requeue(
    *, session_id: Any, entry: NewEntry, identity: SessionIdentity | None = None
) -> Admission:
    """Requeue preserving FIFO: a coalesce match is replaced in place; an empty
    queue gets position 1; otherwise the entry goes right before the current
    head (shifting positions back when the head is already at 1). Bypasses the
    cap and never auto-merges, so a superseded retry is always served before
    newer arrivals."""
    session = _lock(session_id, identity)
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
    _wake(session)
    return Admission(row)


# ---------------------------------------------------------------------------
# Draining: take, reserve, acknowledge, release


def _head(session: Session) -> QueuedMessage | None:
    return positions.rows(session).visible().in_order().first()


def _delete(row: QueuedMessage) -> None:
    """Delete by query so ``row`` keeps its id and fields for the caller."""
    QueuedMessage.objects.filter(pk=row.pk).delete()


def _db(field: str, value: Any) -> Any:
    """``value`` as the model field ``field`` stores it (raw SQL parameters).
    Raises ValidationError for a malformed value."""
    return QueuedMessage._meta.get_field(field).get_db_prep_value(value, connection, prepared=False)


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
def queue_take_head(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage | None:
    """Delete and return the visible entry with the lowest position (None if empty)."""
    session = _lock(session_id, identity)
    head = _head(session)
    if head is not None:
        _delete(head)
    return head


@transaction.atomic
def queue_reserve_head(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage | None:
    """Ordinary head entries are taken (deleted); a durable head stays stored,
    reserved, until acknowledged. None when empty."""
    session = _lock(session_id, identity)
    return _reserve_or_take(session)


def _reserve_or_take(session: Session) -> QueuedMessage | None:
    head = _head(session)
    if head is None:
        return None
    if head.durable:
        return _reserve(session, head)
    _delete(head)
    return head


@transaction.atomic
def queue_reserve_head_if_auto_run(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> tuple[QueuedMessage | None, bool]:
    """Read the policy and reserve the head in one transaction. Returns
    (entry, auto_run): (None, False) is paused, (None, True) is empty."""
    session = _lock(session_id, identity)
    if not session.auto_run:
        return None, False
    return _reserve_or_take(session), True


@transaction.atomic
def reservation_reserve_for_delivery(
    *, session_id: Any, identity: SessionIdentity | None = None, require_auto_run: bool = True
) -> tuple[QueuedMessage | None, bool]:
    """Reserve the head (ordinary or durable) for delivery: it stays stored and
    reserved, bound to the session incarnation, until acknowledged or released.
    Returns (entry, auto_run) like :func:`queue_reserve_head_if_auto_run`."""
    session = _lock(session_id, identity)
    if require_auto_run and not session.auto_run:
        return None, False
    return _reserve_head(session), session.auto_run


@transaction.atomic
def reservation_reserve_for_agent(*, session_id: Any) -> QueuedMessage | None:
    """The dispatcher's reserve: only while auto-run is ON and the agent is
    ready, reserve the head for delivery and mark the agent busy in the same
    transaction (the agent reports ready again; so does the dispatcher when
    the delivery failed or the deliverer says the agent can take more).
    None when paused, busy or empty."""
    session = _lock(session_id)
    if not (session.auto_run and session.agent_ready):
        return None
    row = _reserve_head(session)
    if row is not None:
        session.agent_ready = False
        session.save(update_fields=["agent_ready"])
    return row


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
    session = _lock(session_id, identity)
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
def reservation_release(
    *, session_id: Any, reservation_id: Any, identity: SessionIdentity | None = None
) -> tuple[QueuedMessage, bool]:
    """Make the reserved entry visible again at its position. An entry whose
    delivery was marked attempted cannot go back: it is dropped instead.
    Returns (entry, released). Raises ReservationChanged."""
    session = _lock(session_id, identity)
    row = _reserved_row(session, reservation_id)
    if row.delivery_attempted:
        _delete(row)
        return row, False
    row.reservation_id = row.reservation_owner = row.reserved_at = None
    row.save(update_fields=["reservation_id", "reservation_owner", "reserved_at"])
    _wake(session)
    return row, True


@transaction.atomic
def reservation_mark_attempted(
    *, session_id: Any, reservation_ids: Iterable[Any], identity: SessionIdentity | None = None
) -> None:
    """Cross the at-most-once boundary for every given reservation (all or
    nothing): such entries can no longer be released back to pending."""
    session = _lock(session_id, identity)
    rows = [_reserved_row(session, rid) for rid in reservation_ids]
    QueuedMessage.objects.filter(pk__in=[r.pk for r in rows]).update(delivery_attempted=True)


@transaction.atomic
def reservation_discard(*, session_id: Any, reservation_id: Any, owner: uuid.UUID) -> bool:
    """Remove a reserved row only when its reservation owner (incarnation) is
    ``owner``; the identity need not be current (stale workers clean up)."""
    session = _lock(session_id)
    deleted, _ = (
        positions.rows(session)
        .filter(reservation_id=reservation_id, reservation_owner=owner)
        .delete()
    )
    return deleted > 0


# ---------------------------------------------------------------------------
# Editing: update, delete, merge, reorder


def _visible_row(session: Session, message_id: Any) -> QueuedMessage:
    try:
        row = positions.rows(session).visible().filter(pk=message_id).first()
    except ValidationError:
        row = None
    if row is None:
        raise err.SessionQueueNotFound("No such queued message.")
    return row


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
def message_update(
    *,
    session_id: Any,
    message_id: Any,
    queued_by: str,
    content: str | None = None,
    attachments: list[Any] | None = None,
    metadata_updates: dict[str, Any] | None = None,
    identity: SessionIdentity | None = None,
) -> QueuedMessage:
    """Replace content/attachments and apply metadata key updates of an entry
    owned by ``queued_by``. Missing, another owner's, reserved-owner or
    reserved entries raise SessionQueueNotFound."""
    session = _lock(session_id, identity)
    row = _visible_row(session, message_id)
    if row.queued_by != queued_by or queued_by in RESERVED_OWNERS:
        raise err.SessionQueueNotFound("No such queued message.")
    if content is not None:
        row.content = content
    if attachments is not None:
        row.attachments = list(attachments)
    if metadata_updates:
        row.metadata = apply_metadata_updates(row.metadata, metadata_updates)
    row.save(update_fields=["content", "attachments", "metadata"])
    return row


@transaction.atomic
def message_delete(
    *, session_id: Any, message_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage:
    """Delete one visible entry of this session (another session's id, or a
    reserved entry, raises SessionQueueNotFound)."""
    session = _lock(session_id, identity)
    row = _visible_row(session, message_id)
    _delete(row)
    _bump_generation(session)
    return row


@transaction.atomic
def queue_delete_all(*, session_id: Any, identity: SessionIdentity | None = None) -> int:
    """Delete every visible entry (reserved ones stay). Returns the count."""
    session = _lock(session_id, identity)
    removed, _ = positions.rows(session).visible().delete()
    if removed:
        _bump_generation(session)
    return removed


def _merge_target(session: Session, source: QueuedMessage, queued_by: str) -> QueuedMessage:
    """The entry directly above ``source`` when the pair may merge, else NoMergeTarget."""
    above = positions.rows(session).filter(position__lt=source.position)
    target = above.order_by("-position").first()
    if target is None or target.reserved:
        raise err.NoMergeTarget()
    if source.queued_by == "agent":
        compatible = _same_sender(target, "agent", source.metadata)
    else:
        compatible = source.queued_by == queued_by and target.queued_by == queued_by
        compatible = compatible and queued_by not in RESERVED_OWNERS
    if not compatible:
        raise err.NoMergeTarget()
    if len(target.attachments) + len(source.attachments) > MAX_ATTACHMENTS:
        raise err.NoMergeTarget("The merged entry would have too many attachments.")
    return target


@transaction.atomic
def message_merge_up(
    *, session_id: Any, message_id: Any, queued_by: str, identity: SessionIdentity | None = None
) -> QueuedMessage:
    """Fold an entry into the one directly above it (content joined by a blank
    line, attachments concatenated, references unioned and capped, the later
    queued_at); the source is deleted. Allowed between entries both owned by
    ``queued_by``, or agent entries of the same sender task. Raises
    MergeDisabled, SessionQueueNotFound, NoMergeTarget."""
    if not product_settings().session_manual_merge_enabled:
        raise err.MergeDisabled()
    session = _lock(session_id, identity)
    source = _visible_row(session, message_id)
    target = _merge_target(session, source, queued_by)
    _delete(source)
    _fold(target, source.content, source.attachments, source.metadata, source.queued_at)
    _bump_generation(session)
    return target


@transaction.atomic
def queue_reorder(
    *, session_id: Any, ordered_ids: Sequence[Any], identity: SessionIdentity | None = None
) -> list[QueuedMessage]:
    """Rewrite positions so the visible entries follow ``ordered_ids``; reserved
    entries keep their slots; positions are compacted to 1..N. Anything but an
    exact permutation of the visible ids raises QueueChanged and changes nothing.
    Returns the visible entries in their new order."""
    session = _lock(session_id, identity)
    rows = list(positions.rows(session).in_order())
    by_id = {row.pk: row for row in rows if not row.reserved}
    wanted = _as_uuids(ordered_ids)
    if wanted is None or len(wanted) != len(by_id) or set(wanted) != set(by_id):
        raise err.QueueChanged()
    submitted = iter(wanted)
    ordered = [row if row.reserved else by_id[next(submitted)] for row in rows]
    positions.renumber(session, ordered)
    return [by_id[pk] for pk in wanted]


def _as_uuids(values: Sequence[Any]) -> list[uuid.UUID] | None:
    try:
        return [v if isinstance(v, uuid.UUID) else uuid.UUID(str(v)) for v in values]
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# Send now


@dataclass(frozen=True)
class SendNowExpectation:
    """A source the client selected and the content it saw."""

    id: Any
    content: str


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


def _from_snapshot(session: Session, data: dict[str, Any]) -> QueuedMessage:
    from django.utils.dateparse import parse_datetime

    fields = {k: v for k, v in data.items() if k not in ("id", "queued_at")}
    return QueuedMessage(
        id=uuid.UUID(str(data["id"])),
        session=session,
        task_id=session.task_id,
        queued_at=parse_datetime(data["queued_at"]) if data.get("queued_at") else clock.now(),
        **fields,
    )


def _claim_sources(session: Session, expected: Sequence[SendNowExpectation]) -> list[QueuedMessage]:
    """The selected rows in queue order, or ReservationConflict / ClaimChanged."""
    ids = _as_uuids([e.id for e in expected])
    if ids is None or len(set(ids)) != len(ids):
        raise err.ClaimChanged()
    rows = {row.pk: row for row in positions.rows(session).filter(pk__in=ids)}
    if any(row.reserved for row in rows.values()):
        raise err.ReservationConflict()
    for pk, want in zip(ids, expected, strict=True):
        if pk not in rows or rows[pk].content != want.content:
            raise err.ClaimChanged()
    return sorted(rows.values(), key=lambda row: row.position)


def _dispatch(claim: SendNowClaim, sources: list[QueuedMessage]) -> dict[str, Any]:
    return {
        "content": MERGE_SEPARATOR.join(row.content for row in sources),
        "model": sources[0].model,
        "plan_mode": sources[0].plan_mode,
        "attachments": [a for row in sources for a in row.attachments],
        "sources": [str(row.pk) for row in sources],
    }


@transaction.atomic
def send_now_claim(
    *,
    session_id: Any,
    expected: Sequence[SendNowExpectation],
    identity: SessionIdentity | None = None,
) -> tuple[SendNowClaim, dict[str, Any]]:
    """Claim the exact selected entries (content must match what the client
    saw), turn auto-run ON and return (claim, dispatch) whose content joins the
    sources in queue order by blank lines. Ordinary sources are removed, durable
    ones reserved under the claim id. Raises InvalidSessionInput (empty),
    ReservationConflict, ClaimChanged."""
    if not expected:
        raise err.InvalidSessionInput(details={"entries": ["Select at least one entry."]})
    session = _lock(session_id, identity)
    sources = _claim_sources(session, expected)
    claim = SendNowClaim.objects.create(
        session=session,
        generation=session.generation,
        sources=[snapshot(row) for row in sources],
        created_at=clock.now(),
    )
    QueuedMessage.objects.filter(pk__in=[r.pk for r in sources if not r.durable]).delete()
    QueuedMessage.objects.filter(pk__in=[r.pk for r in sources if r.durable]).update(
        reservation_id=claim.pk, reservation_owner=session.incarnation_id, reserved_at=clock.now()
    )
    if not session.auto_run:
        session.auto_run = True
        session.save(update_fields=["auto_run"])
    return claim, _dispatch(claim, sources)


def _open_claim(session: Session, claim_id: Any) -> SendNowClaim:
    try:
        claim = SendNowClaim.objects.filter(pk=claim_id, session=session).first()
    except ValidationError:
        claim = None
    if claim is None:
        raise err.SessionQueueNotFound("No such send-now claim.")
    return claim


def _durable_sources_intact(session: Session, claim: SendNowClaim) -> bool:
    durable = {uuid.UUID(s["id"]) for s in claim.sources if s["durable"]}
    held = set(positions.rows(session).filter(reservation_id=claim.pk).values_list("pk", flat=True))
    return held == durable


@transaction.atomic
def send_now_restore(
    *, session_id: Any, claim_id: Any, identity: SessionIdentity | None = None
) -> list[QueuedMessage]:
    """Put every source of the claim back at its position (durable ones: clear
    the reservation) or change nothing: a destructive change since the claim
    (session generation moved) or any drift raises ClaimChanged."""
    session = _lock(session_id, identity)
    claim = _open_claim(session, claim_id)
    ordinary = [s for s in claim.sources if not s["durable"]]
    back_again = positions.rows(session).filter(pk__in=[s["id"] for s in ordinary]).exists()
    if claim.generation != session.generation or back_again:
        raise err.ClaimChanged()
    if not _durable_sources_intact(session, claim):
        raise err.ClaimChanged()
    for data in ordinary:
        _restore_row(session, _from_snapshot(session, data))
    positions.rows(session).filter(reservation_id=claim.pk).update(
        reservation_id=None, reservation_owner=None, reserved_at=None
    )
    claim.delete()
    _wake(session)
    return list(positions.rows(session).filter(pk__in=[s["id"] for s in claim.sources]))


@transaction.atomic
def send_now_acknowledge(
    *, session_id: Any, claim_id: Any, identity: SessionIdentity | None = None
) -> int:
    """Close the claim after the dispatch was accepted: delete its durable
    sources (all of them, or raise ClaimChanged and change nothing)."""
    session = _lock(session_id, identity)
    claim = _open_claim(session, claim_id)
    if not _durable_sources_intact(session, claim):
        raise err.ClaimChanged()
    removed, _ = positions.rows(session).filter(reservation_id=claim.pk).delete()
    claim.delete()
    return removed


# ---------------------------------------------------------------------------
# Transfer and replace


def _lock_pair(first_id: Any, second_id: Any) -> tuple[Session, Session]:
    """Lock two sessions in id order (the order every multi-session write uses)."""
    ids = _as_uuids([first_id, second_id])
    if ids is None:
        raise err.SessionQueueNotFound("No such session.")
    locked = {pk: _lock(pk) for pk in sorted(ids, key=str)}
    return locked[ids[0]], locked[ids[1]]


@transaction.atomic
def session_transfer(
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
    if _as_uuids([source_id]) == _as_uuids([destination_id]):
        raise err.InvalidSessionInput(details={"to_session": ["Choose another session."]})
    source, destination = _lock_pair(source_id, destination_id)
    _check_identity(source, source_identity)
    _check_identity(destination, destination_identity)
    if source.task_id != destination.task_id:
        raise err.SessionIdentityMismatch("Sessions of different tasks cannot exchange entries.")
    _move_entries(source, destination)
    _move_pending(source, destination)
    destination.auto_run = source.auto_run and destination.auto_run
    destination.save(update_fields=["auto_run"])
    _bump_generation(source)
    _bump_generation(destination)
    _wake(destination)
    return destination


def _check_identity(session: Session, identity: SessionIdentity | None) -> None:
    if identity is not None and SessionIdentity.of(session) != identity:
        raise err.SessionIdentityMismatch()


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
def session_replace(
    *,
    session_id: Any,
    entries: Sequence[dict[str, Any]],
    pending_move: dict[str, Any] | None,
    identity: SessionIdentity | None = None,
) -> list[QueuedMessage]:
    """Replace the session's entries and pending move with a snapshot (entries as
    :func:`snapshot` gives them), keeping ids, positions and owners."""
    session = _lock(session_id, identity)
    positions.rows(session).delete()
    PendingMove.objects.filter(session=session).delete()
    rows = [_from_snapshot(session, data) for data in entries]
    QueuedMessage.objects.bulk_create(rows)
    if pending_move is not None:
        _set_pending(session, pending_move)
    _bump_generation(session)
    _wake(session)
    return sorted(rows, key=lambda row: row.position)


# ---------------------------------------------------------------------------
# Pending moves

PENDING_FIELDS = ("move_id", "workflow_id", "workflow_step_id", "actor")


def _set_pending(session: Session, move: dict[str, Any]) -> PendingMove:
    values = {name: move.get(name) or "" for name in PENDING_FIELDS}
    values["queued_at"] = clock.now()
    pending, _ = PendingMove.objects.update_or_create(session=session, defaults=values)
    return pending


@transaction.atomic
def pending_move_set(
    *, session_id: Any, move: dict[str, Any], identity: SessionIdentity | None = None
) -> PendingMove:
    """Upsert the session's deferred workflow move (queued_at = now)."""
    return _set_pending(_lock(session_id, identity), move)


@transaction.atomic
def pending_move_take(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> PendingMove | None:
    """Return and remove the session's move; a stale one (over 24 h) is removed
    and None returned."""
    session = _lock(session_id, identity)
    move = PendingMove.objects.filter(session=session).first()
    if move is None:
        return None
    PendingMove.objects.filter(session=session).delete()
    return None if move.is_stale(clock.now()) else move


@transaction.atomic
def pending_move_delete(*, session_id: Any, identity: SessionIdentity | None = None) -> bool:
    """Remove the session's move. Returns whether one existed."""
    session = _lock(session_id, identity)
    deleted, _ = PendingMove.objects.filter(session=session).delete()
    return deleted > 0


@transaction.atomic
def pending_move_delete_if_match(*, expected: dict[str, Any], handoff_entry_id: Any = None) -> bool:
    """Remove the move only while the stored row equals ``expected`` (a record of
    :func:`selectors.pending_moves`), and the linked entry in the same
    transaction. A missing or replaced move is a no-op (False)."""
    try:
        session = _lock(expected["session_id"])
    except err.SessionQueueNotFound:
        return False
    move = PendingMove.objects.filter(session=session).first()
    if move is None or move.as_record() != expected:
        return False
    move.delete()
    if handoff_entry_id:
        positions.rows(session).filter(pk=handoff_entry_id).delete()
    return True
