"""The remaining session-queue operations over REST (issue 20 point 2): take
head, restore, requeue, lifecycle insert, replace, acknowledge by id, explicit
auto-merge, purge a session, pending move take / list / delete-if-match and the
batch pending count — effects, strict bodies, identity and generation fencing.
Who may call what is in test_authz.py's matrix."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

from principals.models import Role
from sessionqueues import services
from sessionqueues.models import PendingMove, QueuedMessage, Session
from tests.conftest import ApiResponse, bearer
from tests.factories import make_token, member
from tests.sessionqueues.conftest import contents, entry

pytestmark = pytest.mark.django_db


@pytest.fixture
def editor(tree):
    return member(tree["child"], Role.EDITOR)


@pytest.fixture
def client(editor):
    c = APIClient()
    c.force_authenticate(editor)
    return c


@pytest.fixture
def runtime(tree):
    """The agent runtime: an app token with the session scopes."""
    _, secret = make_token(
        app=tree["app_child"], scopes=["session:read", "session:write", "session:consume"]
    )
    return bearer(secret)


@pytest.fixture
def task(tree):
    return services.task_create(app=tree["app_child"], title="t")


@pytest.fixture
def session(task):
    return services.session_set_auto_merge(
        session_id=services.session_create(task=task).pk, enabled=False
    )


def q(session: Session) -> str:
    return f"/api/sessions/{session.pk}/queue/"


def put(session: Session, *texts: str, queued_by: str = "user:1") -> list[QueuedMessage]:
    return [
        services.entry_insert(session_id=session.pk, entry=entry(t, queued_by)).entry for t in texts
    ]


def error(response: ApiResponse, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.content)
    body = response.json()["error"]
    assert body["code"] == code, body
    return body


def stale(session: Session) -> dict[str, str]:
    return {"HTTP_X_SESSION_INCARNATION": str(uuid.uuid4())}


# --- take head and restore ------------------------------------------------------


def test_take_head__answers_the_snapshot_and_generations_then_204(runtime, session):
    put(session, "a", "b")
    taken = runtime.post(f"{q(session)}take-head/")
    assert taken.status_code == 200, taken.content
    body = taken.json()
    assert body["message"]["content"] == "a" and body["message"]["position"] == 1
    assert body["generations"] == {"task": 0, "session": 0}
    assert contents(session) == ["b"]
    runtime.post(f"{q(session)}take-head/")
    assert runtime.post(f"{q(session)}take-head/").status_code == 204


def test_take_then_restore__the_entry_is_back_at_its_position_with_its_id(runtime, session):
    put(session, "a", "b")
    body = runtime.post(f"{q(session)}take-head/").json()
    restored = runtime.post(
        f"{q(session)}restore/", {**body["message"], "generations": body["generations"]}, "json"
    )
    assert restored.status_code == 200, restored.content
    assert restored.json()["id"] == body["message"]["id"] and restored.json()["position"] == 1
    assert contents(session) == ["a", "b"]
    again = runtime.post(f"{q(session)}restore/", body["message"], "json")
    assert again.status_code == 200 and contents(session) == ["a", "b"]  # already stored


def test_restore__after_a_purge_the_generations_refuse_it(runtime, session, task):
    put(session, "a")
    body = runtime.post(f"{q(session)}take-head/").json()
    services.queue_purge_task(task_id=task.pk)
    refused = runtime.post(
        f"{q(session)}restore/", {**body["message"], "generations": body["generations"]}, "json"
    )
    details = error(refused, 409, "queue_changed")["details"]
    assert details == {"generations": {"task": 1, "session": 1}}
    assert contents(session) == []


def test_restore__an_id_of_another_session_is_409_already_exists(runtime, session, task):
    other = services.session_create(task=task)
    (theirs,) = put(other, "x")
    body = {"id": str(theirs.pk), "position": 1, "content": "x"}
    error(runtime.post(f"{q(session)}restore/", body, "json"), 409, "already_exists")
    assert contents(session) == [] and contents(other) == ["x"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"position": 1, "content": "a"}, "id"),
        ({"id": "x", "position": 1, "content": "a"}, "id"),
        ({"id": "ID", "position": 0, "content": "a"}, "position"),
        ({"id": "ID", "position": "1", "content": "a"}, "position"),
        ({"id": "ID", "position": 1, "content": "a", "reserved": False}, "reserved"),
        ({"id": "ID", "position": 1, "content": "a", "queued_by": ""}, "queued_by"),
        ({"id": "ID", "position": 1, "content": "a", "generations": {"task": -1}}, "generations"),
        ({"id": "ID", "position": 1, "content": "a", "generations": {"x": 1}}, "generations"),
    ],
)
def test_restore__strict_body(runtime, session, body, field):
    body = {k: (str(uuid.uuid4()) if v == "ID" else v) for k, v in body.items()}
    details = error(runtime.post(f"{q(session)}restore/", body, "json"), 400, "invalid")["details"]
    assert field in details
    assert contents(session) == []


def test_take_head_and_restore__a_stale_incarnation_is_409(runtime, session):
    put(session, "a")
    error(
        runtime.post(f"{q(session)}take-head/", **stale(session)), 409, "session_identity_mismatch"
    )
    body = {"id": str(uuid.uuid4()), "position": 2, "content": "x"}
    response = runtime.post(f"{q(session)}restore/", body, "json", **stale(session))
    error(response, 409, "session_identity_mismatch")
    assert contents(session) == ["a"]


def test_take_head__takes_no_body(runtime, session):
    put(session, "a")
    error(runtime.post(f"{q(session)}take-head/", {"x": 1}, "json"), 400, "invalid")
    assert contents(session) == ["a"]


# --- requeue and lifecycle -------------------------------------------------------


def test_requeue__goes_before_the_head_keeping_the_owner(runtime, session):
    put(session, "a")
    response = runtime.post(
        f"{q(session)}requeue/", {"content": "retry", "queued_by": "agent"}, "json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["queued_by"] == "agent"
    assert contents(session) == ["retry", "a"]
    replaced = runtime.post(
        f"{q(session)}requeue/", {"content": "r2", "coalesce_key": "k"}, "json"
    ).json()
    again = runtime.post(f"{q(session)}requeue/", {"content": "r3", "coalesce_key": "k"}, "json")
    assert again.status_code == 200 and again.json()["replaced"] is True
    assert again.json()["id"] == replaced["id"] and again.json()["queued_by"] == "app:app-child"


def test_requeue__fenced_by_generations_and_identity(runtime, session):
    (a,) = put(session, "a")
    services.entry_delete(session_id=session.pk, entry_id=a.pk)  # session generation 1
    body = {"content": "r", "generations": {"session": 0}}
    error(runtime.post(f"{q(session)}requeue/", body, "json"), 409, "queue_changed")
    response = runtime.post(f"{q(session)}requeue/", {"content": "r"}, "json", **stale(session))
    error(response, 409, "session_identity_mismatch")
    error(runtime.post(f"{q(session)}requeue/", {"content": 5}, "json"), 400, "invalid")
    assert contents(session) == []


def test_lifecycle__accepted_durable_then_replaced_then_refused(runtime, session, task):
    body = {"content": "CI failed", "coalesce_key": "ci", "generation": 0, "queued_by": "server"}
    first = runtime.post(f"{q(session)}lifecycle/", body, "json")
    assert first.status_code == 201, first.content
    assert first.json()["accepted"] is True and first.json()["replaced"] is False
    assert (
        first.json()["entry"]["durable"] is True and first.json()["entry"]["queued_by"] == "server"
    )
    second = runtime.post(f"{q(session)}lifecycle/", {**body, "content": "CI failed again"}, "json")
    assert second.status_code == 200 and second.json()["replaced"] is True
    assert second.json()["entry"]["id"] == first.json()["entry"]["id"]
    services.queue_purge_task(task_id=task.pk)
    stale_gen = runtime.post(f"{q(session)}lifecycle/", body, "json")
    assert stale_gen.status_code == 200
    assert stale_gen.json() == {"accepted": False, "replaced": False, "entry": None}
    services.task_archive(task_id=task.pk)
    archived = runtime.post(f"{q(session)}lifecycle/", {**body, "generation": 1}, "json")
    assert archived.json()["accepted"] is False
    assert contents(session) == []


def test_lifecycle__allow_insert_false_and_errors(runtime, session):
    body = {"content": "x", "coalesce_key": "ci", "generation": 0, "allow_insert": False}
    error(runtime.post(f"{q(session)}lifecycle/", body, "json"), 404, "not_found")
    for missing in ["coalesce_key", "generation"]:
        details = error(
            runtime.post(
                f"{q(session)}lifecycle/",
                {k: v for k, v in body.items() if k != missing},
                "json",
            ),
            400,
            "invalid",
        )["details"]
        assert missing in details
    response = runtime.post(f"{q(session)}lifecycle/", body, "json", **stale(session))
    error(response, 409, "session_identity_mismatch")


# --- replace, acknowledge by id, auto-merge, purge -------------------------------


def test_replace__snapshot_round_trip_keeps_ids_positions_owners_and_move(runtime, session):
    rows = put(session, "a", "b", queued_by="user:5")
    snapshot = [services.snapshot(r) for r in rows]
    services.queue_delete_all(session_id=session.pk)
    move = {"move_id": "m", "workflow_id": "w", "workflow_step_id": "s", "actor": "me"}
    response = runtime.post(
        f"{q(session)}replace/", {"entries": snapshot, "pending_move": move}, "json"
    )
    assert response.status_code == 200, response.content
    entries = response.json()["entries"]
    assert [(e["id"], e["position"], e["queued_by"]) for e in entries] == [
        (str(r.pk), r.position, "user:5") for r in rows
    ]
    assert PendingMove.objects.get(session=session).workflow_id == "w"


def test_replace__conflicts_change_nothing(runtime, session, task):
    put(session, "a")
    entry_a = {"id": str(uuid.uuid4()), "position": 1, "content": "x"}
    repeated = {"entries": [entry_a, {**entry_a, "id": str(uuid.uuid4())}]}
    error(runtime.post(f"{q(session)}replace/", repeated, "json"), 409, "queue_changed")
    other = services.session_create(task=task)
    (theirs,) = put(other, "theirs")
    foreign = {"entries": [{**entry_a, "id": str(theirs.pk)}]}
    error(runtime.post(f"{q(session)}replace/", foreign, "json"), 409, "already_exists")
    moved = {"entries": [], "generations": {"session": 3}}
    error(runtime.post(f"{q(session)}replace/", moved, "json"), 409, "queue_changed")
    response = runtime.post(f"{q(session)}replace/", {"entries": []}, "json", **stale(session))
    error(response, 409, "session_identity_mismatch")
    bad = {"entries": [{**entry_a, "generations": {}}]}
    details = error(runtime.post(f"{q(session)}replace/", bad, "json"), 400, "invalid")["details"]
    assert "entries" in details
    assert contents(session) == ["a"]


def test_acknowledge_by_id__removes_the_reserved_entry_else_409(runtime, session):
    a, b = put(session, "a", "b")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    url = f"{q(session)}messages/{{}}/acknowledge/"
    error(runtime.post(url.format(b.pk)), 409, "reservation_changed")  # not reserved
    error(runtime.post(url.format(a.pk), **stale(session)), 409, "session_identity_mismatch")
    assert runtime.post(url.format(a.pk)).status_code == 204
    error(runtime.post(url.format(a.pk)), 409, "reservation_changed")
    assert runtime.post(url.format("not-a-uuid")).status_code == 404
    assert contents(session) == ["b"]


def test_auto_merge__merged_or_skipped(client, editor, session):
    owner = f"user:{editor.pk}"
    a, b = put(session, "a", "b", queued_by=owner)
    (c,) = put(session, "c", queued_by="user:other")
    skipped = client.post(f"{q(session)}messages/{c.pk}/auto-merge/")
    assert skipped.status_code == 200 and skipped.json() == {"merged": False, "entry": None}
    merged = client.post(f"{q(session)}messages/{b.pk}/auto-merge/")
    assert merged.status_code == 200 and merged.json()["merged"] is True
    assert merged.json()["entry"]["id"] == str(a.pk)
    assert contents(session) == ["a\n\nb", "c"]
    response = client.post(f"{q(session)}messages/{c.pk}/auto-merge/", **stale(session))
    error(response, 409, "session_identity_mismatch")


def test_purge_session__admin_removes_everything_of_the_session(tree, session):
    put(session, "a", "b")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    services.pending_move_set(session_id=session.pk, move={"move_id": "m"})
    admin = APIClient()
    admin.force_authenticate(member(tree["child"], Role.ADMIN))
    refused = admin.post(f"{q(session)}purge/", HTTP_X_SESSION_INCARNATION=str(uuid.uuid4()))
    error(refused, 409, "session_identity_mismatch")
    response = admin.post(f"{q(session)}purge/")
    assert response.status_code == 200 and response.json() == {"removed": 2}
    assert not QueuedMessage.objects.filter(session=session).exists()
    assert not PendingMove.objects.filter(session=session).exists()


# --- pending moves and counts ----------------------------------------------------


def test_pending_move_take__answers_then_204(client, session):
    url = f"/api/sessions/{session.pk}/pending-move/"
    client.put(url, {"move_id": "m1", "actor": "me"}, format="json")
    error(client.post(f"{url}take/", **stale(session)), 409, "session_identity_mismatch")
    taken = client.post(f"{url}take/")
    assert taken.status_code == 200 and taken.json()["move_id"] == "m1"
    assert client.post(f"{url}take/").status_code == 204
    assert client.get(url).status_code == 204


def test_pending_moves_list_then_delete_if_match(client, tree, session, task):
    (handoff,) = put(session, "handoff")
    other = services.session_create(task=task)
    url = f"/api/sessions/{session.pk}/pending-move/"
    client.put(url, {"move_id": "m1", "workflow_id": "w"}, format="json")
    client.put(f"/api/sessions/{other.pk}/pending-move/", {"move_id": "m2"}, format="json")
    listed = client.get("/api/apps/app-child/sessions/pending-moves/")
    assert listed.status_code == 200 and listed.json()["count"] == 2
    record = next(r for r in listed.json()["results"] if r["session"] == str(session.pk))
    assert record["move_id"] == "m1" and record["stale"] is False
    expected = {k: record[k] for k in ["move_id", "workflow_id", "workflow_step_id", "actor"]}
    expected["queued_at"] = record["queued_at"]
    wrong = client.post(
        f"{url}delete-if-match/", {**expected, "workflow_id": "other"}, format="json"
    )
    assert wrong.status_code == 200 and wrong.json() == {"deleted": False}
    done = client.post(
        f"{url}delete-if-match/", {**expected, "handoff_entry_id": str(handoff.pk)}, format="json"
    )
    assert done.status_code == 200 and done.json() == {"deleted": True}
    assert contents(session) == [] and not PendingMove.objects.filter(session=session).exists()
    again = client.post(f"{url}delete-if-match/", expected, format="json")
    assert again.json() == {"deleted": False}
    details = error(
        client.post(f"{url}delete-if-match/", {"move_id": "m1"}, format="json"), 400, "invalid"
    )["details"]
    assert "queued_at" in details
    other_app = client.get("/api/apps/app-sibling/sessions/pending-moves/")
    assert other_app.status_code == 404


def test_pending_counts__per_task_reserved_excluded_other_apps_zero(client, tree, session, task):
    put(session, "a", "b")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    empty = services.task_create(app=tree["app_child"])
    foreign = services.task_create(app=tree["app_sibling"])
    put(services.session_create(task=foreign), "x")
    ids = [str(task.pk), str(empty.pk), str(foreign.pk)]
    response = client.post(
        "/api/apps/app-child/sessions/pending-counts/", {"tasks": ids}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"counts": {ids[0]: 1, ids[1]: 0, ids[2]: 0}}


@pytest.mark.parametrize(
    "body", [{}, {"tasks": []}, {"tasks": ["x"]}, {"tasks": [str(uuid.uuid4())] * 101}, {"t": 1}]
)
def test_pending_counts__strict_body(client, body):
    response = client.post("/api/apps/app-child/sessions/pending-counts/", body, format="json")
    error(response, 400, "invalid")


def test_schema_documents_the_new_session_endpoints(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    for path in [
        "/api/sessions/{session_id}/queue/take-head/",
        "/api/sessions/{session_id}/queue/restore/",
        "/api/sessions/{session_id}/queue/requeue/",
        "/api/sessions/{session_id}/queue/lifecycle/",
        "/api/sessions/{session_id}/queue/replace/",
        "/api/sessions/{session_id}/queue/purge/",
        "/api/sessions/{session_id}/queue/messages/{message_id}/acknowledge/",
        "/api/sessions/{session_id}/queue/messages/{message_id}/auto-merge/",
        "/api/sessions/{session_id}/pending-move/take/",
        "/api/sessions/{session_id}/pending-move/delete-if-match/",
        "/api/apps/{app}/sessions/pending-moves/",
        "/api/apps/{app}/sessions/pending-counts/",
        "/api/apps/{app}/sessions/blocked/",
        "/api/sessions/{session_id}/queue/unblock/release-reservation/",
        "/api/sessions/{session_id}/queue/unblock/skip-head/",
        "/api/sessions/{session_id}/queue/unblock/resume-auto-run/",
    ]:
        assert path in paths, path
    components = schema["components"]["schemas"]
    assert components["RestoreRequest"]["additionalProperties"] is False
    assert "generations" in components["RestoreRequest"]["properties"]
