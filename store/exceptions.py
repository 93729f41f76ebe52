"""Errors of the store primitives (SPEC §6): one base, ``StoreError``, with
stable codes; the one DRF exception handler in ``queueproject.exceptions``
maps them to the error envelope."""

from __future__ import annotations

from datetime import datetime

from queueproject.exceptions import AlreadyExists, Conflict, DomainError, InvalidInput, NotFound


class StoreError(DomainError):
    """A store-primitive operation could not be carried out."""


# --- TTL locks ----------------------------------------------------------------


class LockError(StoreError):
    """The lock operation could not be carried out."""


class InvalidLockInput(LockError, InvalidInput):
    """The request is not valid."""

    @classmethod
    def field(cls, name: str, problem: str) -> InvalidLockInput:
        return cls(f"{name}: {problem}", details={name: [problem]})


class LockHeld(LockError, Conflict):
    """The lock is held by another owner."""

    code = "lock_held"

    @classmethod
    def by(cls, name: str, owner: str | None, expires_at: datetime | None) -> LockHeld:
        """The error naming the current holder of lock ``name`` and its expiry."""
        until = expires_at.isoformat() if expires_at else None
        return cls(
            f"Lock {name!r} is held by {owner!r} until {until}.",
            details={"owner": owner, "expires_at": until},
        )


class LockLost(LockError, Conflict):
    """The lock is not held by this owner: it expired, was released or taken over."""

    code = "lock_lost"


# --- schedules ----------------------------------------------------------------


class ScheduleError(StoreError):
    """The schedule operation could not be carried out."""


class InvalidSchedule(ScheduleError, InvalidInput):
    """The request is not valid."""

    @classmethod
    def field(cls, name: str, problem: str) -> InvalidSchedule:
        """An error about one field (``details`` maps it to its problems)."""
        return cls(f"{name}: {problem}", details={name: [problem]})


class ScheduleNotFound(ScheduleError, NotFound):
    """No such schedule."""

    code = "schedule_not_found"


class ScheduleExists(ScheduleError, AlreadyExists):
    """The group already has a schedule with that name."""


# --- outbox -------------------------------------------------------------------


class OutboxError(StoreError):
    """The outbox operation could not be carried out."""


class InvalidOutboxInput(OutboxError, InvalidInput):
    """The request is not valid."""

    @classmethod
    def field(cls, name: str, problem: str) -> InvalidOutboxInput:
        """An error about one field (``details`` maps it to its problems)."""
        return cls(f"{name}: {problem}", details={name: [problem]})


class OutboxNotInTransaction(OutboxError):
    """outbox.publish() must be called inside the caller's transaction.atomic():
    the outbox row must commit or roll back with the business write."""

    code = "not_in_transaction"


class OutboxMessageNotFound(OutboxError, NotFound):
    """No such outbox message."""

    code = "not_found"


class OutboxDeliveryFailed(OutboxError):
    """A target refused or could not take an outbox message (the relay retries)."""

    code = "delivery_failed"
