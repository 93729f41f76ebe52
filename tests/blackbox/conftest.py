"""Black-box fixtures: one real server per test session (per xdist worker),
with DEBUG off and a random SECRET_KEY, on a database of its own (a temp
SQLite file, or ``<run's database>_bb`` on PostgreSQL when the run is on
PostgreSQL), set up through the management commands.

These tests use no Django test database and no test client: only HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.blackbox.server import (
    AsgiServer,
    Server,
    bb_database_name,
    postgres_create,
    postgres_drop,
    postgres_url,
    production_env,
)

PASSWORD = "bb-Passw0rd-not-secret"
ALL_SCOPES = (
    "queue:read,queue:write,queue:consume,queue:admin,session:read,session:write,session:consume"
)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The running server (migrated, empty database)."""
    base = tmp_path_factory.mktemp("blackbox")
    pg = postgres_url()
    name = bb_database_name(pg) if pg else ""
    database_url = postgres_create(pg, name) if pg else f"sqlite:///{base / 'db.sqlite3'}"
    srv = Server(env=production_env(database_url), log_path=base / "server.log")
    try:
        srv.manage("migrate", "--noinput")
        srv.start()
        yield srv
    finally:
        srv.stop()
        if pg:
            postgres_drop(pg, name)


@dataclass(frozen=True)
class World:
    """Principals and a queue made through the commands: group ``acme`` with
    the queue ``jobs`` and the child ``acme-web`` holding the app ``shop``;
    ``editor`` (staff) is editor of ``acme``; ``admin`` is its admin."""

    server: Server
    app_token: str  # shop, every queue and session scope
    editor_token: str  # editor, every scope (capped by the role)
    admin_token: str

    group = "acme"
    queue = "jobs"
    app = "shop"

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        return self.server.client(token, **kwargs)


@pytest.fixture(scope="session")
def world(server: Server) -> World:
    server.create_group("acme")
    server.create_group("acme-web", parent="acme")
    server.create_app("shop", group="acme-web")
    server.manage("create_queue", "acme", "jobs")
    for name, role in (("editor", "editor"), ("admin", "admin")):
        server.create_user(name, password=PASSWORD, staff=True)
        server.grant_role(name, "acme", role)
    return World(
        server=server,
        app_token=server.create_token(app="shop", scopes=ALL_SCOPES),
        editor_token=server.create_token(user="editor", scopes=ALL_SCOPES),
        admin_token=server.create_token(user="admin", scopes=ALL_SCOPES),
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed black-box test shows what the server logged."""
    outcome: Any = yield
    report = outcome.get_result()
    srv = getattr(item, "funcargs", {}).get("server")
    world = getattr(item, "funcargs", {}).get("world")
    srv = srv or (world.server if world else None)
    if report.failed and srv is not None:
        report.sections.append(("server output", srv.output()))
    asgi = getattr(item, "funcargs", {}).get("asgi_server")
    if report.failed and asgi is not None:
        report.sections.append(("uvicorn output", asgi.output()))


@pytest.fixture(scope="session")
def asgi_server(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    """The same database as ``server`` served by the production command
    (uvicorn, ASGI): for the waiting endpoints (SSE, long-polls)."""
    log = tmp_path_factory.mktemp("blackbox-asgi") / "uvicorn.log"
    srv = AsgiServer(env=world.server.env, log_path=log)
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


@dataclass(frozen=True)
class SessionRefs:
    task: str
    session: str


@pytest.fixture(scope="session")
def agent_session(world: World) -> SessionRefs:
    """A task of ``shop`` and a session of it, created over the API."""
    with world.client(world.app_token) as http:
        task = http.post("/api/apps/shop/tasks/", json={"title": "bb"})
        assert task.status_code == 201, task.text
        session = http.post(f"/api/tasks/{task.json()['id']}/sessions/")
        assert session.status_code == 201, session.text
    return SessionRefs(task=task.json()["id"], session=session.json()["id"])


def assert_error(response: httpx.Response, status: int, code: str) -> dict:
    """``response`` is the JSON error envelope with ``status`` and ``code``."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    return body["error"]
