"""Long-polls under the production command (uvicorn, ASGI): a claim with
``wait_seconds``, a stream read with ``wait_seconds`` (``sse.waiting_view``)
and a channel's JSON long-poll wait on the event loop, so fifty clients waiting at once
cost the server neither fifty threads nor fifty database connections, and
each is answered as soon as its wake-up comes: every enqueued message goes to
exactly one waiting claimer."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error
from tests.blackbox.server import AsgiServer

WAITERS = 50
# uvicorn's loop, the LISTEN thread, the SSE database pool (SSE_DB_THREADS=8),
# asgiref's executors and Python's own: a fixed number, whatever the waiters.
THREADS_MAX = 30


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads: line")


def wait_until_waiting(srv: AsgiServer, started: list[float], n: int) -> int:
    """Once ``n`` requests are out and the server has settled (its thread count
    steady for a second: every request planned and waiting), that count."""
    deadline = time.monotonic() + 30
    while len(started) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.process is not None
    counts = [threads_of(srv.process.pid)]
    while time.monotonic() < deadline and (len(counts) < 10 or len(set(counts[-10:])) > 1):
        time.sleep(0.1)
        counts.append(threads_of(srv.process.pid))
    print("server threads while the requests arrive and wait:", counts)
    return counts[-1]


@pytest.fixture
def queue(world: World, asgi_server: AsgiServer) -> str:
    name = f"wait-{uuid.uuid4().hex[:8]}"
    world.server.manage("create_queue", world.group, name)
    return f"/api/groups/{world.group}/queues/{name}/"


def test_fifty_waiting_claims_hold_no_thread_each_and_split_the_messages(
    world: World, asgi_server: AsgiServer, queue: str
) -> None:
    started: list[float] = []

    def claim(i: int) -> list[str]:
        with asgi_server.client(world.editor_token) as http:
            started.append(time.monotonic())
            response = http.post(queue + "claim/", json={
                "worker_id": f"w{i}", "max_messages": 1, "wait_seconds": 15,
            })  # fmt: skip
            assert response.status_code == 200, response.text
            return [m["id"] for m in response.json()["messages"]]

    with ThreadPoolExecutor(WAITERS) as pool:
        futures = [pool.submit(claim, i) for i in range(WAITERS)]
        peak = wait_until_waiting(asgi_server, started, WAITERS)
        assert not any(f.done() for f in futures), "a claimer returned before any enqueue"
        with world.client(world.editor_token) as http:
            sent = http.post(queue + "messages/", json={
                "messages": [{"payload": {"n": i}} for i in range(WAITERS)],
            })  # fmt: skip
            assert sent.status_code == 201, sent.text
        got = [mid for f in futures for mid in f.result(timeout=30)]
    assert peak <= THREADS_MAX, f"{peak} server threads with {WAITERS} claims waiting"
    assert sorted(got) == sorted(sent.json()["ids"])  # each to exactly one claimer


def test_waiting_stream_reads_hold_no_thread_each_and_wake_on_append(
    world: World, asgi_server: AsgiServer
) -> None:
    topic = f"wait-{uuid.uuid4().hex[:8]}"
    world.server.manage("stream_create", world.group, topic)
    path = f"/api/groups/{world.group}/topics/{topic}/"
    started: list[float] = []
    answered: list[float] = []
    lock = threading.Lock()

    def read(i: int) -> list[int]:
        with asgi_server.client(world.editor_token) as http:
            started.append(time.monotonic())
            where = "entries/" if i % 2 else f"consumers/c{i}/entries/"
            params = {"wait_seconds": 15, **({"since": 0} if i % 2 else {})}
            response = http.get(path + where, params=params)
            with lock:
                answered.append(time.monotonic())
            assert response.status_code == 200, response.text
            return [e["offset"] for e in response.json()["entries"]]

    with ThreadPoolExecutor(WAITERS) as pool:
        futures = [pool.submit(read, i) for i in range(WAITERS)]
        peak = wait_until_waiting(asgi_server, started, WAITERS)
        with world.client(world.editor_token) as http:
            appended_at = time.monotonic()
            assert http.post(path + "entries/", json={"payload": "x"}).status_code == 201
        pages = [f.result(timeout=30) for f in futures]
    assert peak <= THREADS_MAX, f"{peak} server threads with {WAITERS} reads waiting"
    assert pages == [[1]] * WAITERS
    assert max(answered) - appended_at < 5.0  # woken, not timed out (15 s)


def test_a_waiting_claim_answers_errors_in_the_envelope(
    world: World, asgi_server: AsgiServer, queue: str
) -> None:
    with asgi_server.client(world.editor_token) as http:
        bad = http.post(queue + "claim/", json={"worker_id": "w", "wait_seconds": 21})
        assert_error(bad, 400, "invalid")
        empty = http.post(queue + "claim/", json={"worker_id": "w", "wait_seconds": 0.5})
        assert (empty.status_code, empty.json()) == (200, {"messages": []})
        # Served after the wait, on the loop: it still carries what the middleware
        # sets on every response, and the length of its own body.
        assert empty.headers["X-Content-Type-Options"] == "nosniff"
        assert empty.headers["X-Frame-Options"] == "DENY"
        assert int(empty.headers["Content-Length"]) == len(empty.content)
    with httpx.Client(base_url=asgi_server.url) as anonymous:
        refused = anonymous.post(queue + "claim/", json={"worker_id": "w", "wait_seconds": 5})
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "not_authenticated"


def test_waiting_channel_long_polls_hold_no_thread_each(
    world: World, asgi_server: AsgiServer
) -> None:
    name = f"wait-{uuid.uuid4().hex[:8]}"
    path = f"/api/groups/{world.group}/channels/{name}/"
    with asgi_server.client(world.admin_token) as http:
        assert http.post(f"/api/groups/{world.group}/channels/", json={"name": name}).is_success
    started: list[float] = []

    def listen(_: int) -> list[dict]:
        with asgi_server.client(world.editor_token) as http:
            started.append(time.monotonic())
            response = http.get(path + "events/", params={"after": 0, "timeout": 15})
            assert response.status_code == 200, response.text
            return response.json()["notifications"]

    with ThreadPoolExecutor(WAITERS) as pool:
        futures = [pool.submit(listen, i) for i in range(WAITERS)]
        peak = wait_until_waiting(asgi_server, started, WAITERS)
        with world.client(world.editor_token) as http:
            assert http.post(path + "messages/", json={"payload": "x"}).status_code == 201
        heard = [f.result(timeout=30) for f in futures]
    assert peak <= THREADS_MAX, f"{peak} server threads with {WAITERS} listeners waiting"
    assert [[n["payload"] for n in notes] for notes in heard] == [["x"]] * WAITERS


def test_a_read_waiting_when_its_topic_is_deleted_answers_404_in_the_envelope(
    world: World, asgi_server: AsgiServer
) -> None:
    topic = f"wait-{uuid.uuid4().hex[:8]}"
    world.server.manage("stream_create", world.group, topic)
    path = f"/api/groups/{world.group}/topics/{topic}/"
    with ThreadPoolExecutor(1) as pool, asgi_server.client(world.editor_token) as http:
        waiting = pool.submit(http.get, path + "entries/", params={"wait_seconds": 15})
        time.sleep(1.0)  # it found nothing and waits
        with world.client(world.admin_token) as admin:
            assert admin.delete(path).status_code == 204
        assert_error(waiting.result(timeout=30), 404, "topic_not_found")
