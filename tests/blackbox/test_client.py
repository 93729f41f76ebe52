"""The Python client (clients/python, package ``queueclient``) against a real
server process (DEBUG off): every operation, the typed errors, and a 429
retried after its ``Retry-After``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from queueclient import (
    ClaimedMessage,
    Client,
    InvalidRequest,
    LeaseLost,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    Queue,
    QueueFull,
    Throttled,
    TransportError,
)

from tests.blackbox.conftest import World
from tests.blackbox.server import Server, free_port


def new_queue(world: World, **settings: Any) -> str:
    """A fresh queue of group acme (made over REST by its admin): its name."""
    name = f"c-{uuid.uuid4().hex[:10]}"
    with world.client(world.admin_token) as http:
        made = http.post("/api/groups/acme/queues/", json={"name": name, **settings})
        assert made.status_code == 201, made.text
    return name


@pytest.fixture
def client(world: World) -> Iterator[Client]:
    with Client(world.server.url, world.editor_token, timeout=30) as c:
        yield c


@pytest.fixture
def jobs(world: World, client: Client) -> Queue:
    return client.queue(f"acme/{new_queue(world)}")


def claim_one(queue: Queue, **kwargs: Any) -> ClaimedMessage:
    (message,) = queue.claim(worker_id="bb-client", **kwargs)
    return message


def test_enqueue_claim_ack(jobs: Queue) -> None:
    first = jobs.enqueue({"n": 1}, priority=5, idempotency_key="k")
    again = jobs.enqueue({"n": 1}, idempotency_key="k")
    assert first.created and (again.id, again.created) == (first.id, False)
    message = claim_one(jobs)
    assert (message.id, message.payload, message.priority, message.attempt) == (
        first.id,
        {"n": 1},
        5,
        1,
    )
    jobs.ack(message)
    assert jobs.stats().depth == 0
    with pytest.raises(LeaseLost):
        jobs.ack(message)


def test_enqueue_options_and_get(jobs: Queue) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    made = jobs.enqueue("later", deliver_after=later, max_attempts=2)
    got = jobs.get(made.id)
    assert (got.state, got.max_attempts, got.payload) == ("ready", 2, "later")
    assert got.deliver_after is not None and abs((got.deliver_after - later).total_seconds()) < 1
    stats = jobs.stats()
    assert (stats.delayed, stats.depth_pending) == (1, 0)
    jobs.cancel(made.id)
    with pytest.raises(NotFound):
        jobs.cancel(made.id)


def test_enqueue_many_and_batch_ack(jobs: Queue) -> None:
    ids = jobs.enqueue_many(["a", Queue.message("b", priority=9), "c"])
    assert len(ids) == 3
    claimed = jobs.claim(worker_id="bb-client", max_messages=10)
    assert [m.payload for m in claimed] == ["b", "a", "c"]
    result = jobs.ack_many([*claimed, claimed[0]])
    assert result.acked == 3
    assert [r.acked for r in result.results] == [True, True, True, False]


def test_nack_fail_extend_release(jobs: Queue) -> None:
    jobs.enqueue_many(["n", "f"])
    n = claim_one(jobs)
    nacked = jobs.nack(n, error="boom", delay_seconds=0)
    assert (nacked.state, nacked.last_error) == ("ready", "boom")
    n2 = claim_one(jobs)
    extended = jobs.extend(n2, visibility_timeout=120)
    assert extended.lease_expires_at is not None
    assert extended.lease_expires_at > datetime.now(UTC) + timedelta(seconds=100)
    released = jobs.release(n2)
    assert released.state == "ready"
    with pytest.raises(LeaseLost):
        jobs.extend(n2, visibility_timeout=30)
    both = jobs.claim(worker_id="bb-client", max_messages=2)
    failed = jobs.fail(both[0], error="fatal")
    assert (failed.state, failed.dead_reason) == ("dead", "failed")
    jobs.ack(both[1])


def test_dead_redrive_purge(world: World, client: Client, jobs: Queue) -> None:
    jobs.enqueue_many(["x", "y"])
    for message in jobs.claim(worker_id="bb-client", max_messages=2):
        jobs.fail(message, error="e")
    page = jobs.dead()
    assert page.count == 2 and {m["payload"] for m in page.results} == {"x", "y"}
    admin = Client(world.server.url, world.admin_token)
    as_admin = admin.queue(f"acme/{jobs.name}")
    assert as_admin.redrive([page.results[0]["id"]]) == 1
    assert as_admin.redrive() == 1
    assert jobs.stats().depth_pending == 2
    assert as_admin.purge() == 2
    admin.close()


def test_long_poll_claim_returns_when_a_message_arrives(jobs: Queue, world: World) -> None:
    import threading

    def later() -> None:
        time.sleep(0.5)
        with Client(world.server.url, world.editor_token) as other:
            other.queue(f"acme/{jobs.name}").enqueue("woken")

    threading.Thread(target=later).start()
    start = time.monotonic()
    (message,) = jobs.claim(worker_id="bb-client", wait_seconds=10)
    assert message.payload == "woken" and time.monotonic() - start < 8


def test_app_resolved_queue(world: World) -> None:
    with Client(world.server.url, world.app_token) as app:
        queue = app.app_queue("shop", "jobs")
        made = queue.enqueue({"from": "shop"})
        assert made.created and queue.stats().depth >= 1
        with pytest.raises(NotFound):
            app.app_queue("shop", "no-such-queue").enqueue(1)


def test_session_queue_operations(world: World) -> None:
    with Client(world.server.url, world.app_token) as app:
        task = app.create_task("shop", "client test")
        session = app.create_session(task["id"])
        queue = app.session(session["id"])
        queue.set_auto_merge(False)
        one = queue.enqueue("first prompt")
        queue.enqueue("second prompt")
        edited = queue.edit(one["id"], content="first, edited")
        assert edited["content"] == "first, edited"
        status = queue.status()
        assert status["count"] == 2 and "generations" in status
        reservation = queue.reserve()
        assert reservation is not None and reservation.message["content"] == "first, edited"
        queue.release(reservation)
        again = queue.reserve()
        assert again is not None and again.message["id"] == one["id"]
        queue.acknowledge(again)
        assert queue.status()["count"] == 1
        stale = app.session(session["id"], incarnation=str(uuid.uuid4()))
        with pytest.raises(Exception) as caught:
            stale.enqueue("x")
        assert getattr(caught.value, "code", "") == "session_identity_mismatch"


def test_typed_errors(world: World, jobs: Queue) -> None:
    anonymous = Client(world.server.url, "not-a-token", retries=0)
    with anonymous, pytest.raises(NotAuthenticated):
        anonymous.queue(f"acme/{jobs.name}").stats()
    with pytest.raises(InvalidRequest) as bad:
        jobs.enqueue(1, priority=5000)
    assert "priority" in bad.value.details
    with pytest.raises(InvalidRequest):
        jobs.enqueue(1, colour="red")
    with pytest.raises(NotFound):
        jobs.client.queue("acme/no-such-queue").stats()
    read_only = world.server.create_token(user="editor", scopes="queue:read")
    with Client(world.server.url, read_only) as reader, pytest.raises(PermissionDenied):
        reader.queue(f"acme/{jobs.name}").enqueue(1)
    with pytest.raises(ValueError):
        jobs.client.queue("no-slash")


def test_queue_full_is_raised_not_retried(world: World, client: Client) -> None:
    full = client.queue(f"acme/{new_queue(world, max_depth=1)}")
    full.enqueue(1)
    start = time.monotonic()
    with pytest.raises(QueueFull):
        full.enqueue(2)
    assert time.monotonic() - start < 2


def test_connection_refused__transport_error_after_retries() -> None:
    c = Client(f"http://127.0.0.1:{free_port()}", "t", retries=2, backoff_base=0.01)
    with c, pytest.raises(TransportError):
        c.queue("a/b").stats()


@pytest.fixture(scope="module")
def throttled_server(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A second server on the same database allowing 2 requests/s per principal."""
    env = dict(world.server.env, API_THROTTLE_RATE="2/s")
    log = tmp_path_factory.mktemp("throttled") / "server.log"
    srv = Server(env=env, log_path=log)
    srv.start()
    yield srv
    srv.stop()


def test_429_is_retried_after_retry_after(world: World, throttled_server: Server) -> None:
    name = new_queue(world)
    token = world.server.create_token(user="editor", scopes="queue:read,queue:write")
    with Client(throttled_server.url, token, retries=0) as impatient:
        with pytest.raises(Throttled) as caught:
            for _ in range(10):
                impatient.queue(f"acme/{name}").stats()
        assert caught.value.retry_after is not None
    with Client(throttled_server.url, token, retries=5) as patient:
        queue = patient.queue(f"acme/{name}")
        start = time.monotonic()
        for i in range(6):  # three times the rate: some must wait out a Retry-After
            queue.enqueue(i)
        assert time.monotonic() - start >= 1.0
        assert queue.stats().depth == 6
