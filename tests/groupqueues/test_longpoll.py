"""Long-poll claim (``wait_seconds``): woken by LISTEN/NOTIFY on PostgreSQL and
by short polling on SQLite; empty at the deadline. Real threads, each with its
own database connection, against committed data."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from groupqueues import services
from tests.groupqueues.api_helpers import EDITOR, q_url, user_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs")


class Claimer(threading.Thread):
    """A claim request in its own thread (its own connection)."""

    def __init__(self, client, url, wait_seconds):
        super().__init__(daemon=True)
        self.client, self.url, self.wait_seconds = client, url, wait_seconds
        self.response = None
        self.returned_at = None

    def run(self):
        try:
            self.response = self.client.post(
                self.url, {"worker_id": "w", "wait_seconds": self.wait_seconds}, format="json"
            )
            self.returned_at = time.monotonic()
        finally:
            connection.close()


def start_claimer(tree, wait_seconds):
    claimer = Claimer(user_client(tree["child"], EDITOR), q_url(tree["child"], rest="claim/"),
                      wait_seconds)  # fmt: skip
    claimer.start()
    time.sleep(0.5)  # let it find the queue empty and start waiting
    assert claimer.is_alive(), claimer.response and claimer.response.content
    return claimer


def test_long_poll__returns_within_1s_of_an_enqueue(tree, queue):
    claimer = start_claimer(tree, wait_seconds=10)
    message = services.message_enqueue(collection=queue, payload={"x": 1}, enqueued_by="t")
    enqueued_at = time.monotonic()
    claimer.join(timeout=12)
    assert claimer.response is not None and claimer.response.status_code == 200
    (got,) = claimer.response.json()["messages"]
    assert got["id"] == str(message.id)
    assert claimer.returned_at - enqueued_at < 1.0


def test_long_poll__a_release_wakes_a_waiter(tree, queue):
    services.message_enqueue(collection=queue, payload=1, enqueued_by="t")
    (held,) = services.message_claim(collection=queue, worker_id="other")
    claimer = start_claimer(tree, wait_seconds=10)
    services.message_release(collection=queue, id=held.id, claim_token=held.claim_token)
    released_at = time.monotonic()
    claimer.join(timeout=12)
    (got,) = claimer.response.json()["messages"]
    assert got["id"] == str(held.id)
    assert claimer.returned_at - released_at < 1.0


def test_long_poll__empty_at_the_deadline(tree, queue):
    client = user_client(tree["child"], EDITOR)
    started = time.monotonic()
    response = client.post(
        q_url(tree["child"], rest="claim/"), {"worker_id": "w", "wait_seconds": 1.5}, format="json"
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 200 and response.json() == {"messages": []}
    assert 1.5 <= elapsed < 4.0


def test_long_poll__a_delayed_message_is_not_handed_out_early(tree, queue):
    services.message_enqueue(collection=queue, payload=1, enqueued_by="t", delay_seconds=60)
    client = user_client(tree["child"], EDITOR)
    response = client.post(
        q_url(tree["child"], rest="claim/"), {"worker_id": "w", "wait_seconds": 1}, format="json"
    )
    assert response.json() == {"messages": []}


def test_long_poll__one_message_goes_to_exactly_one_of_two_waiters(tree, queue):
    first, second = start_claimer(tree, wait_seconds=3), start_claimer(tree, wait_seconds=3)
    message = services.message_enqueue(collection=queue, payload=1, enqueued_by="t")
    for claimer in (first, second):
        claimer.join(timeout=6)
    got = [m["id"] for c in (first, second) for m in c.response.json()["messages"]]
    assert got == [str(message.id)]
