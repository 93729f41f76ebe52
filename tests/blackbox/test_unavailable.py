"""A database that refuses connections answers 503 ``unavailable`` in the
envelope with ``Retry-After``, never 500 (the production server, uvicorn, DEBUG off, its
DATABASE_URL pointing at a port nothing listens on); so does a web process whose
connection pool has no connection free (PostgreSQL), and it recovers by itself."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error
from tests.blackbox.server import AsgiServer, free_port, postgres_url, production_env


@pytest.fixture(scope="module")
def dbless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    # The pool waits DB_POOL_TIMEOUT for a connection it cannot make: 1 s, not 5.
    env = dict(production_env(url), DB_POOL_TIMEOUT="1")
    srv = AsgiServer(env=env, log_path=tmp_path_factory.mktemp("dbless") / "log")
    srv.start()  # the schema needs no database
    yield srv
    srv.stop()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/groups/"),
        ("POST", "/api/groups/acme/queues/jobs/messages/"),
        ("POST", "/api/groups/acme/queues/jobs/claim/"),
        ("GET", "/api/sessions/00000000-0000-0000-0000-000000000000/queue/"),
    ],
)
def test_refused_database__503_envelope_with_retry_after(
    dbless: AsgiServer, method: str, path: str
) -> None:
    with dbless.client("some-token") as http:
        response = http.request(method, path, json={"payload": 1, "worker_id": "w"})
    assert_error(response, 503, "unavailable")
    assert response.headers["Retry-After"] == "1"
    assert "Traceback" not in dbless.output()


def test_the_server_keeps_serving_after_refusals(dbless: AsgiServer) -> None:
    with dbless.client("some-token") as http:
        for _ in range(5):
            assert http.get("/api/groups/").status_code == 503
        assert http.get("/api/schema/").status_code == 200


# ------------------------------------------------------------- exhausted pool


@pytest.fixture(scope="module")
def one_connection(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    """The black-box database served by uvicorn with a pool of one connection
    that a request waits for at most 1 s (PostgreSQL: the pool is its)."""
    if not postgres_url():
        pytest.skip("the connection pool is PostgreSQL's")
    env = dict(world.server.env, DB_POOL_MAX_SIZE="1", DB_POOL_TIMEOUT="1")
    srv = AsgiServer(env=env, log_path=tmp_path_factory.mktemp("one-connection") / "log")
    srv.start()
    yield srv
    srv.stop()


def test_exhausted_pool__503_envelope_with_retry_after_then_recovers(
    world: World, one_connection: AsgiServer
) -> None:
    """An enqueue that waits on a lock holds the only pooled connection: the
    next request gets no connection within DB_POOL_TIMEOUT and answers 503;
    once the lock goes, both are served again without a restart."""
    import psycopg

    url = world.server.env["DATABASE_URL"]
    path = "/api/groups/acme/queues/jobs/messages/"
    with psycopg.connect(url) as locker:
        locker.execute("LOCK TABLE groupqueues_message IN ACCESS EXCLUSIVE MODE")
        with ThreadPoolExecutor(1) as pool:
            blocked = pool.submit(post, one_connection, world.app_token, path)
            wait_for_a_lock_wait(url)
            with one_connection.client(world.app_token) as http:
                refused = http.get("/api/groups/")
            error = assert_error(refused, 503, "unavailable")
            assert refused.headers["Retry-After"] == "1"
            assert error["details"] == {"retry_after_seconds": 1}
            locker.rollback()  # the lock goes
            assert blocked.result(timeout=60).status_code == 201
    with one_connection.client(world.app_token) as http:
        assert http.get("/api/groups/").status_code == 200
    assert "Traceback" not in one_connection.output()


def post(srv: AsgiServer, token: str, path: str) -> httpx.Response:
    with srv.client(token) as http:
        return http.post(path, json={"payload": {"waits": True}})


def wait_for_a_lock_wait(url: str, timeout: float = 60) -> None:
    """Until a session of the database waits on a lock (the blocked enqueue)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError("the enqueue never waited on the lock")


def test_listeners_hold_no_pooled_connection(world: World, one_connection: AsgiServer) -> None:
    """SSE listeners wait without a connection: three of them attached to a
    server whose pool has one, and it still answers, and they still hear."""
    from tests.blackbox.test_channel_events import listening, make_channel, publish

    path = make_channel(world, one_connection, "bb-pool-listeners")
    with listening(one_connection, world.editor_token, path) as a, \
            listening(one_connection, world.editor_token, path) as b, \
            listening(one_connection, world.app_token, path) as c:  # fmt: skip
        with one_connection.client(world.editor_token) as http:
            for _ in range(3):
                assert http.get("/api/groups/").status_code == 200
            sent = publish(http, path, "heard")
        for listener in (a, b, c):
            assert [int(e["id"]) for e in listener.wait_for(1)] == [sent]
