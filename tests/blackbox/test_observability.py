"""The probes and the scrape over HTTP, against real server processes
(docs/observability.md): ``/healthz``, ``/readyz`` (503 without a recent
maintenance leader, and with the database down: a server pointed at a closed
port), ``/metrics`` refused without a ``metrics:read`` token."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error
from tests.blackbox.server import ROOT, Server, free_port, postgres_url, production_env

# A plain WSGI server (the standard library's), not runserver: runserver
# refuses to start while the database is down (its migration check), and a
# production server starts regardless.
WSGI_SERVER = (
    "import sys, django; django.setup(); "
    "from wsgiref.simple_server import make_server; "
    "from django.core.wsgi import get_wsgi_application; "
    "make_server('127.0.0.1', int(sys.argv[1]), get_wsgi_application()).serve_forever()"
)


def closed_database_url(tmp: Path) -> str:
    """A database nobody answers: PostgreSQL on a closed port, or an SQLite
    file in a directory that does not exist."""
    if postgres_url():
        return f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    return f"sqlite:///{tmp / 'missing-dir' / 'db.sqlite3'}"


@pytest.fixture
def server_without_database(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    env = production_env(closed_database_url(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", WSGI_SERVER, str(port)], env=env, cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def test_healthz__200_without_credentials(server: Server) -> None:
    response = httpx.get(f"{server.url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz__503_when_the_database_is_down(server_without_database: str) -> None:
    response = httpx.get(f"{server_without_database}/readyz", timeout=30)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"].startswith("unreachable")
    # The liveness probe does not depend on the database.
    assert httpx.get(f"{server_without_database}/healthz").status_code == 200


def test_readyz__needs_a_recent_maintenance_leader(server: Server) -> None:
    before = httpx.get(f"{server.url}/readyz")
    if before.status_code == 503:  # no leader yet in this server's database
        checks = before.json()["checks"]
        assert checks["database"] == "ok" and checks["migrations"] == "ok"
        assert checks["maintenance_leader"].startswith("no leader")
    server.manage("queue_maintenance", "--once")
    after = httpx.get(f"{server.url}/readyz")
    assert after.status_code == 200, after.text
    assert after.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "maintenance_leader": "ok"},
    }


def test_metrics__refused_without_the_scope_and_served_with_it(world: World) -> None:
    server = world.server
    assert_error(httpx.get(f"{server.url}/metrics"), 401, "not_authenticated")
    assert_error(world.client(world.editor_token).get("/metrics"), 403, "permission_denied")
    server.create_user("scraper", password="x-Passw0rd-not-secret", staff=True)
    token = server.create_token(user="scraper", scopes="metrics:read")
    response = world.client(token).get("/metrics", headers={"Accept": "text/plain"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'queue_messages{group="acme",queue="jobs",state="ready"}' in response.text
