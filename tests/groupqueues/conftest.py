"""Fixtures of the group queue tests: a queue collection and a frozen clock."""

from __future__ import annotations

import pytest

from groupqueues import services
from groupqueues.models import Message
from queueproject import clock
from tests.factories import GroupFactory

WORKER = "worker-1"
ENQUEUER = "app:test"


@pytest.fixture
def group(db):
    return GroupFactory(slug="owners")


@pytest.fixture
def queue(group):
    """A queue collection with the default settings."""
    return services.collection_create(group=group, name="jobs")


@pytest.fixture
def frozen():
    """Stop the clock for the test; ``clock.advance(s)`` moves it."""
    with clock.frozen():
        yield


def enqueue(queue, payload=None, **opts):
    """Enqueue one message and return its id."""
    payload = {"n": 1} if payload is None else payload
    return services.message_enqueue(
        collection=queue, payload=payload, enqueued_by=ENQUEUER, **opts
    ).id


def claim(queue, n=1, **opts):
    return services.message_claim(collection=queue, worker_id=WORKER, n=n, **opts)


def claim_one(queue, **opts):
    (message,) = claim(queue, 1, **opts)
    return message


def state_of(message_id):
    """(state, dead_reason) of the message, None once it is gone."""
    return Message.objects.filter(id=message_id).values_list("state", "dead_reason").first()
