"""The data types the group-queue services take and answer, and their limits."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")

MAX_CLAIM = 100
MAX_BATCH = 500
MAX_ACK_BATCH = 500


@dataclass(frozen=True)
class NewMessage:
    """One message to enqueue (the options of SPEC §2). ``delay_seconds`` and
    ``deliver_after`` are alternatives, as are ``expires_in_seconds`` and
    ``expires_at``; ``max_attempts`` defaults to the collection's."""

    payload: Any
    priority: int = 0
    delay_seconds: float | None = None
    deliver_after: datetime | None = None
    expires_in_seconds: float | None = None
    expires_at: datetime | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None
    ordering_key: str | None = None  # one at a time, in enqueue order, per key (SPEC §7)
    # "replace": a waiting message holding the idempotency key takes this
    # one's payload and options in its place (SPEC §7)
    on_conflict: str | None = None
    debounce_seconds: float | None = None  # due this long after the last replace


@dataclass(slots=True)
class PreparedMessage:
    """A validated new message, ready to insert."""

    id: uuid.UUID
    payload: Any
    payload_json: str | None  # None: serialised with the whole batch (check.payloads_json)
    priority: int
    deliver_after: datetime
    expires_at: datetime | None
    max_attempts: int
    idempotency_key: str | None
    ordering_key: str | None = None
    fair_key: str | None = None  # the partition key (Message.fair_key)
    replace: bool = False  # on_conflict "replace"
    timed: bool = False  # deliver_after was given (a delay, a moment or a debounce)


@dataclass(frozen=True)
class EnqueueResult:
    """The id of the message; ``created`` is False when an existing message with
    the same idempotency key answered (nothing was inserted)."""

    id: uuid.UUID
    created: bool
    replaced: bool = False  # on_conflict "replace": the waiting holder took the new content


@dataclass(frozen=True)
class ClaimedMessage:
    """A message handed to a worker: keep ``id`` and ``claim_token`` for ack,
    nack, fail, extend and release before ``lease_expires_at``."""

    id: uuid.UUID
    collection_id: int
    payload: Any
    priority: int
    attempt: int
    max_attempts: int
    claim_token: uuid.UUID
    claimed_by: str
    lease_expires_at: datetime
    enqueued_at: datetime
    deliver_after: datetime
    expires_at: datetime | None
    enqueued_by: str
    last_error: str | None
    seq: int = field(repr=False, compare=False, default=0)


@dataclass(frozen=True)
class AckResult:
    id: uuid.UUID
    acked: bool
    reason: str | None  # "lease_lost" or "duplicate" when not acked


@dataclass(frozen=True)
class AckBatchResult:
    acked: int
    results: list[AckResult]


@dataclass(frozen=True)
class AckAndClaimResult:
    acked: bool  # False: the lease was lost (stale token, lapsed lease, cancelled)
    messages: list[ClaimedMessage]  # claimed next, in claim order


@dataclass(frozen=True)
class AckBatchAndClaimResult:
    acks: AckBatchResult  # as message_ack_batch answers
    messages: list[ClaimedMessage]  # claimed next, in claim order


@dataclass(frozen=True)
class SweepResult:
    expired: int  # live messages moved to dead ("expired")
    pruned: int  # dead messages deleted after their retention


@functools.cache
def _field_names(cls: type[DataclassInstance]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def frozen_new(cls: type[T], values: Iterable[Any]) -> T:
    """An instance of a frozen dataclass from its field values in order,
    without the generated ``__init__``, which sets every field through
    ``object.__setattr__`` (about three times slower for a ClaimedMessage; a
    batch of 100 makes 100). Only for values the caller knows to be complete
    and typed."""
    obj = object.__new__(cls)
    obj.__dict__.update(zip(_field_names(cls), values, strict=True))
    return obj
