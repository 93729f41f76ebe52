"""Errors of the session queues (codes match SPEC §4)."""

from queueproject.exceptions import AlreadyExists, Conflict, DomainError, InvalidInput, NotFound


class SessionQueueError(DomainError):
    """The session queue operation could not be carried out."""


class SessionQueueConflict(SessionQueueError, Conflict):
    """The session queue changed; the request conflicts with its current state."""


class QueueFull(SessionQueueConflict):
    """The session queue is full."""

    code = "queue_full"


class QueueChanged(SessionQueueConflict):
    """The queue changed since you read it; nothing was reordered."""

    code = "queue_changed"


class ClaimChanged(SessionQueueConflict):
    """The selected entries changed since you read them; nothing was claimed."""

    code = "claim_changed"


class ReservationChanged(SessionQueueConflict):
    """That reservation is no longer open."""

    code = "reservation_changed"


class ReservationConflict(SessionQueueConflict):
    """A selected entry is reserved in flight."""

    code = "reservation_conflict"


class NoMergeTarget(SessionQueueConflict):
    """There is no compatible entry above to merge into."""

    code = "no_merge_target"


class MergeDisabled(SessionQueueConflict):
    """Merging queued entries is disabled."""

    code = "merge_disabled"


class SessionIdentityMismatch(SessionQueueConflict):
    """The session identity is not current."""

    code = "session_identity_mismatch"


class AutoRunPaused(SessionQueueConflict):
    """Auto-run is paused for this session."""

    code = "auto_run_paused"


class EntryExists(SessionQueueError, AlreadyExists):
    """An entry with that id is stored in another session."""


class SessionQueueNotFound(SessionQueueError, NotFound):
    """Not found."""


class InvalidSessionInput(SessionQueueError, InvalidInput):
    """The request is not valid."""
