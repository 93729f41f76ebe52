"""Writes that change the order or number of a session's entries: merge-up,
reorder and delete-all (SPEC §3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from queueproject.conf import product_settings
from sessionqueues import exceptions as err
from sessionqueues import positions
from sessionqueues.models import RESERVED_OWNERS, QueuedMessage, Session
from sessionqueues.services.common import (
    MAX_ATTACHMENTS,
    SessionIdentity,
    as_uuids,
    bump_generation,
    delete_row,
    lock_session,
    visible_row,
)
from sessionqueues.services.folding import as_new_entry, can_fold, fold, same_sender


def _merge_target(session: Session, source: QueuedMessage, queued_by: str) -> QueuedMessage:
    """The entry directly above ``source`` when the pair may merge, else NoMergeTarget."""
    above = positions.rows(session).filter(position__lt=source.position)
    target = above.order_by("-position").first()
    if target is None or target.reserved:
        raise err.NoMergeTarget()
    if source.queued_by == "agent":
        compatible = same_sender(target, "agent", source.metadata)
    else:
        compatible = source.queued_by == queued_by and target.queued_by == queued_by
        compatible = compatible and queued_by not in RESERVED_OWNERS
    if not compatible:
        raise err.NoMergeTarget()
    if len(target.attachments) + len(source.attachments) > MAX_ATTACHMENTS:
        raise err.NoMergeTarget("The merged entry would have too many attachments.")
    return target


@transaction.atomic
def entry_merge_up(
    *, session_id: Any, entry_id: Any, queued_by: str, identity: SessionIdentity | None = None
) -> QueuedMessage:
    """Fold an entry into the one directly above it (content joined by a blank
    line, attachments concatenated, references unioned and capped, the later
    queued_at); the source is deleted. Allowed between entries both owned by
    ``queued_by``, or agent entries of the same sender task. Raises
    MergeDisabled, SessionQueueNotFound, NoMergeTarget."""
    if not product_settings().session_manual_merge_enabled:
        raise err.MergeDisabled()
    session = lock_session(session_id, identity)
    source = visible_row(session, entry_id)
    target = _merge_target(session, source, queued_by)
    delete_row(source)
    fold(target, source.content, source.attachments, source.metadata, source.queued_at)
    bump_generation(session)
    return target


@transaction.atomic
def entry_auto_merge_up(
    *, session_id: Any, entry_id: Any, identity: SessionIdentity | None = None
) -> QueuedMessage | None:
    """Fold the entry into the one directly above it when the pair passes the
    auto-merge rule (``folding.can_fold``: same model, plan mode and sender,
    equal metadata apart from references, attachments within limits, neither
    durable, coalesced nor reserved), whatever the session's auto-merge
    setting. Returns the merged target, or None, changing nothing, when the
    entry is missing or reserved, has nothing above it, or the pair is
    incompatible (a skip, not an error)."""
    session = lock_session(session_id, identity)
    source = _visible_or_none(session, entry_id)
    if source is None:
        return None
    above = positions.rows(session).filter(position__lt=source.position)
    target = above.order_by("-position").first()
    if target is None or not can_fold(target, as_new_entry(source)):
        return None
    delete_row(source)
    fold(target, source.content, source.attachments, source.metadata, source.queued_at)
    bump_generation(session)
    return target


def _visible_or_none(session: Session, entry_id: Any) -> QueuedMessage | None:
    try:
        return visible_row(session, entry_id)
    except err.SessionQueueNotFound:
        return None


@transaction.atomic
def queue_reorder(
    *, session_id: Any, ordered_ids: Sequence[Any], identity: SessionIdentity | None = None
) -> list[QueuedMessage]:
    """Rewrite positions so the visible entries follow ``ordered_ids``; reserved
    entries keep their slots; positions are compacted to 1..N. Anything but an
    exact permutation of the visible ids raises QueueChanged and changes nothing.
    Returns the visible entries in their new order."""
    session = lock_session(session_id, identity)
    rows = list(positions.rows(session).in_order())
    by_id = {row.pk: row for row in rows if not row.reserved}
    wanted = as_uuids(ordered_ids)
    if wanted is None or len(wanted) != len(by_id) or set(wanted) != set(by_id):
        raise err.QueueChanged()
    submitted = iter(wanted)
    ordered = [row if row.reserved else by_id[next(submitted)] for row in rows]
    positions.renumber(session, ordered)
    return [by_id[pk] for pk in wanted]


@transaction.atomic
def queue_delete_all(*, session_id: Any, identity: SessionIdentity | None = None) -> int:
    """Delete every visible entry (reserved ones stay). Returns the count."""
    session = lock_session(session_id, identity)
    removed, _ = positions.rows(session).visible().delete()
    if removed:
        bump_generation(session)
    return removed
