"""Authorisation matrix of the session queue API: every principal kind against
every endpoint; refused requests see nothing and change nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from principals.authz import Capability as C
from principals.models import Role
from sessionqueues import services
from sessionqueues.models import AuditRecord, PendingMove, QueuedMessage, Session, Task
from tests.conftest import bearer
from tests.factories import UserFactory, make_token, member
from tests.sessionqueues.conftest import entry

pytestmark = pytest.mark.django_db


@dataclass
class Ctx:
    app: Any
    task: Task
    session: Session
    other: Session
    first: QueuedMessage
    second: QueuedMessage
    reserved: QueuedMessage


# principal kind -> the session capabilities it holds (None: 401)
HOLDS: dict[str, set[C] | None] = {
    "anonymous": None,
    "bad_token": None,
    "non_member": set(),
    "viewer": {C.SESSION_READ},
    "editor": {C.SESSION_READ, C.SESSION_CREATE, C.SESSION_EDIT, C.SESSION_CONSUME},
    "admin": {C.SESSION_READ, C.SESSION_CREATE, C.SESSION_EDIT, C.SESSION_CONSUME, C.TASK_ADMIN},
    "app_read": {C.SESSION_READ},
    "app_write": {C.SESSION_CREATE, C.SESSION_EDIT},
    "app_consume": {C.SESSION_CONSUME},
    "app_queue_only": set(),
    "other_app": set(),
}


def client_for(kind: str, tree: dict[str, Any]) -> tuple[APIClient, str]:
    """An API client acting as ``kind`` and the label it queues entries under."""
    app = tree["app_child"]
    if kind == "anonymous":
        return APIClient(), "user:0"
    if kind == "bad_token":
        return bearer("not-a-token"), "user:0"
    if kind.startswith("app_") or kind == "other_app":
        scopes = {
            "app_read": ["session:read"],
            "app_write": ["session:write"],
            "app_consume": ["session:consume"],
            "app_queue_only": ["queue:read", "queue:write"],
            "other_app": ["session:read", "session:write", "session:consume"],
        }[kind]
        target = tree["app_sibling"] if kind == "other_app" else app
        _, secret = make_token(app=target, scopes=scopes)
        return bearer(secret), f"app:{target.slug}"
    user = (
        UserFactory()
        if kind == "non_member"
        else member(
            tree["child"], {"viewer": Role.VIEWER, "editor": Role.EDITOR, "admin": Role.ADMIN}[kind]
        )
    )
    client = APIClient()
    client.force_authenticate(user)
    return client, f"user:{user.pk}"


def build(tree: dict[str, Any], label: str) -> Ctx:
    app = tree["app_child"]
    task = services.task_create(app=app, title="t")
    session = services.session_set_auto_merge(
        session_id=services.session_create(task=task).pk, enabled=False
    )
    other = services.session_create(task=task)
    first_in = services.entry_insert(session_id=session.pk, entry=entry("r", label)).entry
    reserved, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert reserved is not None
    assert reserved.pk == first_in.pk
    first = services.entry_insert(session_id=session.pk, entry=entry("a", label)).entry
    second = services.entry_insert(session_id=session.pk, entry=entry("b", label)).entry
    services.pending_move_set(session_id=session.pk, move={"move_id": "m1"})
    return Ctx(app, task, session, other, first, second, reserved)


Q = "/api/sessions/{s}/queue/"

# name -> (capability, success status, request builder)
ENDPOINTS: dict[str, tuple[C, int, Callable[[Ctx], tuple[str, str, Any]]]] = {
    "task_create": (
        C.SESSION_CREATE,
        201,
        lambda c: ("post", f"/api/apps/{c.app.slug}/tasks/", {"title": "x"}),
    ),
    "task_get": (C.SESSION_READ, 200, lambda c: ("get", f"/api/tasks/{c.task.pk}/", None)),
    "session_create": (
        C.SESSION_CREATE,
        201,
        lambda c: ("post", f"/api/tasks/{c.task.pk}/sessions/", None),
    ),
    "task_archive": (
        C.TASK_ADMIN,
        200,
        lambda c: ("post", f"/api/tasks/{c.task.pk}/archive/", None),
    ),
    "task_purge": (
        C.TASK_ADMIN,
        200,
        lambda c: ("post", f"/api/tasks/{c.task.pk}/purge/", None),
    ),
    "queue_get": (C.SESSION_READ, 200, lambda c: ("get", Q.format(s=c.session.pk), None)),
    "entry_create": (
        C.SESSION_EDIT,
        201,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}messages/",
            {"content": "new", "model": "other"},
        ),
    ),
    "entry_patch": (
        C.SESSION_EDIT,
        200,
        lambda c: ("patch", f"{Q.format(s=c.session.pk)}messages/{c.first.pk}/", {"content": "z"}),
    ),
    "entry_delete": (
        C.SESSION_EDIT,
        204,
        lambda c: ("delete", f"{Q.format(s=c.session.pk)}messages/{c.first.pk}/", None),
    ),
    "entries_delete_all": (
        C.SESSION_EDIT,
        200,
        lambda c: ("delete", f"{Q.format(s=c.session.pk)}messages/", None),
    ),
    "merge_up": (
        C.SESSION_EDIT,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}messages/{c.second.pk}/merge-up/", None),
    ),
    "reorder": (
        C.SESSION_EDIT,
        200,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}reorder/",
            {"ids": [str(c.second.pk), str(c.first.pk)]},
        ),
    ),
    "send_now": (
        C.SESSION_EDIT,
        200,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}send-now/",
            {"entries": [{"id": str(c.first.pk), "content": "a"}]},
        ),
    ),
    "auto_run": (
        C.SESSION_EDIT,
        200,
        lambda c: ("put", f"{Q.format(s=c.session.pk)}auto-run/", {"enabled": False}),
    ),
    "auto_merge": (
        C.SESSION_EDIT,
        200,
        lambda c: ("put", f"{Q.format(s=c.session.pk)}auto-merge/", {"enabled": True}),
    ),
    "reserve": (
        C.SESSION_CONSUME,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}reserve/", None),
    ),
    "reservation_ack": (
        C.SESSION_CONSUME,
        204,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}reservations/{c.reserved.reservation_id}/ack/",
            None,
        ),
    ),
    "reservation_release": (
        C.SESSION_CONSUME,
        200,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}reservations/{c.reserved.reservation_id}/release/",
            None,
        ),
    ),
    "transfer": (
        C.SESSION_EDIT,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}transfer/", {"to_session": str(c.other.pk)}),
    ),
    "pending_get": (
        C.SESSION_READ,
        200,
        lambda c: ("get", f"/api/sessions/{c.session.pk}/pending-move/", None),
    ),
    "pending_put": (
        C.SESSION_EDIT,
        200,
        lambda c: ("put", f"/api/sessions/{c.session.pk}/pending-move/", {"move_id": "m2"}),
    ),
    "pending_delete": (
        C.SESSION_EDIT,
        204,
        lambda c: ("delete", f"/api/sessions/{c.session.pk}/pending-move/", None),
    ),
    "agent_ready": (
        C.SESSION_CONSUME,
        200,
        lambda c: ("put", f"/api/sessions/{c.session.pk}/agent-ready/", {"ready": True}),
    ),
    # The remaining operations (issue 20 point 2).
    "take_head": (
        C.SESSION_CONSUME,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}take-head/", None),
    ),
    "restore": (
        C.SESSION_CONSUME,
        200,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}restore/",
            {"id": str(uuid.uuid4()), "position": 9, "content": "back"},
        ),
    ),
    "requeue": (
        C.SESSION_CONSUME,
        201,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}requeue/", {"content": "again"}),
    ),
    "lifecycle": (
        C.SESSION_CONSUME,
        201,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}lifecycle/",
            {"content": "ci", "coalesce_key": "ci", "generation": 0},
        ),
    ),
    "replace": (
        C.SESSION_CONSUME,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}replace/", {"entries": []}),
    ),
    "acknowledge_by_id": (
        C.SESSION_CONSUME,
        204,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}messages/{c.reserved.pk}/acknowledge/",
            None,
        ),
    ),
    "auto_merge_up": (
        C.SESSION_EDIT,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}messages/{c.second.pk}/auto-merge/", None),
    ),
    "session_purge": (
        C.TASK_ADMIN,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}purge/", None),
    ),
    "pending_take": (
        C.SESSION_EDIT,
        200,
        lambda c: ("post", f"/api/sessions/{c.session.pk}/pending-move/take/", None),
    ),
    "pending_delete_if_match": (
        C.SESSION_EDIT,
        200,
        lambda c: (
            "post",
            f"/api/sessions/{c.session.pk}/pending-move/delete-if-match/",
            {
                "move_id": "m1",
                "workflow_id": "",
                "workflow_step_id": "",
                "actor": "",
                "queued_at": "2020-01-01T00:00:00Z",
            },
        ),
    ),
    "pending_moves_list": (
        C.SESSION_READ,
        200,
        lambda c: ("get", f"/api/apps/{c.app.slug}/sessions/pending-moves/", None),
    ),
    "pending_counts": (
        C.SESSION_READ,
        200,
        lambda c: (
            "post",
            f"/api/apps/{c.app.slug}/sessions/pending-counts/",
            {"tasks": [str(c.task.pk)]},
        ),
    ),
    # Blocked heads (issue 20 point 4).
    "blocked_list": (
        C.SESSION_READ,
        200,
        lambda c: ("get", f"/api/apps/{c.app.slug}/sessions/blocked/", None),
    ),
    "unblock_release": (
        C.SESSION_CONSUME,
        200,
        lambda c: (
            "post",
            f"{Q.format(s=c.session.pk)}unblock/release-reservation/",
            {"reservation_id": str(c.reserved.reservation_id)},
        ),
    ),
    "unblock_skip": (
        C.SESSION_EDIT,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}unblock/skip-head/", {}),
    ),
    "unblock_resume": (
        C.SESSION_EDIT,
        200,
        lambda c: ("post", f"{Q.format(s=c.session.pk)}unblock/resume-auto-run/", {}),
    ),
}


def state() -> Any:
    """Everything a refused request must leave untouched."""
    return (
        sorted(
            QueuedMessage.objects.values_list(
                "id", "session_id", "position", "content", "reservation_id", "metadata"
            ),
            key=str,
        ),
        sorted(
            Session.objects.values_list(
                "id", "auto_run", "auto_merge", "agent_ready", "generation"
            ),
            key=str,
        ),
        sorted(Task.objects.values_list("id", "archived", "generation"), key=str),
        sorted(PendingMove.objects.values_list("session_id", "move_id"), key=str),
        list(AuditRecord.objects.values_list("id", flat=True)),
    )


def expected_status(kind: str, capability: C, success: int) -> int:
    holds = HOLDS[kind]
    if holds is None:
        return 401
    if capability in holds:
        return success
    return 403 if holds else 404


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize("kind", list(HOLDS))
def test_authorisation_matrix(tree, kind, endpoint):
    client, label = client_for(kind, tree)
    ctx = build(tree, label)
    capability, success, make = ENDPOINTS[endpoint]
    method, url, body = make(ctx)
    before = state()
    response = getattr(client, method)(url, body, format="json")
    wanted = expected_status(kind, capability, success)
    assert response.status_code == wanted, (response.status_code, response.content)
    if wanted in (401, 403, 404):
        code = {401: "not_authenticated", 403: "permission_denied", 404: "not_found"}[wanted]
        assert response.json()["error"]["code"] == code
        assert state() == before
        assert "content" not in response.content.decode() or wanted == 401
