"""Dead messages made to order for the dead-filter tests: a reason, a time of
death and a last error each (the model's ``kill`` transition, as a claim,
fail or sweep would leave them)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from groupqueues.models import Collection, Message
from queueproject import clock
from tests.groupqueues.conftest import enqueue


def dead(
    queue: Collection, *, reason: str = "failed", ago: float = 0, error: str | None = None,
    payload: object = None,
) -> uuid.UUID:  # fmt: skip
    """Enqueue a message and kill it for ``reason`` ``ago`` seconds before now."""
    message_id = enqueue(queue, payload)
    died_at: datetime = clock.now() - timedelta(seconds=ago)
    Message.objects.filter(id=message_id).kill(reason=reason, now=died_at, last_error=error)
    return message_id


def a_mix(queue: Collection) -> dict[str, uuid.UUID]:
    """Four dead messages (and one ready one) that the filters tell apart."""
    ids = {
        "failed_old": dead(queue, reason="failed", ago=3 * 3600, error="SMTP timeout"),
        "failed_new": dead(queue, reason="failed", ago=60, error="KeyError: 'to'"),
        "expired": dead(queue, reason="expired", ago=600),
        "exhausted": dead(queue, reason="exhausted", ago=30, error="smtp TIMEOUT again"),
    }
    ids["ready"] = enqueue(queue)
    return ids


def states(queue: Collection) -> dict[uuid.UUID, str]:
    return dict(Message.objects.of(queue).values_list("id", "state"))
