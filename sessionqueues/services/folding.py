"""Folding one entry into another: the compatibility rule of auto-merge and the
fold shared by auto-merge on admission and manual merge-up (SPEC §3)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sessionqueues.models import RESERVED_OWNERS, QueuedMessage
from sessionqueues.services.common import (
    MAX_ATTACHMENTS,
    MAX_REFERENCES,
    MERGE_SEPARATOR,
    REFERENCES_KEY,
    SENDER_TASK_KEY,
)

if TYPE_CHECKING:  # entries imports this module
    from sessionqueues.services.entries import NewEntry


def same_sender(target: QueuedMessage, queued_by: str, metadata: dict[str, Any]) -> bool:
    """User/app entries of the same owner, or agent entries of the same sender task."""
    if target.queued_by == "agent" and queued_by == "agent":
        sender = metadata.get(SENDER_TASK_KEY)
        return sender is not None and target.metadata.get(SENDER_TASK_KEY) == sender
    if target.queued_by in RESERVED_OWNERS or queued_by in RESERVED_OWNERS:
        return False
    return target.queued_by == queued_by


def _without_references(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k != REFERENCES_KEY}


def can_fold(target: QueuedMessage | None, entry: NewEntry) -> bool:
    """Auto-merge compatibility: same model, plan mode and owner, equal metadata
    apart from references, attachments within limits; never durable, coalesced
    or reserved rows."""
    return (
        target is not None
        and not target.reserved
        and not (target.durable or entry.durable or target.coalesce_key or entry.coalesce_key)
        and target.model == entry.model
        and target.plan_mode == entry.plan_mode
        and same_sender(target, entry.queued_by, entry.metadata)
        and _without_references(target.metadata) == _without_references(entry.metadata)
        and len(target.attachments) + len(entry.attachments) <= MAX_ATTACHMENTS
    )


def as_new_entry(row: QueuedMessage) -> NewEntry:
    """A stored entry as the candidate :func:`can_fold` compares with its target."""
    from sessionqueues.services.entries import NewEntry

    return NewEntry(
        content=row.content,
        queued_by=row.queued_by,
        model=row.model,
        plan_mode=row.plan_mode,
        attachments=list(row.attachments),
        metadata=dict(row.metadata),
        coalesce_key=row.coalesce_key,
        durable=row.durable,
        lifecycle_generation=row.lifecycle_generation,
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


def fold(
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
