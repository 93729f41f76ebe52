"""Fixtures of the group queue tests: a queue collection and a frozen clock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from groupqueues import services
from groupqueues.models import Collection, Message
from groupqueues.services import ClaimedMessage
from principals.models import Group
from queueproject import clock
from tests.factories import GroupFactory

WORKER = "worker-1"
ENQUEUER = "app:test"


@pytest.fixture
def group(db: None) -> Group:
    return GroupFactory(slug="owners")


@pytest.fixture
def queue(group: Group) -> Collection:
    """A queue collection with the default settings."""
    return services.collection_create(group=group, name="jobs")


@pytest.fixture
def frozen() -> Iterator[None]:
    """Stop the clock for the test; ``clock.advance(s)`` moves it."""
    with clock.frozen():
        yield


def enqueue(queue: Collection, payload: Any = None, **opts: Any) -> uuid.UUID:
    """Enqueue one message and return its id."""
    payload = {"n": 1} if payload is None else payload
    return services.message_enqueue(
        collection=queue, payload=payload, enqueued_by=ENQUEUER, **opts
    ).id


def claim(queue: Collection, n: int = 1, **opts: Any) -> list[ClaimedMessage]:
    return services.message_claim(collection=queue, worker_id=WORKER, n=n, **opts)


def claim_one(queue: Collection, **opts: Any) -> ClaimedMessage:
    (message,) = claim(queue, 1, **opts)
    return message


def state_of(message_id: uuid.UUID) -> tuple[str, str | None] | None:
    """(state, dead_reason) of the message, None once it is gone."""
    return Message.objects.filter(id=message_id).values_list("state", "dead_reason").first()
