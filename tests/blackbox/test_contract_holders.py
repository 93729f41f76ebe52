"""Issue 12 points 3, 5, 6 and 8 as a client sees them, over HTTP against the
real server (DEBUG off, a real SECRET_KEY): a cancelled claim is lost to its
holder, the session queue status carries its generations, an agent names its
sender task at the top level, and a batch ack answers each entry for what it
did (the same pair twice; the same id with a wrong token)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error

WORKER = {"worker_id": "bb-worker"}


@pytest.fixture
def queue(world: World) -> str:
    """A fresh queue of ``acme`` (tests see only their own messages)."""
    name = f"holders-{uuid.uuid4().hex[:8]}"
    world.server.manage("create_queue", world.group, name)
    return name


def q_url(world: World, name: str, rest: str = "") -> str:
    return f"/api/groups/{world.group}/queues/{name}/{rest}"


def enqueue_and_claim(http: httpx.Client, world: World, name: str, n: int = 1) -> list[dict]:
    """Enqueue ``n`` messages through the app and claim them: (id, claim_token, …) each."""
    for i in range(n):
        response = http.post(f"/api/apps/{world.app}/queues/{name}/messages/", json={"payload": i})
        assert response.status_code == 201, response.text
    claimed = http.post(q_url(world, name, "claim/"), json={**WORKER, "max_messages": n})
    assert claimed.status_code == 200, claimed.text
    messages = claimed.json()["messages"]
    assert len(messages) == n, messages
    return messages


def held(message: dict) -> dict:
    return {"id": message["id"], "claim_token": message["claim_token"]}


def ack(http: httpx.Client, world: World, name: str, pairs: list[dict]) -> dict:
    response = http.post(q_url(world, name, "ack/"), json={"acks": pairs})
    assert response.status_code == 200, response.text
    return response.json()


# ------------------------------------------------------ point 3: cancel


HOLDER_ACTIONS: dict[str, dict[str, Any]] = {
    "extend": {"visibility_timeout": 30},
    "nack": {"delay_seconds": 0},
    "fail": {"error": "boom"},
    "release": {},
}


def test_cancel__the_holder_of_a_cancelled_claim_has_lost_it(world, queue):
    with world.client(world.app_token) as http:
        (message,) = enqueue_and_claim(http, world, queue)
        cancelled = http.delete(q_url(world, queue, f"messages/{message['id']}/"))
        assert cancelled.status_code == 204, cancelled.text
        for action, extra in HOLDER_ACTIONS.items():
            response = http.post(q_url(world, queue, f"{action}/"), json={**held(message), **extra})
            assert assert_error(response, 409, "lease_lost")["details"]["id"] == message["id"]
        body = ack(http, world, queue, [held(message)])
    assert body["acked"] == 0
    assert body["results"] == [{"id": message["id"], "acked": False, "reason": "lease_lost"}]


def test_holder_actions__a_message_of_another_collection_is_404(world, queue):
    other = f"{queue}-other"
    world.server.manage("create_queue", world.group, other)
    with world.client(world.app_token) as http:
        (message,) = enqueue_and_claim(http, world, other)
        for action, extra in HOLDER_ACTIONS.items():
            response = http.post(q_url(world, queue, f"{action}/"), json={**held(message), **extra})
            assert_error(response, 404, "not_found")
        body = ack(http, world, queue, [held(message)])
        assert body["results"][0]["acked"] is False
        still = http.get(q_url(world, other, f"messages/{message['id']}/"))
    assert still.status_code == 200 and still.json()["state"] == "claimed", still.text


# ------------------------------------------------------ point 8: batch ack


def test_batch_ack__the_same_pair_twice_acks_once(world, queue):
    with world.client(world.app_token) as http:
        (message,) = enqueue_and_claim(http, world, queue)
        body = ack(http, world, queue, [held(message), held(message)])
    assert body["acked"] == 1
    first, second = body["results"]
    assert first == {"id": message["id"], "acked": True, "reason": None}
    assert second["id"] == message["id"] and second["acked"] is False and second["reason"]


@pytest.mark.parametrize("wrong_first", [False, True])
def test_batch_ack__the_same_id_with_a_wrong_token_is_not_acked(world, queue, wrong_first):
    with world.client(world.app_token) as http:
        a, b = enqueue_and_claim(http, world, queue, 2)
        wrong = {"id": a["id"], "claim_token": str(uuid.uuid4())}
        pairs = [wrong, held(a)] if wrong_first else [held(a), wrong]
        body = ack(http, world, queue, [*pairs, held(b)])
        gone = http.get(q_url(world, queue, f"messages/{a['id']}/"))
    outcome = {True: (True, None), False: (False, "lease_lost")}
    expected = [outcome[p is not wrong] for p in pairs] + [(True, None)]
    assert [(r["id"], r["acked"], r["reason"]) for r in body["results"]] == [
        (a["id"], *expected[0]), (a["id"], *expected[1]), (b["id"], *expected[2])
    ]  # fmt: skip
    assert body["acked"] == 2
    assert_error(gone, 404, "not_found")


# ---------------------------------------------- points 5 and 6: sessions


@pytest.fixture
def fresh_session(world: World) -> dict[str, str]:
    """A task of ``shop`` and an empty session of it (no tail to merge into)."""
    with world.client(world.app_token) as http:
        task = http.post(f"/api/apps/{world.app}/tasks/", json={"title": "holders"})
        assert task.status_code == 201, task.text
        session = http.post(f"/api/tasks/{task.json()['id']}/sessions/")
        assert session.status_code == 201, session.text
    return {"task": task.json()["id"], "session": session.json()["id"]}


def test_queue_status__generations_move_after_a_destructive_edit_and_a_purge(world, fresh_session):
    S = f"/api/sessions/{fresh_session['session']}/queue/"
    with world.client(world.editor_token) as http:
        first = http.post(f"{S}messages/", json={"content": "a"})
        assert first.status_code == 201, first.text
        before = http.get(S).json()["generations"]
        assert set(before) == {"task", "session"}
        deleted = http.delete(f"{S}messages/{first.json()['id']}/")
        assert deleted.status_code in (200, 204), deleted.text
        edited = http.get(S).json()["generations"]
        assert edited["session"] > before["session"] and edited["task"] == before["task"]
    with world.client(world.admin_token) as admin:  # a purge is an admin's
        purged = admin.post(f"/api/tasks/{fresh_session['task']}/purge/")
    assert purged.status_code == 200, purged.text
    with world.client(world.editor_token) as http:
        after = http.get(S).json()["generations"]
    assert after["task"] > edited["task"] and after["session"] > edited["session"]


@pytest.fixture(scope="module")
def agent_token(world: World) -> str:
    """A token of ``shop`` with ``session:consume`` only: the agent."""
    return world.server.create_token(app=world.app, scopes="session:consume")


def test_entry_create__an_agent_names_its_sender_task_at_the_top_level(
    world, fresh_session, agent_token
):
    S = f"/api/sessions/{fresh_session['session']}/queue/messages/"
    sender = fresh_session["task"]
    with world.client(agent_token) as http:
        response = http.post(
            S, json={"content": "from a task", "queued_by": "agent", "sender_task_id": sender}
        )
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["queued_by"] == "agent" and body["metadata"] == {"sender_task_id": sender}
    with world.client(world.app_token) as http:
        status = http.get(f"/api/sessions/{fresh_session['session']}/queue/")
    assert status.status_code == 200, status.text
    entries = status.json()["entries"]
    assert [e["metadata"] for e in entries if e["id"] == body["id"]] == [{"sender_task_id": sender}]


def test_entry_create__the_metadata_form_of_the_sender_still_works(
    world, fresh_session, agent_token
):
    S = f"/api/sessions/{fresh_session['session']}/queue/messages/"
    meta = {"sender_task_id": fresh_session["task"]}
    with world.client(agent_token) as http:
        response = http.post(S, json={"content": "x", "queued_by": "agent", "metadata": meta})
    assert response.status_code == 201, response.text
    assert response.json()["metadata"] == meta


@pytest.mark.parametrize("sender", ["not-a-uuid", "unknown"])
def test_entry_create__a_bad_sender_task_is_400_naming_it(
    world, fresh_session, agent_token, sender
):
    S = f"/api/sessions/{fresh_session['session']}/queue/messages/"
    sender = str(uuid.uuid4()) if sender == "unknown" else sender
    with world.client(agent_token) as http:
        response = http.post(
            S, json={"content": "x", "queued_by": "agent", "sender_task_id": sender}
        )
        assert "sender_task_id" in assert_error(response, 400, "invalid")["details"]
    with world.client(world.app_token) as http:
        status = http.get(f"/api/sessions/{fresh_session['session']}/queue/")
    assert status.json()["count"] == 0
