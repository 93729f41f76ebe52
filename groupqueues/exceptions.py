"""Errors of the group queues (codes match SPEC §4). The DRF exception handler
in ``queueproject.exceptions`` maps them to the error envelope."""

from __future__ import annotations

from typing import Any

from queueproject.exceptions import (
    AlreadyExists,
    Conflict,
    DomainError,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
)


class GroupQueueError(DomainError):
    """The group queue operation could not be carried out."""


class InvalidQueueInput(GroupQueueError, InvalidInput):
    """The request is not valid."""

    @classmethod
    def field(cls, name: str, problem: str, *, index: int | None = None) -> InvalidQueueInput:
        """An error about one field (of the batch entry ``index`` when given)."""
        details: dict[str, Any] = {name: [problem]}
        if index is not None:
            details = {"index": index, "messages": {str(index): details}}
            return cls(f"Message {index}: {name}: {problem}", details=details)
        return cls(f"{name}: {problem}", details=details)


class CollectionNotFound(GroupQueueError, NotFound):
    """No such queue collection."""

    code = "collection_not_found"


class CollectionExists(GroupQueueError, AlreadyExists):
    """The group already declares a collection with that name."""


class QueuePermissionDenied(GroupQueueError, PermissionDenied):
    """The principal may not do this to the queue."""


class MessageNotFound(GroupQueueError, NotFound):
    """No such message."""


class LeaseLost(GroupQueueError, Conflict):
    """The claim is no longer held: the token is stale or the lease has expired."""

    code = "lease_lost"


class MessageTooLarge(GroupQueueError, PayloadTooLarge):
    """The message payload is larger than the collection allows."""


class QueueFull(GroupQueueError):
    """The queue is full: it holds its maximum number of live messages."""

    status_code = 429
    code = "queue_full"


class TriggerExists(GroupQueueError, AlreadyExists):
    """The group already runs that handler on that collection."""


class MessageNotWaiting(GroupQueueError, Conflict):
    """The message is not waiting (ready): it is claimed or dead."""
