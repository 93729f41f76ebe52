"""Routing over real HTTP: every error is the JSON envelope, for every method
(issue 12 point 1), malformed ids included (issue 11 point 2), and the CSRF
check still refuses a session-cookie write without its token."""

from __future__ import annotations

import re
import uuid
from contextlib import closing

import httpx
import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.blackbox.conftest import PASSWORD, World, assert_error

S = "/api/sessions/{s}/queue"
BAD = "not-a-uuid"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", S + "/messages/not-a-uuid/"),
        ("PATCH", S + "/messages/not-a-uuid/"),
        ("POST", S + "/messages/not-a-uuid/merge-up/"),
        ("POST", S + "/reservations/not-a-uuid/ack/"),
        ("POST", S + "/reservations/not-a-uuid/release/"),
        ("POST", S + "/send-now/not-a-uuid/restore/"),
        ("POST", S + "/send-now/not-a-uuid/acknowledge/"),
        ("DELETE", "/api/groups/acme/queues/jobs/messages/not-a-uuid/"),
        ("POST", "/api/no/such/thing/"),
        ("DELETE", "/api/no/such/thing/"),
        ("PUT", "/api/no/such/thing/"),
        ("PATCH", "/api/groups/acme/nothing/"),
    ],
)
def test_routing_404__every_method_is_the_envelope(world, agent_session, method, path):
    with world.client(world.editor_token) as http:
        response = http.request(method, path.format(s=agent_session.session), json={})
    assert_error(response, 404, "not_found")


def _api_routes() -> list[tuple[str, URLPattern]]:
    """Every route under /api/ as (route string, pattern)."""
    routes = []
    for top in get_resolver().url_patterns:
        if isinstance(top, URLResolver) and str(top.pattern) == "api/":
            routes += [
                (f"/api/{p.pattern}", p) for p in top.url_patterns if isinstance(p, URLPattern)
            ]
    return routes


def _id_cases() -> list[tuple[str, str, str]]:
    """(method, route, id parameter) for every method of every route with an id."""
    cases = []
    for route, pattern in _api_routes():
        view = pattern.callback.view_class  # type: ignore[attr-defined]  # set by as_view()
        methods = [m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)]
        for name in re.findall(r"<api_id:(\w+)>", route):
            cases += [(m.upper(), route, name) for m in methods]
    return cases


def test_id_routes__cover_both_engines():
    routes = {route for _, route, _ in _id_cases()}
    assert any(r.startswith("/api/groups/") for r in routes)
    assert any(r.startswith("/api/sessions/") for r in routes)
    assert any(r.startswith("/api/tasks/") for r in routes)


@pytest.mark.parametrize(("method", "route", "param"), _id_cases())
def test_malformed_id__is_404_not_found(world, agent_session, method, route, param):
    known = {"g": "acme", "q": "jobs", "app": "shop", "name": "jobs",
             "session_id": agent_session.session, "task_id": agent_session.task}  # fmt: skip

    def fill(match: re.Match) -> str:
        name = match.group(2)
        return BAD if name == param else known.get(name, str(uuid.uuid4()))

    path = re.sub(r"<(\w+):(\w+)>", fill, route)
    with world.client(world.editor_token) as http:
        response = http.request(method, path, json={} if method != "GET" else None)
    assert_error(response, 404, "not_found")


def _logged_in(world: World, username: str) -> httpx.Client:
    """A client holding a session cookie from the admin login (and the CSRF cookie)."""
    http = world.client()
    page = http.get("/admin/login/")
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert found is not None, page.text
    token = found.group(1)
    login = http.post(
        "/admin/login/?next=/admin/",
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
    )
    assert login.status_code == 302 and "sessionid" in http.cookies, login.text[:500]
    return http  # already open: close it with contextlib.closing


def test_csrf__session_cookie_write_without_token_is_refused_in_the_envelope(world):
    claim = {"worker_id": "bb-csrf", "max_messages": 0}
    with closing(_logged_in(world, "editor")) as http:
        refused = http.post(f"/api/groups/{world.group}/queues/{world.queue}/claim/", json=claim)
        error = assert_error(refused, 403, "permission_denied")
        assert "CSRF" in error["message"]
        allowed = http.post(
            f"/api/groups/{world.group}/queues/{world.queue}/claim/", json=claim,
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
        )  # fmt: skip
    assert allowed.status_code == 200, allowed.text


def test_csrf__unknown_path_with_session_cookie_is_404_not_the_csrf_page(world):
    with closing(_logged_in(world, "editor")) as http:
        response = http.post("/api/no/such/thing/", json={})
    assert_error(response, 404, "not_found")
