"""64 concurrent clients against a real server (DEBUG off): no 5xx, and on
PostgreSQL the server's own connections (``pg_stat_activity`` rows with its
``application_name``) stay within its pool (issue 21). The production server
(uvicorn) for 20 s and the default one (``runserver``) for 10 s, each on the
run's database.

The clients are asyncio tasks of this process, each with its own keep-alive
connection, cycling through enqueue one, enqueue ten, claim ten + ack them and
stats, with no pause. Throttling stays on at a rate no client reaches.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.blackbox.conftest import World
from tests.blackbox.server import AsgiServer, Server, postgres_url

CLIENTS = 64
POOL = 6  # DB_POOL_MAX_SIZE of the servers under load


class Load:
    """What the clients saw: status counts and transport errors."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.transport_errors: list[str] = []

    def server_errors(self) -> dict[int, int]:
        return {s: n for s, n in self.statuses.items() if s >= 500}


async def one_client(url: str, token: str, queue: str, deadline: float, load: Load) -> None:
    path = f"/api/groups/acme/queues/{queue}/"
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:

        async def call(method: str, rest: str, body: object = None) -> httpx.Response | None:
            try:
                response = await http.request(method, path + rest, json=body)
            except httpx.TransportError as exc:
                load.transport_errors.append(repr(exc))
                return None
            load.statuses[response.status_code] += 1
            return response

        while time.monotonic() < deadline:
            await call("POST", "messages/", {"payload": {"n": 1}})
            await call("POST", "messages/", {"messages": [{"payload": i} for i in range(10)]})
            claimed = await call("POST", "claim/", {"worker_id": "load", "max_messages": 10})
            if claimed is not None and claimed.status_code == 200:
                held = claimed.json()["messages"]
                acks = [{"id": m["id"], "claim_token": m["claim_token"]} for m in held]
                if acks:
                    await call("POST", "ack/", {"acks": acks})
            await call("GET", "stats/")


def run_load(url: str, token: str, queue: str, seconds: float) -> Load:
    load = Load()
    deadline = time.monotonic() + seconds

    async def everyone() -> None:
        await asyncio.gather(
            *(one_client(url, token, queue, deadline, load) for _ in range(CLIENTS))
        )

    asyncio.run(everyone())
    return load


class ConnectionCount:
    """The most connections with ``application_name`` seen at once, sampled
    every 0.1 s on a connection of its own (PostgreSQL)."""

    def __init__(self, database_url: str, application_name: str) -> None:
        self.url, self.name = database_url, application_name
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConnectionCount:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(0.1):
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    [self.name],
                ).fetchone()
                assert row is not None
                self.most, self.samples = max(self.most, row[0]), self.samples + 1


@pytest.fixture(params=[(AsgiServer, 20.0), (Server, 10.0)], ids=["uvicorn", "runserver"])
def loaded_server(
    request: pytest.FixtureRequest, world: World, tmp_path: Path
) -> Iterator[tuple[Server, float, str]]:
    """A server of the kind (and the seconds of load it gets) on the black-box
    database, with its own ``application_name`` and a pool of POOL connections."""
    kind, seconds = request.param
    name = f"bb-load-{uuid.uuid4().hex[:8]}"
    env = dict(world.server.env, API_THROTTLE_RATE="1000000/min", DB_POOL_MAX_SIZE=str(POOL))
    if postgres_url():
        env["DATABASE_URL"] += f"?application_name={name}"
    srv = kind(env=env, log_path=tmp_path / "server.log")
    srv.start()
    try:
        yield srv, seconds, name
    finally:
        srv.stop()


def test_64_clients__no_5xx_and_the_connections_stay_within_the_pool(
    world: World, loaded_server: tuple[Server, float, str]
) -> None:
    srv, seconds, application_name = loaded_server
    queue = f"load-{uuid.uuid4().hex[:8]}"
    world.server.manage("create_queue", "acme", queue)
    database_url = world.server.env["DATABASE_URL"] if postgres_url() else None
    if database_url:
        with ConnectionCount(database_url, application_name) as count:
            load = run_load(srv.url, world.app_token, queue, seconds)
        assert count.samples > 0
        # The pool, and the one LISTEN connection a process opens when a
        # request waits (none of these does).
        assert 0 < count.most <= POOL + 1, count.most
    else:
        load = run_load(srv.url, world.app_token, queue, seconds)
    assert load.server_errors() == {}, (load.statuses, srv.output())
    assert load.transport_errors == [], (load.transport_errors[:3], srv.output()[-3000:])
    assert set(load.statuses) <= {200, 201}, load.statuses
    assert sum(load.statuses.values()) > CLIENTS  # every client got answers
    with srv.client(world.app_token) as http:  # and it serves on afterwards
        assert http.get(f"/api/groups/acme/queues/{queue}/stats/").status_code == 200
