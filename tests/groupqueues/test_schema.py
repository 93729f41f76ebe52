"""The OpenAPI schema describes every group-queue endpoint, with bearer auth,
and generates without warnings."""

from __future__ import annotations

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db

Q = "/api/groups/{g}/queues/{q}/"
OPERATIONS = {
    "/api/groups/{g}/queues/": {"get", "post"},
    Q: {"get", "patch"},
    Q + "messages/": {"post"},
    Q + "messages/{id}/": {"get", "delete"},
    **{Q + f"{action}/": {"post"} for action in
       ("claim", "ack", "nack", "fail", "extend", "release", "redrive", "purge")},
    Q + "stats/": {"get"},
    Q + "dead/": {"get"},
    "/api/apps/{app}/queues/{name}/messages/": {"post"},
    "/api/apps/{app}/queues/{name}/stats/": {"get"},
}  # fmt: skip


@pytest.fixture(scope="module")
def schema():
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def test_schema__every_group_queue_operation(schema):
    for path, methods in OPERATIONS.items():
        assert path in schema["paths"], path
        assert set(schema["paths"][path]) >= methods, path


def test_schema__requests_and_responses_are_described(schema):
    for path, methods in OPERATIONS.items():
        for method in methods:
            operation = schema["paths"][path][method]
            assert {"bearerAuth": []} in operation["security"]
            assert {"401", "403", "404"} <= set(operation["responses"]), (path, method)
            if method in ("post", "patch"):
                assert "requestBody" in operation, (path, method)


def test_schema__claim_response_fields(schema):
    claimed = schema["components"]["schemas"]["ClaimedMessage"]["properties"]
    assert set(claimed) == {"id", "payload", "priority", "attempt", "max_attempts",
                            "claim_token", "lease_expires_at", "enqueued_at"}  # fmt: skip
    claim = schema["components"]["schemas"]["ClaimRequest"]["properties"]
    assert claim["wait_seconds"]["maximum"] == 20
    assert claim["visibility_timeout"]["maximum"] == 43200


def test_schema__generates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml"))


def test_docs_are_served(api):
    assert api.get("/api/docs/").status_code == 200
    assert api.get("/api/schema/").status_code == 200
