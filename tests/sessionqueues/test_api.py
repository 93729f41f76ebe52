"""The session queue REST API (SPEC §4): shapes, status codes and error codes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from principals.models import Role
from sessionqueues import services
from sessionqueues.models import QueuedMessage, Session
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
def task(tree):
    return services.task_create(app=tree["app_child"], title="t")


@pytest.fixture
def session(task):
    return services.session_set_auto_merge(
        session_id=services.session_create(task=task).pk, enabled=False
    )


def q(session: Session) -> str:
    return f"/api/sessions/{session.pk}/queue/"


def post_message(
    client: APIClient, session: Session, content: str = "hello", **body: Any
) -> ApiResponse:
    return client.post(f"{q(session)}messages/", {"content": content, **body}, format="json")


def code(response: ApiResponse) -> str:
    return response.json()["error"]["code"]


# --- tasks and sessions -----------------------------------------------------


def test_task_create_get_and_session_create(client, tree):
    created = client.post("/api/apps/app-child/tasks/", {"title": "Fix"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert {"id", "app", "archived", "generation"} <= set(body)
    assert body["app"] == "app-child" and body["generation"] == 0
    session = client.post(f"/api/tasks/{body['id']}/sessions/")
    assert session.status_code == 201
    assert {"id", "task", "incarnation_id", "auto_run"} <= set(session.json())
    assert session.json()["auto_run"] is True
    detail = client.get(f"/api/tasks/{body['id']}/").json()
    assert [s["id"] for s in detail["sessions"]] == [session.json()["id"]]


def test_task_create__unknown_app_is_404(client):
    assert client.post("/api/apps/nope/tasks/", {}, format="json").status_code == 404


def test_task_create__bad_title_is_400(client):
    response = client.post("/api/apps/app-child/tasks/", {"title": "x" * 300}, format="json")
    assert response.status_code == 400 and "title" in response.json()["error"]["details"]


def test_archive_and_purge(tree, task, session):
    admin = APIClient()
    admin.force_authenticate(member(tree["child"], Role.ADMIN))
    services.entry_insert(session_id=session.pk, entry=entry("a"))
    purged = admin.post(f"/api/tasks/{task.pk}/purge/")
    assert purged.status_code == 200 and purged.json() == {"removed": 1, "generation": 1}
    archived = admin.post(f"/api/tasks/{task.pk}/archive/")
    assert archived.status_code == 200 and archived.json()["archived"] is True


def test_unknown_and_malformed_ids_are_404(client):
    assert client.get(f"/api/tasks/{uuid.uuid4()}/").status_code == 404
    assert client.get("/api/sessions/not-a-uuid/queue/").status_code == 404
    assert code(client.get(f"/api/sessions/{uuid.uuid4()}/queue/")) == "not_found"


# --- queue status and entries -----------------------------------------------


def test_queue_status_shape(client, session):
    post_message(client, session, "a")
    body = client.get(q(session)).json()
    for key in ["entries", "count", "max", "auto_run", "merge_enabled", "generation"]:
        assert key in body
    assert body["count"] == 1 and body["max"] == 10 and body["task_generation"] == 0


def test_queue_status__carries_the_task_and_session_generations(client, session):
    first = post_message(client, session, "a").json()
    post_message(client, session, "b")
    assert client.get(q(session)).json()["generations"] == {"task": 0, "session": 0}
    client.delete(f"{q(session)}messages/{first['id']}/")
    services.queue_purge_task(task_id=session.task_id)
    body = client.get(q(session)).json()
    assert body["generations"] == {"task": 1, "session": 2}
    assert body["generation"] == 2 and body["task_generation"] == 1


def test_message_create__queued_by_is_the_principal(client, editor, session):
    forged = post_message(client, session, "a", queued_by_forged="x")
    assert forged.status_code == 400 and "queued_by_forged" in forged.json()["error"]["details"]
    response = post_message(client, session, "a")
    assert response.status_code == 201
    assert response.json()["queued_by"] == f"user:{editor.pk}"
    assert response.json()["position"] == 1


def test_message_create__queue_full_is_409(client, session):
    with override_settings(SESSIONQUEUES_MAX_PER_SESSION=1):
        post_message(client, session, "a")
        response = post_message(client, session, "b")
    assert response.status_code == 409 and code(response) == "queue_full"


def test_message_create__append_to_tail_joins_with_a_separator(client, session):
    post_message(client, session, "a")
    response = post_message(client, session, "b", append_to_tail=True)
    assert response.status_code == 200 and response.json()["appended"]
    assert contents(session) == ["a\n\n---\n\nb"]


def test_message_create__coalesce_key_replaces(client, session):
    first = post_message(client, session, "a", coalesce_key="k").json()
    second = post_message(client, session, "b", coalesce_key="k")
    assert second.status_code == 200 and second.json()["replaced"]
    assert second.json()["id"] == first["id"]


def test_message_create__auto_merge_answers_the_folded_entry(client, session):
    client.put(f"{q(session)}auto-merge/", {"enabled": True}, format="json")
    post_message(client, session, "a")
    response = post_message(client, session, "b")
    assert response.status_code == 200 and response.json()["merged"]
    assert contents(session) == ["a\n\nb"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "content"),
        ({"content": 5, "attachments": "x"}, "attachments"),
        ({"content": "a", "attachments": [{"type": "file"}]}, "attachments"),
        ({"content": "a", "metadata": [1]}, "metadata"),
        ({"content": "a", "plan_mode": "maybe"}, "plan_mode"),
        ({"content": "a", "queued_by": "server"}, "queued_by"),
        ({"content": "a", "model": "m" * 300}, "model"),
        ({"content": "a", "attachments": [{"type": "f", "data": "x"}] * 21}, "attachments"),
    ],
)
def test_message_create__bad_input_is_400_per_field(client, session, body, field):
    response = client.post(f"{q(session)}messages/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["details"]


def test_message_create__malformed_json_is_400(client, session):
    response = client.post(f"{q(session)}messages/", "{bad", content_type="application/json")
    assert response.status_code == 400 and code(response) == "invalid"


def test_message_create__agent_owner_needs_a_consume_app_token(tree, client, session):
    _, secret = make_token(app=tree["app_child"], scopes=["session:consume"])
    agent = bearer(secret)
    missing = post_message(agent, session, "a", queued_by="agent")
    assert missing.status_code == 400 and "metadata" in missing.json()["error"]["details"]
    ok = post_message(agent, session, "a", queued_by="agent", metadata={"sender_task_id": "t1"})
    assert ok.status_code == 201 and ok.json()["queued_by"] == "agent"
    person = post_message(client, session, "b", queued_by="agent", metadata={"sender_task_id": "t"})
    assert person.status_code == 400 and "queued_by" in person.json()["error"]["details"]


@pytest.fixture
def agent(tree):
    _, secret = make_token(app=tree["app_child"], scopes=["session:consume"])
    return bearer(secret)


def test_entry_create__agent_names_its_sender_task_at_the_top_level(agent, session, task):
    response = post_message(agent, session, "a", queued_by="agent", sender_task_id=str(task.pk))
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["queued_by"] == "agent" and body["metadata"] == {"sender_task_id": str(task.pk)}
    stored = QueuedMessage.objects.get(pk=body["id"])
    assert stored.metadata["sender_task_id"] == str(task.pk)


def test_entry_create__both_sender_forms_are_the_same_sender_for_merging(agent, session, task):
    post_message(agent, session, "a", queued_by="agent", metadata={"sender_task_id": str(task.pk)})
    second = post_message(agent, session, "b", queued_by="agent", sender_task_id=str(task.pk))
    services.entry_merge_up(session_id=session.pk, entry_id=second.json()["id"], queued_by="agent")
    assert contents(session) == ["a\n\nb"]


def test_entry_create__a_bad_top_level_sender_task_is_400(tree, agent, client, session, task):
    other_app_task = services.task_create(app=tree["app_sibling"], title="elsewhere")
    bodies: list[dict[str, Any]] = [
        {"queued_by": "agent", "sender_task_id": "not-a-uuid"},
        {"queued_by": "agent", "sender_task_id": str(uuid.uuid4())},
        {"queued_by": "agent", "sender_task_id": str(other_app_task.pk)},
        {"queued_by": "agent", "sender_task_id": str(task.pk), "metadata": {"sender_task_id": "x"}},
    ]
    for body in bodies:
        response = post_message(agent, session, "a", **body)
        assert response.status_code == 400, body
        assert "sender_task_id" in response.json()["error"]["details"], body
    person = post_message(client, session, "a", sender_task_id=str(task.pk))
    assert person.status_code == 400 and "sender_task_id" in person.json()["error"]["details"]
    assert QueuedMessage.objects.count() == 0


def test_message_patch__owner_edits_and_null_metadata_removes(client, session):
    created = post_message(client, session, "a", metadata={"x": 1, "y": 2}).json()
    response = client.patch(
        f"{q(session)}messages/{created['id']}/",
        {"content": "b", "metadata": {"x": None}},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["content"] == "b" and response.json()["metadata"] == {"y": 2}


def test_message_patch__someone_elses_entry_is_404_and_a_reader_gets_403(tree, client, session):
    theirs = services.entry_insert(session_id=session.pk, entry=entry("a", "user:999")).entry
    url = f"{q(session)}messages/{theirs.pk}/"
    assert client.patch(url, {"content": "x"}, format="json").status_code == 404
    reader = APIClient()
    reader.force_authenticate(member(tree["child"], Role.VIEWER))
    assert reader.patch(url, {"content": "x"}, format="json").status_code == 403
    assert contents(session) == ["a"]


def test_message_patch__empty_body_is_400(client, session):
    created = post_message(client, session, "a").json()
    assert (
        client.patch(f"{q(session)}messages/{created['id']}/", {}, format="json").status_code == 400
    )


def test_message_delete__and_delete_all(client, session, task):
    first = post_message(client, session, "a").json()
    post_message(client, session, "b")
    post_message(client, session, "c")
    assert client.delete(f"{q(session)}messages/{first['id']}/").status_code == 204
    response = client.delete(f"{q(session)}messages/")
    assert response.status_code == 200 and response.json() == {"removed": 2}


def test_message_delete__an_id_of_another_session_is_404(client, session, task):
    other = services.session_create(task=task)
    theirs = services.entry_insert(session_id=other.pk, entry=entry("x")).entry
    response = client.delete(f"{q(session)}messages/{theirs.pk}/")
    assert response.status_code == 404 and code(response) == "not_found"
    assert contents(other) == ["x"]


def test_merge_up__and_its_errors(client, session):
    a = post_message(client, session, "a").json()
    b = post_message(client, session, "b").json()
    head = client.post(f"{q(session)}messages/{a['id']}/merge-up/")
    assert head.status_code == 409 and code(head) == "no_merge_target"
    merged = client.post(f"{q(session)}messages/{b['id']}/merge-up/")
    assert merged.status_code == 200 and merged.json()["content"] == "a\n\nb"
    with override_settings(SESSIONQUEUES_MANUAL_MERGE=False):
        disabled = client.post(f"{q(session)}messages/{a['id']}/merge-up/")
    assert disabled.status_code == 409 and code(disabled) == "merge_disabled"
    missing = client.post(f"{q(session)}messages/{uuid.uuid4()}/merge-up/")
    assert missing.status_code == 404


def test_reorder__and_queue_changed(client, session):
    ids = [post_message(client, session, t).json()["id"] for t in "abc"]
    response = client.post(f"{q(session)}reorder/", {"ids": ids[::-1]}, format="json")
    assert response.status_code == 200
    assert [e["content"] for e in response.json()["entries"]] == ["c", "b", "a"]
    stale = client.post(f"{q(session)}reorder/", {"ids": ids[:2]}, format="json")
    assert stale.status_code == 409 and code(stale) == "queue_changed"
    bad = client.post(f"{q(session)}reorder/", {"ids": ["x"]}, format="json")
    assert bad.status_code == 400 and "ids" in bad.json()["error"]["details"]
    assert contents(session) == ["c", "b", "a"]


def test_send_now__claim_restore_acknowledge(client, session):
    a = post_message(client, session, "a").json()
    post_message(client, session, "b")
    c = post_message(client, session, "c").json()
    body = {"entries": [{"id": c["id"], "content": "c"}, {"id": a["id"], "content": "a"}]}
    claimed = client.post(f"{q(session)}send-now/", body, format="json")
    assert claimed.status_code == 200
    assert claimed.json()["dispatch"]["content"] == "a\n\nc"
    claim = claimed.json()["claim_id"]
    restored = client.post(f"{q(session)}send-now/{claim}/restore/")
    assert restored.status_code == 200
    assert [e["content"] for e in restored.json()["entries"]] == ["a", "b", "c"]
    again = client.post(f"{q(session)}send-now/", body, format="json").json()["claim_id"]
    acked = client.post(f"{q(session)}send-now/{again}/acknowledge/")
    assert acked.status_code == 200 and acked.json() == {"removed": 0}
    assert client.post(f"{q(session)}send-now/{again}/restore/").status_code == 404


def test_send_now__errors(client, session):
    a = post_message(client, session, "a").json()
    drift = client.post(
        f"{q(session)}send-now/", {"entries": [{"id": a["id"], "content": "old"}]}, format="json"
    )
    assert drift.status_code == 409 and code(drift) == "claim_changed"
    empty = client.post(f"{q(session)}send-now/", {"entries": []}, format="json")
    assert empty.status_code == 400
    services.reservation_reserve_for_delivery(session_id=session.pk)
    reserved = client.post(
        f"{q(session)}send-now/", {"entries": [{"id": a["id"], "content": "a"}]}, format="json"
    )
    assert reserved.status_code == 409 and code(reserved) == "reservation_conflict"


def test_auto_run_and_auto_merge(client, session):
    off = client.put(f"{q(session)}auto-run/", {"enabled": False}, format="json")
    assert off.status_code == 200 and off.json()["auto_run"] is False
    merge = client.put(f"{q(session)}auto-merge/", {"enabled": None}, format="json")
    assert merge.status_code == 200 and merge.json()["auto_merge_override"] is None
    merge = client.put(f"{q(session)}auto-merge/", {"enabled": True}, format="json")
    assert merge.json()["auto_merge_override"]["enabled"] is True
    assert client.put(f"{q(session)}auto-run/", {}, format="json").status_code == 400


def test_reserve_ack_release(client, session):
    assert client.post(f"{q(session)}reserve/").status_code == 204
    post_message(client, session, "a")
    post_message(client, session, "b")
    reserved = client.post(f"{q(session)}reserve/")
    assert reserved.status_code == 200 and reserved.json()["message"]["content"] == "a"
    rid = reserved.json()["reservation_id"]
    released = client.post(f"{q(session)}reservations/{rid}/release/")
    assert released.status_code == 200 and released.json()["released"] is True
    assert released.json()["position"] == 1
    again = client.post(f"{q(session)}reservations/{rid}/release/")
    assert again.status_code == 409 and code(again) == "reservation_changed"
    rid = client.post(f"{q(session)}reserve/").json()["reservation_id"]
    assert client.post(f"{q(session)}reservations/{rid}/ack/").status_code == 204
    stale = client.post(f"{q(session)}reservations/{rid}/ack/")
    assert stale.status_code == 409 and code(stale) == "reservation_changed"
    assert contents(session) == ["b"]


def test_reserve__paused_is_409_auto_run_paused(client, session):
    post_message(client, session, "a")
    client.put(f"{q(session)}auto-run/", {"enabled": False}, format="json")
    response = client.post(f"{q(session)}reserve/")
    assert response.status_code == 409 and code(response) == "auto_run_paused"


def test_transfer__same_task_and_across_tasks(client, session, task, tree):
    other = services.session_create(task=task)
    post_message(client, session, "a")
    response = client.post(f"{q(session)}transfer/", {"to_session": str(other.pk)}, format="json")
    assert response.status_code == 200 and response.json()["session"] == str(other.pk)
    assert contents(other) == ["a"]
    foreign = services.session_create(task=services.task_create(app=tree["app_child"]))
    refused = client.post(f"{q(other)}transfer/", {"to_session": str(foreign.pk)}, format="json")
    assert refused.status_code == 409 and code(refused) == "session_identity_mismatch"
    invisible = services.session_create(task=services.task_create(app=tree["app_sibling"]))
    hidden = client.post(f"{q(other)}transfer/", {"to_session": str(invisible.pk)}, format="json")
    assert hidden.status_code == 404
    assert contents(other) == ["a"]


def test_identity_header__stale_incarnation_is_409(client, session):
    response = client.post(
        f"{q(session)}messages/",
        {"content": "a"},
        format="json",
        HTTP_X_SESSION_INCARNATION=str(uuid.uuid4()),
    )
    assert response.status_code == 409 and code(response) == "session_identity_mismatch"
    ok = client.post(
        f"{q(session)}messages/",
        {"content": "a"},
        format="json",
        HTTP_X_SESSION_INCARNATION=str(session.incarnation_id),
    )
    assert ok.status_code == 201
    bad = client.post(
        f"{q(session)}messages/", {"content": "a"}, format="json", HTTP_X_SESSION_INCARNATION="x"
    )
    assert bad.status_code == 400


def test_pending_move_get_put_delete(client, session):
    url = f"/api/sessions/{session.pk}/pending-move/"
    assert client.get(url).status_code == 204
    put = client.put(url, {"move_id": "m1", "workflow_id": "w", "actor": "me"}, format="json")
    assert put.status_code == 200 and put.json()["move_id"] == "m1"
    got = client.get(url).json()
    assert got["workflow_id"] == "w" and got["stale"] is False
    assert client.put(url, {}, format="json").status_code == 400
    assert client.delete(url).status_code == 204
    assert client.get(url).status_code == 204


def test_agent_ready(client, session):
    response = client.put(
        f"/api/sessions/{session.pk}/agent-ready/", {"ready": True}, format="json"
    )
    assert response.status_code == 200 and response.json()["agent_ready"] is True
    assert Session.objects.get(pk=session.pk).agent_ready


def test_schema_documents_every_session_endpoint(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    for path in [
        "/api/apps/{app}/tasks/",
        "/api/tasks/{task_id}/",
        "/api/sessions/{session_id}/queue/messages/{message_id}/merge-up/",
        "/api/sessions/{session_id}/queue/send-now/{claim_id}/restore/",
        "/api/sessions/{session_id}/queue/reservations/{reservation_id}/release/",
        "/api/sessions/{session_id}/pending-move/",
        "/api/sessions/{session_id}/agent-ready/",
    ]:
        assert path in paths, path
    post = paths["/api/sessions/{session_id}/queue/messages/"]["post"]
    assert {"201", "400", "404", "409"} <= set(post["responses"])
    components = schema["components"]["schemas"]
    assert "sender_task_id" in components["EntryCreateRequest"]["properties"]
    status_fields = components["QueueStatus"]["properties"]
    assert {"entries", "count", "max", "auto_run", "merge_enabled", "generations"} <= set(
        status_fields
    )
    assert QueuedMessage.objects.count() == 0
