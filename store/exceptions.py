"""Errors of the store primitives (SPEC §6): one base, ``StoreError``, with
stable codes; the one DRF exception handler in ``queueproject.exceptions``
maps them to the error envelope."""

from __future__ import annotations

from datetime import datetime

from queueproject.exceptions import (
    AlreadyExists,
    Conflict,
    DomainError,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
)


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


# --- notify channels ------------------------------------------------------------


class ChannelError(StoreError):
    """The channel operation could not be carried out."""


class InvalidChannelInput(ChannelError, InvalidInput):
    """The request is not valid."""

    @classmethod
    def field(cls, name: str, problem: str) -> InvalidChannelInput:
        """An error about one field (``details`` maps it to its problems)."""
        return cls(f"{name}: {problem}", details={name: [problem]})


class ChannelNotFound(ChannelError, NotFound):
    """No such channel."""

    code = "channel_not_found"


class ChannelExists(ChannelError, AlreadyExists):
    """The group already has a channel with that name."""


# --- streams ------------------------------------------------------------------


class StreamError(StoreError):
    """The stream operation could not be carried out."""


class InvalidStreamInput(StreamError, InvalidInput):
    """The request is not valid."""

    @classmethod
    def field(cls, name: str, problem: str, *, index: int | None = None) -> InvalidStreamInput:
        """An error about one field (of entry ``index`` of a batch when given)."""
        if index is None:
            return cls(f"{name}: {problem}", details={name: [problem]})
        details = {"index": index, "entries": {str(index): {name: [problem]}}}
        return cls(f"Entry {index}: {name}: {problem}", details=details)


class StreamPayloadTooLarge(StreamError, PayloadTooLarge):
    """An entry's payload is larger than the topic's max_payload_bytes."""


class TopicNotFound(StreamError, NotFound):
    """No such topic."""

    code = "topic_not_found"


class TopicExists(StreamError, AlreadyExists):
    """The group already has a topic with that name."""


class ConsumerNotFound(StreamError, NotFound):
    """No such consumer."""

    code = "consumer_not_found"


class OffsetRegressed(StreamError, Conflict):
    """A commit below the consumer's saved offset (only a reset moves it back)."""

    code = "offset_regressed"

    @classmethod
    def at(cls, name: str, committed: int, offset: int) -> OffsetRegressed:
        return cls(
            f"Consumer {name!r} has committed {committed}; {offset} would move it back "
            "(a reset, with the manage capability, is the only way back).",
            details={"committed_offset": committed, "offset": offset},
        )


class OffsetOutOfRange(StreamError, Conflict):
    """The offset is not a position of the topic: the entries after it are gone
    (retention or purge), or it is beyond the head."""

    code = "offset_out_of_range"

    @classmethod
    def beyond(cls, field: str, offset: int, first: int, head: int) -> OffsetOutOfRange:
        return cls(
            f"{field} {offset} is beyond the head offset {head}.",
            details={field: offset, "first_available_offset": first, "head_offset": head},
        )

    @classmethod
    def below(cls, since: int, first: int, head: int) -> OffsetOutOfRange:
        return cls(
            f"Entries after offset {since} are gone; the first available offset is {first}.",
            details={"since": since, "first_available_offset": first, "head_offset": head},
        )


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
