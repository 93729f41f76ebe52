"""Typed results of the API (what the server answers, as dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True)
class Enqueued:
    """An enqueued message's id; ``created`` is False when an existing message
    with the same idempotency key answered."""

    id: str
    created: bool = True


@dataclass(frozen=True)
class ClaimedMessage:
    """A claimed message: keep it (its ``id`` and ``claim_token``) to ack,
    nack, fail, extend or release before ``lease_expires_at``."""

    id: str
    payload: Any
    priority: int
    attempt: int
    max_attempts: int
    claim_token: str
    lease_expires_at: datetime
    enqueued_at: datetime

    @classmethod
    def of(cls, body: dict[str, Any]) -> ClaimedMessage:
        return cls(
            id=body["id"], payload=body["payload"], priority=body["priority"],
            attempt=body["attempt"], max_attempts=body["max_attempts"],
            claim_token=body["claim_token"],
            lease_expires_at=datetime.fromisoformat(body["lease_expires_at"]),
            enqueued_at=datetime.fromisoformat(body["enqueued_at"]),
        )  # fmt: skip


@dataclass(frozen=True)
class Message:
    """A message as ``get`` shows it (dead ones included, never a claim token)."""

    id: str
    payload: Any
    state: str
    priority: int
    attempt: int
    max_attempts: int
    enqueued_at: datetime
    deliver_after: datetime | None
    expires_at: datetime | None
    last_error: str | None
    dead_reason: str | None
    lease_expires_at: datetime | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, body: dict[str, Any]) -> Message:
        return cls(
            id=body["id"], payload=body["payload"], state=body["state"],
            priority=body["priority"], attempt=body["attempt"],
            max_attempts=body["max_attempts"],
            enqueued_at=datetime.fromisoformat(body["enqueued_at"]),
            deliver_after=_when(body.get("deliver_after")),
            expires_at=_when(body.get("expires_at")), last_error=body.get("last_error"),
            dead_reason=body.get("dead_reason"),
            lease_expires_at=_when(body.get("lease_expires_at")), raw=body,
        )  # fmt: skip


@dataclass(frozen=True)
class AckEntry:
    id: str
    acked: bool
    reason: str | None


@dataclass(frozen=True)
class AckResult:
    """How many of the named (id, claim_token) pairs were acked, and each one's
    outcome (``reason`` ``lease_lost`` or ``duplicate`` when not)."""

    acked: int
    results: list[AckEntry]


@dataclass(frozen=True)
class QueueStats:
    depth: int
    depth_pending: int
    delayed: int
    in_flight: int
    dead: int
    oldest_pending_age_seconds: float | None

    @classmethod
    def of(cls, body: dict[str, Any]) -> QueueStats:
        return cls(**{name: body[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Page:
    """One page of a list: ``results`` and the total ``count``."""

    count: int
    results: list[dict[str, Any]]
    next: str | None


@dataclass(frozen=True)
class Reservation:
    """A reserved session-queue entry (the REST consumer's ``reserve``)."""

    reservation_id: str
    message: dict[str, Any]
