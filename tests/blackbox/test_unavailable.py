"""A database that refuses connections answers 503 ``unavailable`` in the
envelope with ``Retry-After``, never 500 (the production server, uvicorn, DEBUG off, its
DATABASE_URL pointing at a port nothing listens on)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.blackbox.conftest import assert_error
from tests.blackbox.server import AsgiServer, free_port, production_env


@pytest.fixture(scope="module")
def dbless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiServer]:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    srv = AsgiServer(env=production_env(url), log_path=tmp_path_factory.mktemp("dbless") / "log")
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
