"""Request fields are never silently dropped (issue 12 point 2): the enqueue
options deliver_after / expires_at are honoured and validated, and a field an
endpoint does not know is a 400 naming it, in every app."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error

Q = "/api/groups/acme/queues/jobs"
APP_Q = "/api/apps/shop/queues/jobs"


@pytest.fixture(scope="module")
def dated_queue(world):
    """A queue of its own, so claims here see only these tests' messages."""
    with world.client(world.admin_token) as http:
        created = http.post("/api/groups/acme/queues/", json={"name": "dated"})
    assert created.status_code == 201, created.text
    return "/api/groups/acme/queues/dated"


def iso(moment: datetime) -> str:
    return moment.isoformat()


def claim(http: httpx.Client, queue: str) -> list[dict]:
    response = http.post(f"{queue}/claim/", json={"worker_id": "bb", "max_messages": 100})
    assert response.status_code == 200, response.text
    return response.json()["messages"]


@pytest.mark.parametrize("route", [Q, APP_Q])
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("deliver_after", "not-a-date"),
        ("expires_at", "yesterday-ish"),
        ("deliver_after", "2030-01-01T00:00:00"),  # no time zone
        ("expires_at", 1767225600),
    ],
)
def test_enqueue__bad_moment_is_400_naming_it(world, route, field, value):
    with world.client(world.app_token) as http:
        response = http.post(f"{route}/messages/", json={"payload": 1, field: value})
        batch = http.post(f"{route}/messages/", json={"messages": [{"payload": 1, field: value}]})
    assert field in assert_error(response, 400, "invalid")["details"]
    error = assert_error(batch, 400, "invalid")
    assert error["details"]["index"] == 0
    assert field in error["details"]["messages"]["0"]


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"delay_seconds": 5, "deliver_after": "2030-01-01T00:00:00Z"}, "deliver_after"),
        ({"expires_in_seconds": 5, "expires_at": "2030-01-01T00:00:00Z"}, "expires_at"),
    ],
)
def test_enqueue__seconds_and_moment_together_is_400(world, given, field):
    with world.client(world.app_token) as http:
        response = http.post(f"{Q}/messages/", json={"payload": 1, **given})
    assert field in assert_error(response, 400, "invalid")["details"]


def test_enqueue__deliver_after_in_the_future_is_claimable_only_then(world, dated_queue):
    due = datetime.now(UTC) + timedelta(seconds=3)
    with world.client(world.admin_token) as http:
        sent = http.post(f"{dated_queue}/messages/", json={"payload": 1, "deliver_after": iso(due)})
        assert sent.status_code == 201, sent.text
        shown = http.get(f"{dated_queue}/messages/{sent.json()['id']}/").json()
        assert datetime.fromisoformat(shown["deliver_after"]) == due.replace(microsecond=0) or (
            abs(datetime.fromisoformat(shown["deliver_after"]) - due) < timedelta(seconds=0.01)
        )
        assert sent.json()["id"] not in [m["id"] for m in claim(http, dated_queue)]
        time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()) + 0.3)
        assert sent.json()["id"] in [m["id"] for m in claim(http, dated_queue)]


def test_enqueue__expires_at_is_honoured(world, dated_queue):
    past = datetime.now(UTC) - timedelta(seconds=1)
    later = datetime.now(UTC) + timedelta(hours=1)
    with world.client(world.admin_token) as http:
        gone = http.post(f"{dated_queue}/messages/", json={"payload": 1, "expires_at": iso(past)})
        kept = http.post(f"{dated_queue}/messages/", json={"payload": 2, "expires_at": iso(later)})
        assert gone.status_code == 201 and kept.status_code == 201, (gone.text, kept.text)
        claimed = [m["id"] for m in claim(http, dated_queue)]
        assert gone.json()["id"] not in claimed
        assert kept.json()["id"] in claimed
        dead = http.get(f"{dated_queue}/messages/{gone.json()['id']}/").json()
        assert (dead["state"], dead["dead_reason"]) == ("dead", "expired"), dead
        shown = http.get(f"{dated_queue}/messages/{kept.json()['id']}/").json()
    assert abs(datetime.fromisoformat(shown["expires_at"]) - later) < timedelta(seconds=0.01)


# ------------------------------------------------------------ unknown fields

ANY_ID = str(uuid.uuid4())


def unknown_field_cases(session: str) -> list[tuple[str, str, str, dict, str]]:
    """(token, method, path, body, the unknown field's path in details)."""
    S = f"/api/sessions/{session}/queue"
    return [
        ("app", "POST", f"{Q}/messages/", {"payload": 1, "colour": "red"}, "colour"),
        ("app", "POST", f"{APP_Q}/messages/", {"payload": 1, "colour": "red"}, "colour"),
        ("app", "POST", f"{Q}/messages/", {"messages": [{"payload": 1}], "colour": 1}, "colour"),
        ("editor", "POST", f"{Q}/claim/", {"worker_id": "w", "colour": 1}, "colour"),
        ("editor", "POST", f"{Q}/nack/", {"id": ANY_ID, "claim_token": ANY_ID, "colour": 1},
         "colour"),
        ("editor", "POST", f"{Q}/ack/", {"acks": [], "colour": 1}, "colour"),
        ("admin", "PATCH", f"{Q}/", {"paused": False, "colour": 1}, "colour"),
        ("admin", "POST", "/api/groups/acme/queues/", {"name": "x", "colour": 1}, "colour"),
        ("app", "POST", "/api/apps/shop/tasks/", {"title": "t", "colour": 1}, "colour"),
        ("editor", "POST", f"{S}/messages/", {"content": "hi", "colour": 1}, "colour"),
        ("editor", "PUT", f"{S}/auto-run/", {"enabled": True, "colour": 1}, "colour"),
        ("editor", "POST", f"{S}/reorder/", {"ids": [], "colour": 1}, "colour"),
    ]  # fmt: skip


def tokens(world: World) -> dict[str, str]:
    return {"app": world.app_token, "editor": world.editor_token, "admin": world.admin_token}


def test_unknown_fields__are_400_naming_them_in_every_app(world, agent_session):
    for who, method, path, body, field in unknown_field_cases(agent_session.session):
        with world.client(tokens(world)[who]) as http:
            response = http.request(method, path, json=body)
        details = assert_error(response, 400, "invalid")["details"]
        assert field in details, (method, path, details)


def test_unknown_fields__in_batch_entries_and_nested_objects(world, agent_session):
    S = f"/api/sessions/{agent_session.session}/queue"
    with world.client(world.app_token) as http:
        batch = http.post(f"{Q}/messages/", json={"messages": [{"payload": 1, "colour": 1}]})
        ack = http.post(f"{Q}/ack/", json={"acks": [{"id": ANY_ID, "claim_token": ANY_ID,
                                                     "colour": 1}]})  # fmt: skip
    error = assert_error(batch, 400, "invalid")
    assert "colour" in error["details"]["messages"]["0"]
    assert "colour" in assert_error(ack, 400, "invalid")["details"]["acks"]["0"]
    attachment = {"type": "text", "data": "x", "colour": 1}
    with world.client(world.editor_token) as http:
        nested = http.post(f"{S}/messages/", json={"content": "a", "attachments": [attachment]})
        entry = http.post(f"{S}/messages/", json={"content": "to edit"})
        assert entry.status_code in (200, 201), entry.text  # 200: auto-merged into the tail
        patch = http.patch(
            f"{S}/messages/{entry.json()['id']}/", json={"content": "b", "colour": 1}
        )
    assert "colour" in assert_error(nested, 400, "invalid")["details"]["attachments"]["0"]
    assert "colour" in assert_error(patch, 400, "invalid")["details"]


def test_endpoints_without_a_body__refuse_body_fields(world, agent_session):
    S = f"/api/sessions/{agent_session.session}/queue"
    paths = [
        f"/api/tasks/{agent_session.task}/sessions/", f"/api/tasks/{agent_session.task}/archive/",
        f"/api/tasks/{agent_session.task}/purge/", f"{S}/messages/{ANY_ID}/merge-up/",
        f"{S}/reserve/", f"{S}/reservations/{ANY_ID}/ack/", f"{S}/reservations/{ANY_ID}/release/",
        f"{S}/send-now/{ANY_ID}/restore/", f"{S}/send-now/{ANY_ID}/acknowledge/",
    ]  # fmt: skip
    with world.client(world.admin_token) as http:
        for path in paths:
            response = http.post(path, json={"colour": 1})
            assert "colour" in assert_error(response, 400, "invalid")["details"], path
        assert http.get(f"/api/tasks/{agent_session.task}/").json()["archived"] is False
