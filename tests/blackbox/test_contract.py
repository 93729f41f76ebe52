"""Schema and server agree (issue 12 point 7): what the served OpenAPI
document says is what the server accepts and answers."""

from __future__ import annotations

import pytest

from tests.blackbox.conftest import assert_error
from tests.blackbox.server import Server


@pytest.fixture(scope="module")
def spec(server: Server) -> dict:
    with server.client() as http:
        return http.get("/api/schema/", params={"format": "json"}).json()


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/api/apps/shop/tasks/", {"title": 0}, "title"),
        ("PUT", "/api/sessions/{s}/agent-ready/", {"ready": 0}, "ready"),
        ("PUT", "/api/sessions/{s}/queue/auto-run/", {"enabled": 0}, "enabled"),
        ("PUT", "/api/sessions/{s}/queue/auto-merge/", {"enabled": "true"}, "enabled"),
        ("POST", "/api/sessions/{s}/queue/messages/", {"content": 5}, "content"),
        ("POST", "/api/sessions/{s}/queue/transfer/", {"to_session": 1}, "to_session"),
    ],
)
def test_session_api__no_loose_coercions(world, agent_session, method, path, body, field):
    with world.client(world.app_token) as http:
        response = http.request(method, path.format(s=agent_session.session), json=body)
    assert field in assert_error(response, 400, "invalid")["details"]


def test_groups__parent_null_is_what_the_schema_says(world, spec):
    with world.client(world.editor_token) as http:
        groups = {g["slug"]: g for g in http.get("/api/groups/").json()["results"]}
    assert groups["acme"]["parent"] is None and groups["acme-web"]["parent"] == "acme"
    assert spec["components"]["schemas"]["Group"]["properties"]["parent"]["nullable"] is True


def test_incarnation_header__is_documented_as_a_uuid(world, agent_session, spec):
    operation = spec["paths"]["/api/sessions/{session_id}/queue/messages/"]["post"]
    (header,) = [p for p in operation["parameters"] if p["name"] == "X-Session-Incarnation"]
    assert header["schema"] == {"type": "string", "format": "uuid"}
    with world.client(world.editor_token) as http:
        response = http.post(
            f"/api/sessions/{agent_session.session}/queue/messages/",
            json={"content": "x"}, headers={"X-Session-Incarnation": "nope"},
        )  # fmt: skip
    assert "X-Session-Incarnation" in assert_error(response, 400, "invalid")["details"]


@pytest.mark.parametrize("path", ["/api/groups/", "/api/groups/{g}/queues/"])
def test_page_size__range_is_documented_and_enforced(world, spec, path):
    parameters = {p["name"]: p["schema"] for p in spec["paths"][path]["get"]["parameters"]}
    assert parameters["page_size"] == {"type": "integer", "minimum": 1}  # above 500: capped
    assert parameters["page"]["minimum"] == 1
    with world.client(world.editor_token) as http:
        response = http.get(path.format(g=world.group), params={"page_size": 0})
    assert "page_size" in assert_error(response, 400, "invalid")["details"]


def test_request_bodies__are_closed_objects_in_the_schema(spec):
    requests = {k: v for k, v in spec["components"]["schemas"].items() if k.endswith("Request")}
    objects = {k: v for k, v in requests.items() if "properties" in v}
    assert len(objects) >= 20
    assert all(v.get("additionalProperties") is False for v in objects.values()), [
        k for k, v in objects.items() if v.get("additionalProperties") is not False
    ]


def test_message_patch__empty_body_is_400_and_documented(world, agent_session, spec):
    assert spec["components"]["schemas"]["PatchedEntryUpdateRequest"]["minProperties"] == 1
    S = f"/api/sessions/{agent_session.session}/queue"
    with world.client(world.editor_token) as http:
        entry = http.post(f"{S}/messages/", json={"content": "to patch"})
        assert entry.status_code in (200, 201), entry.text  # 200: auto-merged into the tail
        response = http.patch(f"{S}/messages/{entry.json()['id']}/", json={})
    assert "non_field_errors" in assert_error(response, 400, "invalid")["details"]
