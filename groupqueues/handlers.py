"""Handlers of the group queue workers: named Python callables.

Register one in any installed app's ``consumers`` module (autodiscovered)::

    from groupqueues.handlers import Delivery, handlers

    @handlers.register("resize")
    def resize(delivery: Delivery) -> None:
        ...

A handler that returns normally acks the message; an exception nacks it with
the collection's backoff (last_error records it); ``PermanentFailure`` kills
it at once (dead ``failed``, no retry). The admin and ``create_trigger`` offer
only registered names (``webhook`` is the built-in that POSTs to the app's
endpoint).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from queueproject.registry import Registry


@dataclass(frozen=True)
class Delivery:
    """What a handler receives: one claimed message and who consumes it."""

    id: uuid.UUID
    payload: Any
    attempt: int
    max_attempts: int
    priority: int
    enqueued_at: datetime
    enqueued_by: str
    queue: str  # "GROUP/NAME" of the collection
    app_slug: str | None  # the consuming app (shared triggers), else None
    worker_id: str
    last_error: str | None = None


Handler = Callable[[Delivery], Any]

handlers: Registry[Handler] = Registry("handler", "consumers")


class PermanentFailure(Exception):
    """Raised by a handler: the message cannot succeed; it dies (``failed``)
    instead of being retried."""


def handler_choices() -> list[tuple[str, str]]:
    """Registered handler names for forms (the admin never takes an import path)."""
    return handlers.choices()
