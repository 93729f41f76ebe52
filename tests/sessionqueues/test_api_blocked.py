"""Blocked heads over REST (issue 20 point 4): the paginated list with reasons
and ages, its query parameters, and the audited actions. Who may list (session
read) and act (release: consume; skip and resume: edit) is in test_authz.py."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from principals.models import Role
from queueproject import clock
from sessionqueues import services
from sessionqueues.models import AuditRecord, Session, Task
from tests.factories import member
from tests.sessionqueues.conftest import contents, entry

pytestmark = pytest.mark.django_db

LIST = "/api/apps/app-child/sessions/blocked/"


@pytest.fixture
def editor(tree):
    return member(tree["child"], Role.EDITOR)


@pytest.fixture
def client(editor):
    c = APIClient()
    c.force_authenticate(editor)
    return c


@pytest.fixture
def task(tree):
    return services.task_create(app=tree["app_child"], title="t")


def make_session(task: Task, *texts: str, ready: bool = True) -> Session:
    session = services.session_set_auto_merge(
        session_id=services.session_create(task=task).pk, enabled=False
    )
    for text in texts:
        services.entry_insert(session_id=session.pk, entry=entry(text))
    return services.session_set_agent_ready(session_id=session.pk, ready=ready)


def unblock(session: Session, action: str) -> str:
    return f"/api/sessions/{session.pk}/queue/unblock/{action}/"


def test_list__each_reason_with_its_age_details_and_the_head(client, task):
    paused = make_session(task, "p1", "p2")
    stuck = make_session(task, "s1", "s2")
    failing = make_session(task, "f1")
    make_session(task, "moving")
    with (
        override_settings(SESSIONQUEUES_RESERVATION_DEADLINE_SECONDS=60),
        clock.frozen(),
    ):
        services.session_set_auto_run(session_id=paused.pk, enabled=False)
        clock.advance(1)
        row, _ = services.reservation_reserve_for_delivery(session_id=stuck.pk)
        assert row is not None
        clock.advance(30)
        services.delivery_failure_record(session_id=failing.pk, error="HTTP 502", retry_in=4)
        clock.advance(40)
        response = client.get(LIST)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 3 and body["next"] is None
    by_session = {r["session"]: r for r in body["results"]}
    assert [r["session"] for r in body["results"]] == [
        str(paused.pk),
        str(stuck.pk),
        str(failing.pk),
    ]
    first = by_session[str(paused.pk)]
    assert first["reasons"] == [
        {"reason": "auto_run_paused", "since": first["since"], "age_seconds": 71.0, "details": {}}
    ]
    assert first["head"]["content"] == "p1" and first["waiting"] == 2
    assert first["auto_run"] is False and first["task"] == str(task.pk)
    (held,) = by_session[str(stuck.pk)]["reasons"]
    assert held["reason"] == "reservation_stuck" and held["age_seconds"] == 70.0
    assert held["details"]["reservations"][0]["reservation_id"] == str(row.reservation_id)
    assert by_session[str(stuck.pk)]["head"]["content"] == "s2"
    (fails,) = by_session[str(failing.pk)]["reasons"]
    assert fails["reason"] == "delivery_failing" and fails["age_seconds"] == 40.0
    assert fails["details"]["failures"] == 1 and fails["details"]["last_error"] == "HTTP 502"


def test_list__reason_min_age_and_pages(client, task):
    for _ in range(3):
        services.session_set_auto_run(session_id=make_session(task, "a").pk, enabled=False)
    not_ready = make_session(task, "b", ready=False)
    assert client.get(LIST).json()["count"] == 3  # not ready for less than 30 minutes
    assert client.get(f"{LIST}?min_age=0").json()["count"] == 4
    only = client.get(f"{LIST}?min_age=0&reason=agent_not_ready").json()
    assert [r["session"] for r in only["results"]] == [str(not_ready.pk)]
    page = client.get(f"{LIST}?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"] is not None
    assert client.get(f"{LIST}?min_age=99999").json()["count"] == 0


@pytest.mark.parametrize(
    "query, field",
    [
        ("reason=nope", "reason"),
        ("min_age=-1", "min_age"),
        ("min_age=1.5", "min_age"),
        ("min_age=", "min_age"),
        ("min_age=999999999999", "min_age"),
        ("reason=auto_run_paused&reason=agent_not_ready", "reason"),
        ("page_size=0", "page_size"),
    ],
)
def test_list__bad_query_is_400_naming_it(client, query, field):
    response = client.get(f"{LIST}?{query}")
    assert response.status_code == 400
    assert field in response.json()["error"]["details"]


def test_list__another_apps_sessions_are_not_there(client, tree):
    other = services.task_create(app=tree["app_sibling"])
    services.session_set_auto_run(session_id=make_session(other, "x").pk, enabled=False)
    assert client.get(LIST).json()["count"] == 0
    assert client.get("/api/apps/app-sibling/sessions/blocked/").status_code == 404
    assert client.get("/api/apps/nope/sessions/blocked/").status_code == 404


def test_release_reservation__audited_with_who_and_what(client, editor, task):
    session = make_session(task, "a", "b")
    row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    body = {"reservation_id": str(row.reservation_id), "note": "dispatcher died"}
    response = client.post(unblock(session, "release-reservation"), body, format="json")
    assert response.status_code == 200, response.content
    record = response.json()
    assert record["action"] == "release_reservation" and record["via"] == "rest"
    assert record["actor"] == f"user:{editor.pk}" and record["note"] == "dispatcher died"
    assert record["entry_id"] == str(row.pk) and record["details"]["released"] is True
    assert contents(session) == ["a", "b"]
    again = client.post(unblock(session, "release-reservation"), body, format="json")
    assert again.status_code == 409 and again.json()["error"]["code"] == "reservation_changed"
    assert AuditRecord.objects.count() == 1


def test_skip_head__and_its_conflicts(client, task):
    session = make_session(task, "a", "b")
    taken = services.entry_take_head(session_id=session.pk)  # "a"
    assert taken is not None
    head = services.snapshot(taken)
    services.entry_insert(session_id=session.pk, entry=entry("c"))
    wrong = client.post(unblock(session, "skip-head"), {"head_id": head["id"]}, format="json")
    assert wrong.status_code == 409 and wrong.json()["error"]["code"] == "queue_changed"
    response = client.post(unblock(session, "skip-head"), {"note": "poison"}, format="json")
    assert response.status_code == 200 and response.json()["action"] == "skip_head"
    assert contents(session) == ["c", "b"]
    bad = client.post(unblock(session, "skip-head"), {"head_id": "x", "y": 1}, format="json")
    assert bad.status_code == 400 and {"head_id", "y"} <= set(bad.json()["error"]["details"])


def test_resume_auto_run__and_identity(client, task):
    session = make_session(task, "a")
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    stale = {"HTTP_X_SESSION_INCARNATION": str(uuid.uuid4())}
    refused = client.post(unblock(session, "resume-auto-run"), {}, format="json", **stale)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "session_identity_mismatch"
    assert Session.objects.get(pk=session.pk).auto_run is False
    current = {"HTTP_X_SESSION_INCARNATION": str(session.incarnation_id)}
    response = client.post(unblock(session, "resume-auto-run"), {}, format="json", **current)
    assert response.status_code == 200 and response.json()["details"] == {"changed": True}
    assert Session.objects.get(pk=session.pk).auto_run is True
    assert client.get(LIST).json()["count"] == 0
