"""The remaining session-queue operations and the blocked-heads view over HTTP
against a real server (DEBUG off, CSRF on; issue 20 points 2 and 4): each new
endpoint's effect, strict body, identity check and, where it has one,
generation fence; the session-cookie CSRF refusal on one of them."""

from __future__ import annotations

import uuid
from contextlib import closing
from typing import Any

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error
from tests.blackbox.test_routing import _logged_in


def fresh_session(http: httpx.Client, *texts: str) -> tuple[str, str]:
    """(task id, session id) of a new task and session of ``shop``, holding
    ``texts`` queued by the client's principal."""
    task = http.post("/api/apps/shop/tasks/", json={"title": "bb-ops"})
    assert task.status_code == 201, task.text
    session = http.post(f"/api/tasks/{task.json()['id']}/sessions/")
    assert session.status_code == 201, session.text
    sid = session.json()["id"]
    http.put(f"/api/sessions/{sid}/queue/auto-merge/", json={"enabled": False})
    for text in texts:
        added = http.post(f"/api/sessions/{sid}/queue/messages/", json={"content": text})
        assert added.status_code == 201, added.text
    return task.json()["id"], sid


def contents(http: httpx.Client, sid: str) -> list[str]:
    status = http.get(f"/api/sessions/{sid}/queue/")
    assert status.status_code == 200, status.text
    return [e["content"] for e in status.json()["entries"]]


STALE = {"X-Session-Incarnation": str(uuid.uuid4())}


@pytest.fixture
def runtime(world: World) -> Any:
    with world.client(world.app_token) as http:
        yield http


def test_take_head_then_restore(runtime):
    _, sid = fresh_session(runtime, "a", "b")
    Q = f"/api/sessions/{sid}/queue"
    assert_error(runtime.post(f"{Q}/take-head/", headers=STALE), 409, "session_identity_mismatch")
    taken = runtime.post(f"{Q}/take-head/")
    assert taken.status_code == 200, taken.text
    body = taken.json()
    assert body["message"]["content"] == "a" and contents(runtime, sid) == ["b"]
    restore = {**body["message"], "generations": body["generations"]}
    bad = runtime.post(f"{Q}/restore/", json={**restore, "position": "1"})
    assert "position" in assert_error(bad, 400, "invalid")["details"]
    unknown = runtime.post(f"{Q}/restore/", json={**restore, "reserved": False})
    assert "reserved" in assert_error(unknown, 400, "invalid")["details"]
    moved = runtime.post(f"{Q}/restore/", json={**restore, "generations": {"session": 99}})
    assert_error(moved, 409, "queue_changed")
    restored = runtime.post(f"{Q}/restore/", json=restore)
    assert restored.status_code == 200, restored.text
    assert restored.json()["id"] == body["message"]["id"] and contents(runtime, sid) == ["a", "b"]
    _, empty = fresh_session(runtime)
    assert runtime.post(f"/api/sessions/{empty}/queue/take-head/").status_code == 204


def test_requeue_goes_before_the_head(runtime):
    _, sid = fresh_session(runtime, "a")
    Q = f"/api/sessions/{sid}/queue"
    response = runtime.post(f"{Q}/requeue/", json={"content": "retry", "coalesce_key": "r"})
    assert response.status_code == 201, response.text
    again = runtime.post(f"{Q}/requeue/", json={"content": "retry 2", "coalesce_key": "r"})
    assert again.status_code == 200 and again.json()["replaced"] is True
    assert contents(runtime, sid) == ["retry 2", "a"]
    bad = runtime.post(f"{Q}/requeue/", json={"content": "x", "position": 1})
    assert "position" in assert_error(bad, 400, "invalid")["details"]
    stale = runtime.post(f"{Q}/requeue/", json={"content": "x"}, headers=STALE)
    assert_error(stale, 409, "session_identity_mismatch")


def test_lifecycle_insert_accepted_then_refused_after_a_purge(world, runtime):
    tid, sid = fresh_session(runtime)
    Q = f"/api/sessions/{sid}/queue"
    body = {"content": "CI failed", "coalesce_key": "ci", "generation": 0}
    first = runtime.post(f"{Q}/lifecycle/", json=body)
    assert first.status_code == 201, first.text
    assert first.json()["accepted"] is True and first.json()["entry"]["durable"] is True
    with world.client(world.admin_token) as admin:
        assert admin.post(f"/api/tasks/{tid}/purge/").json()["generation"] == 1
    refused = runtime.post(f"{Q}/lifecycle/", json=body)
    assert refused.status_code == 200
    assert refused.json() == {"accepted": False, "replaced": False, "entry": None}
    missing = runtime.post(f"{Q}/lifecycle/", json={"content": "x", "generation": 1})
    assert "coalesce_key" in assert_error(missing, 400, "invalid")["details"]
    assert contents(runtime, sid) == []


def test_replace_session_with_a_snapshot(runtime):
    _, source = fresh_session(runtime, "a", "b")
    snapshot = []
    for _ in range(2):
        snapshot.append(runtime.post(f"/api/sessions/{source}/queue/take-head/").json()["message"])
    _, sid = fresh_session(runtime, "old")
    Q = f"/api/sessions/{sid}/queue"
    move = {"move_id": "m1", "workflow_id": "w", "workflow_step_id": "s", "actor": "bb"}
    replaced = runtime.post(f"{Q}/replace/", json={"entries": snapshot, "pending_move": move})
    assert replaced.status_code == 200, replaced.text
    assert [e["id"] for e in replaced.json()["entries"]] == [m["id"] for m in snapshot]
    assert runtime.get(f"/api/sessions/{sid}/pending-move/").json()["move_id"] == "m1"
    twice = runtime.post(f"{Q}/replace/", json={"entries": [snapshot[0], snapshot[0]]})
    assert_error(twice, 409, "queue_changed")
    bad = runtime.post(f"{Q}/replace/", json={"entries": "x"})
    assert "entries" in assert_error(bad, 400, "invalid")["details"]
    assert contents(runtime, sid) == ["a", "b"]


def test_acknowledge_by_id_and_auto_merge(runtime):
    _, sid = fresh_session(runtime, "a", "b", "c")
    Q = f"/api/sessions/{sid}/queue"
    reserved = runtime.post(f"{Q}/reserve/").json()["message"]
    entries = runtime.get(f"{Q}/").json()["entries"]
    not_reserved = runtime.post(f"{Q}/messages/{entries[0]['id']}/acknowledge/")
    assert_error(not_reserved, 409, "reservation_changed")
    acked = runtime.post(f"{Q}/messages/{reserved['id']}/acknowledge/")
    assert acked.status_code == 204, acked.text
    merged = runtime.post(f"{Q}/messages/{entries[1]['id']}/auto-merge/")
    assert merged.status_code == 200 and merged.json()["merged"] is True
    assert contents(runtime, sid) == ["b\n\nc"]
    body = runtime.post(f"{Q}/messages/{entries[1]['id']}/auto-merge/", json={"x": 1})
    assert "x" in assert_error(body, 400, "invalid")["details"]


def test_purge_session_is_for_task_admins(world, runtime):
    _, sid = fresh_session(runtime, "a")
    with world.client(world.editor_token) as editor:
        assert_error(editor.post(f"/api/sessions/{sid}/queue/purge/"), 403, "permission_denied")
    with world.client(world.admin_token) as admin:
        stale = admin.post(f"/api/sessions/{sid}/queue/purge/", headers=STALE)
        assert_error(stale, 409, "session_identity_mismatch")
        purged = admin.post(f"/api/sessions/{sid}/queue/purge/")
    assert purged.status_code == 200 and purged.json() == {"removed": 1}


def test_pending_moves_take_list_and_delete_if_match(runtime):
    _, sid = fresh_session(runtime, "handoff")
    handoff = runtime.get(f"/api/sessions/{sid}/queue/").json()["entries"][0]["id"]
    url = f"/api/sessions/{sid}/pending-move/"
    runtime.put(url, json={"move_id": "m1"})
    taken = runtime.post(f"{url}take/")
    assert taken.status_code == 200 and taken.json()["move_id"] == "m1"
    assert runtime.post(f"{url}take/").status_code == 204
    runtime.put(url, json={"move_id": "m2", "workflow_id": "w"})
    pages = runtime.get("/api/apps/shop/sessions/pending-moves/", params={"page_size": 500})
    assert pages.status_code == 200, pages.text
    record = next(r for r in pages.json()["results"] if r["session"] == sid)
    expected = {k: record[k] for k in ("move_id", "workflow_id", "workflow_step_id", "actor")}
    expected["queued_at"] = record["queued_at"]
    stale = runtime.post(f"{url}delete-if-match/", json=expected, headers=STALE)
    assert_error(stale, 409, "session_identity_mismatch")
    deleted = runtime.post(f"{url}delete-if-match/", json={**expected, "handoff_entry_id": handoff})
    assert deleted.status_code == 200 and deleted.json() == {"deleted": True}
    assert contents(runtime, sid) == []
    bad = runtime.post(f"{url}delete-if-match/", json={**expected, "stale": False})
    assert "stale" in assert_error(bad, 400, "invalid")["details"]


def test_pending_counts_for_a_task_list(runtime):
    tid, _ = fresh_session(runtime, "a", "b")
    other, _ = fresh_session(runtime)
    counts = runtime.post(
        "/api/apps/shop/sessions/pending-counts/", json={"tasks": [tid, other, str(uuid.uuid4())]}
    )
    assert counts.status_code == 200, counts.text
    assert list(counts.json()["counts"].values()) == [2, 0, 0]
    bad = runtime.post("/api/apps/shop/sessions/pending-counts/", json={"tasks": ["x"]})
    assert "tasks" in assert_error(bad, 400, "invalid")["details"]


def blocked_row(http: httpx.Client, sid: str, **params: Any) -> dict[str, Any] | None:
    """The blocked-list row of ``sid`` (walking every page), or None."""
    url: str | None = "/api/apps/shop/sessions/blocked/"
    query: dict[str, Any] | None = {"page_size": 500, **params}
    while url:
        page = http.get(url, params=query)
        assert page.status_code == 200, page.text
        for row in page.json()["results"]:
            if row["session"] == sid:
                return row
        url, query = page.json()["next"], None
    return None


def test_blocked_heads_and_the_audited_actions(world, runtime):
    _, sid = fresh_session(runtime, "a", "b", "c")
    Q = f"/api/sessions/{sid}/queue"
    assert blocked_row(runtime, sid) is None
    runtime.put(f"{Q}/auto-run/", json={"enabled": False})
    row = blocked_row(runtime, sid)
    assert row is not None and [r["reason"] for r in row["reasons"]] == ["auto_run_paused"]
    assert row["head"]["content"] == "a" and row["waiting"] == 3
    reason_only = blocked_row(runtime, sid, reason="reservation_stuck", min_age=0)
    assert reason_only is None
    bad = runtime.get("/api/apps/shop/sessions/blocked/", params={"min_age": "soon"})
    assert "min_age" in assert_error(bad, 400, "invalid")["details"]

    with world.client(world.editor_token) as editor:
        resumed = editor.post(f"{Q}/unblock/resume-auto-run/", json={"note": "bb"})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["action"] == "resume_auto_run" and resumed.json()["via"] == "rest"
        reservation = runtime.post(f"{Q}/reserve/").json()["reservation_id"]
        stuck = blocked_row(runtime, sid, min_age=0, reason="reservation_stuck")
        assert stuck is not None
        (held,) = [r for r in stuck["reasons"] if r["reason"] == "reservation_stuck"]
        assert held["details"]["reservations"][0]["reservation_id"] == reservation
        released = editor.post(
            f"{Q}/unblock/release-reservation/", json={"reservation_id": reservation}
        )
        assert released.status_code == 200 and released.json()["details"]["released"] is True
        again = editor.post(
            f"{Q}/unblock/release-reservation/", json={"reservation_id": reservation}
        )
        assert_error(again, 409, "reservation_changed")
        head = runtime.get(f"{Q}/").json()["entries"][0]["id"]
        skipped = editor.post(f"{Q}/unblock/skip-head/", json={"head_id": head})
        assert skipped.status_code == 200 and skipped.json()["entry_id"] == head
        moved = editor.post(f"{Q}/unblock/skip-head/", json={"head_id": head})
        assert_error(moved, 409, "queue_changed")
        unknown = editor.post(f"{Q}/unblock/resume-auto-run/", json={"force": True})
        assert "force" in assert_error(unknown, 400, "invalid")["details"]
        stale = editor.post(f"{Q}/unblock/resume-auto-run/", json={}, headers=STALE)
        assert_error(stale, 409, "session_identity_mismatch")
    assert contents(runtime, sid) == ["b", "a", "c"]


def test_csrf__a_session_cookie_action_needs_the_token(world, runtime):
    _, sid = fresh_session(runtime, "a")
    url = f"/api/sessions/{sid}/queue/unblock/resume-auto-run/"
    with closing(_logged_in(world, "editor")) as http:
        refused = http.post(url, json={})
        assert "CSRF" in assert_error(refused, 403, "permission_denied")["message"]
        allowed = http.post(url, json={}, headers={"X-CSRFToken": http.cookies["csrftoken"]})
    assert allowed.status_code == 200, allowed.text
