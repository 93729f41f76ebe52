"""The group-queue API of SPEC §4: each endpoint's happy path and its error codes."""

from __future__ import annotations

import uuid

import pytest

from groupqueues import services
from groupqueues.models import Collection, Message
from tests.groupqueues.api_helpers import (
    ADMIN,
    EDITOR,
    VIEWER,
    app_client,
    assert_error,
    q_url,
    user_client,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs")


@pytest.fixture
def editor(tree):
    return user_client(tree["child"], EDITOR)


@pytest.fixture
def admin(tree):
    return user_client(tree["child"], ADMIN)


@pytest.fixture
def viewer(tree):
    return user_client(tree["child"], VIEWER)


def post(client, url, body):
    return client.post(url, body, format="json")


def enqueue(client, group, body=None, name="jobs"):
    response = post(client, q_url(group, name, "messages/"), body or {"payload": {"n": 1}})
    assert response.status_code == 201, response.content
    return response.json()["id"]


def claim(client, group, n=1, **extra):
    body = {"worker_id": "w1", "max_messages": n, **extra}
    response = post(client, q_url(group, rest="claim/"), body)
    assert response.status_code == 200, response.content
    return response.json()["messages"]


# ---------------------------------------------------------------- collections


def test_collections__list_with_stats(tree, queue, viewer):
    services.collection_create(group=tree["child"], name="other", kind="kv")
    services.message_enqueue(collection=queue, payload=1, enqueued_by="x")
    response = viewer.get(f"/api/groups/{tree['child'].slug}/queues/")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1 and body["next"] is None
    (item,) = body["results"]
    assert item["name"] == "jobs" and item["kind"] == "queue" and item["group"] == "child"
    assert item["stats"]["depth"] == 1 and item["stats"]["depth_pending"] == 1


def test_collections__by_group_id(tree, queue, viewer):
    response = viewer.get(f"/api/groups/{tree['child'].pk}/queues/jobs/")
    assert response.status_code == 200 and response.json()["name"] == "jobs"


def test_collections__unknown_group_is_404(viewer):
    assert_error(viewer.get("/api/groups/nope/queues/"), 404, "not_found")


def test_collection_create__201_with_settings_and_stats(tree, admin):
    body = {"name": "mail.out", "visibility_timeout": 60, "max_depth": 10, "paused": True}
    response = post(admin, f"/api/groups/{tree['child'].slug}/queues/", body)
    assert response.status_code == 201, response.content
    got = response.json()
    assert got["name"] == "mail.out" and got["visibility_timeout"] == 60
    assert got["max_depth"] == 10 and got["paused"] is True
    assert got["default_max_attempts"] == 3 and got["max_payload_bytes"] == 256 * 1024
    assert got["retry_backoff_base"] == 1.0 and got["dead_retention"] == 7 * 24 * 3600
    assert got["stats"] == {
        "depth": 0, "depth_pending": 0, "delayed": 0, "in_flight": 0, "dead": 0,
        "oldest_pending_age_seconds": None, "waiting_behind_key": 0, "waiting_behind_limit": 0,
    }  # fmt: skip


def test_collection_create__duplicate_is_409(tree, queue, admin):
    response = post(admin, f"/api/groups/{tree['child'].slug}/queues/", {"name": "jobs"})
    assert_error(response, 409, "already_exists")


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "name"),
        ({"name": "bad name"}, "name"),
        ({"name": "x" * 65}, "name"),
        ({"name": "q", "kind": "kv"}, "kind"),
        ({"name": "q", "visibility_timeout": 0}, "visibility_timeout"),
        ({"name": "q", "visibility_timeout": 43201}, "visibility_timeout"),
        ({"name": "q", "default_max_attempts": "3"}, "default_max_attempts"),
        ({"name": "q", "max_depth": 0}, "max_depth"),
        ({"name": "q", "max_depth": 2**40}, "max_depth"),
        ({"name": "q", "paused": "yes"}, "paused"),
        ({"name": "q", "retry_backoff_base": 10, "retry_backoff_max": 1}, "retry_backoff_max"),
    ],
)
def test_collection_create__invalid_is_400_with_field(tree, admin, body, field):
    response = post(admin, f"/api/groups/{tree['child'].slug}/queues/", body)
    assert field in assert_error(response, 400, "invalid")["details"]
    assert not Collection.objects.exists()


def test_collection_create__editor_is_403(tree, editor):
    response = post(editor, f"/api/groups/{tree['child'].slug}/queues/", {"name": "q"})
    assert_error(response, 403, "permission_denied")


def test_collection_get__settings_and_stats(tree, queue, viewer):
    response = viewer.get(q_url(tree["child"]))
    assert response.status_code == 200
    assert response.json()["visibility_timeout"] == 30 and "stats" in response.json()


def test_collection_get__unknown_is_collection_not_found(tree, queue, viewer):
    assert_error(viewer.get(q_url(tree["child"], "nope")), 404, "collection_not_found")
    assert_error(viewer.get("/api/groups/nope/queues/jobs/"), 404, "collection_not_found")


def test_collection_get__other_kinds_are_not_queues(tree, viewer):
    services.collection_create(group=tree["child"], name="kv1", kind="kv")
    assert_error(viewer.get(q_url(tree["child"], "kv1")), 404, "collection_not_found")


def test_collection_patch__settings_pause_and_resume(tree, queue, admin):
    response = admin.patch(q_url(tree["child"]), {"paused": True, "max_depth": 5}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["paused"] is True and response.json()["max_depth"] == 5
    queue.refresh_from_db()
    assert queue.paused and queue.max_depth == 5
    response = admin.patch(
        q_url(tree["child"]), {"paused": False, "max_depth": None}, format="json"
    )
    assert response.json()["paused"] is False and response.json()["max_depth"] is None


def test_collection_patch__invalid_is_400(tree, queue, admin):
    response = admin.patch(q_url(tree["child"]), {"visibility_timeout": -1}, format="json")
    assert "visibility_timeout" in assert_error(response, 400, "invalid")["details"]
    queue.refresh_from_db()
    assert queue.visibility_timeout == 30


def test_collection_patch__editor_is_403(tree, queue, editor):
    response = editor.patch(q_url(tree["child"]), {"paused": True}, format="json")
    assert_error(response, 403, "permission_denied")
    queue.refresh_from_db()
    assert not queue.paused


# ------------------------------------------------------------------- enqueue


def test_enqueue__201_with_id_and_enqueued_by_from_the_principal(tree, queue, editor):
    body = {"payload": {"a": [1, 2]}, "priority": 5, "delay_seconds": 0, "max_attempts": 2,
            "expires_in_seconds": 60}  # fmt: skip
    forged = post(editor, q_url(tree["child"], rest="messages/"), {**body, "enqueued_by": "x"})
    assert "enqueued_by" in assert_error(forged, 400, "invalid")["details"]
    message_id = enqueue(editor, tree["child"], body)
    message = Message.objects.get(id=message_id)
    assert message.payload == {"a": [1, 2]} and message.priority == 5
    assert message.max_attempts == 2 and message.expires_at is not None
    assert message.enqueued_by == f"user:{editor.user.pk}"


def test_enqueue__idempotent_repeat_is_200_with_the_existing_id(tree, queue, editor):
    body = {"payload": 1, "idempotency_key": "k1"}
    first = enqueue(editor, tree["child"], body)
    again = post(
        editor, q_url(tree["child"], rest="messages/"), {"payload": 2, "idempotency_key": "k1"}
    )
    assert again.status_code == 200 and again.json() == {"id": first}
    assert Message.objects.count() == 1


def test_enqueue__batch_is_201_with_ids_in_order(tree, queue, editor):
    body = {"messages": [{"payload": i, "priority": i} for i in range(3)]}
    response = post(editor, q_url(tree["child"], rest="messages/"), body)
    assert response.status_code == 201
    ids = response.json()["ids"]
    assert [Message.objects.get(id=i).payload for i in ids] == [0, 1, 2]


def test_enqueue__batch_with_a_bad_entry_is_400_with_its_index(tree, queue, editor):
    body = {"messages": [{"payload": 1}, {"payload": 2}, {"payload": 3, "priority": 5000}]}
    error = assert_error(post(editor, q_url(tree["child"], rest="messages/"), body), 400, "invalid")
    assert error["details"]["index"] == 2
    assert "priority" in error["details"]["messages"]["2"]
    assert not Message.objects.exists()


def test_enqueue__batch_over_500_is_400_with_the_index(tree, queue, editor):
    body = {"messages": [{"payload": i} for i in range(501)]}
    error = assert_error(post(editor, q_url(tree["child"], rest="messages/"), body), 400, "invalid")
    assert error["details"]["index"] == 500
    assert not Message.objects.exists()


def test_enqueue__payload_over_the_collection_cap_is_413(tree, editor):
    services.collection_create(group=tree["child"], name="small", max_payload_bytes=10)
    response = post(editor, q_url(tree["child"], "small", "messages/"), {"payload": "x" * 20})
    assert_error(response, 413, "payload_too_large")
    assert not Message.objects.exists()


def test_enqueue__over_max_depth_is_429_queue_full(tree, editor):
    services.collection_create(group=tree["child"], name="bounded", max_depth=1)
    enqueue(editor, tree["child"], name="bounded")
    response = post(editor, q_url(tree["child"], "bounded", "messages/"), {"payload": 2})
    assert_error(response, 429, "queue_full")
    assert Message.objects.count() == 1


def test_enqueue__paused_collection_still_accepts(tree, queue, editor):
    services.collection_update(collection=queue, paused=True)
    enqueue(editor, tree["child"])


def test_enqueue__unknown_collection_is_404(tree, queue, editor):
    response = post(editor, q_url(tree["child"], "nope", "messages/"), {"payload": 1})
    assert_error(response, 404, "collection_not_found")


# ------------------------------------------------------------ get and cancel


def test_get__the_message_dead_included(tree, queue, editor):
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    post(editor, q_url(tree["child"], rest="fail/"),
         {"id": message_id, "claim_token": claimed["claim_token"], "error": "boom"})  # fmt: skip
    response = editor.get(q_url(tree["child"], rest=f"messages/{message_id}/"))
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "dead" and body["dead_reason"] == "failed"
    assert body["last_error"] == "boom" and body["attempt"] == 1 and body["died_at"]
    assert "claim_token" not in body


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "5b0f3f43-4a9e-4d3c-9a8e-0c1f7d0b2a11", "1"])
def test_get__unknown_or_non_uuid_id_is_404(tree, queue, viewer, bad_id):
    assert_error(viewer.get(q_url(tree["child"], rest=f"messages/{bad_id}/")), 404, "not_found")


def test_get__a_message_of_another_collection_is_404(tree, queue, editor):
    other = services.collection_create(group=tree["child"], name="other")
    message_id = services.message_enqueue(collection=other, payload=1, enqueued_by="x").id
    assert_error(editor.get(q_url(tree["child"], rest=f"messages/{message_id}/")), 404, "not_found")


def test_cancel__204_then_404(tree, queue, editor):
    message_id = enqueue(editor, tree["child"])
    url = q_url(tree["child"], rest=f"messages/{message_id}/")
    assert editor.delete(url).status_code == 204
    assert not Message.objects.exists()
    assert_error(editor.delete(url), 404, "not_found")
    assert_error(editor.delete(q_url(tree["child"], rest="messages/zzz/")), 404, "not_found")


def test_cancel__a_claimed_message_then_its_holder_loses_the_lease(tree, queue, editor):
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    assert editor.delete(q_url(tree["child"], rest=f"messages/{message_id}/")).status_code == 204
    body = {"id": message_id, "claim_token": claimed["claim_token"]}
    # the holder learns it lost the claim, as its ack does (issue 12 point 3)
    assert_error(post(editor, q_url(tree["child"], rest="extend/"),
                      {**body, "visibility_timeout": 10}), 409, "lease_lost")  # fmt: skip


@pytest.mark.parametrize("action", ["nack", "fail", "extend", "release"])
def test_cancel__then_every_holder_action_is_409_lease_lost(tree, queue, editor, action):
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    assert editor.delete(q_url(tree["child"], rest=f"messages/{message_id}/")).status_code == 204
    body = {"id": message_id, "claim_token": claimed["claim_token"]}
    if action == "extend":  # request bodies are strict: only extend takes a lease length
        body["visibility_timeout"] = 10
    response = post(editor, q_url(tree["child"], rest=f"{action}/"), body)
    assert_error(response, 409, "lease_lost")
    assert not Message.objects.filter(id=message_id).exists()


def test_cancel__then_the_holders_batch_ack_is_lease_lost(tree, queue, editor):
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    assert editor.delete(q_url(tree["child"], rest=f"messages/{message_id}/")).status_code == 204
    acks = [{"id": message_id, "claim_token": claimed["claim_token"]}]
    response = post(editor, q_url(tree["child"], rest="ack/"), {"acks": acks})
    assert response.status_code == 200
    assert response.json()["acked"] == 0
    assert response.json()["results"][0]["reason"] == "lease_lost"


def test_cancel__viewer_is_403_and_nothing_changes(tree, queue, editor, viewer):
    message_id = enqueue(editor, tree["child"])
    url = q_url(tree["child"], rest=f"messages/{message_id}/")
    assert_error(viewer.delete(url), 403, "permission_denied")
    assert Message.objects.filter(id=message_id).exists()


# --------------------------------------------------------------------- claim


def test_claim__fields_of_the_claimed_message(tree, queue, editor):
    message_id = enqueue(editor, tree["child"], {"payload": {"x": 1}, "priority": 3})
    (got,) = claim(editor, tree["child"], visibility_timeout=120)
    assert set(got) == {"id", "payload", "priority", "attempt", "max_attempts", "claim_token",
                        "lease_expires_at", "enqueued_at"}  # fmt: skip
    assert got["id"] == message_id and got["payload"] == {"x": 1} and got["priority"] == 3
    assert got["attempt"] == 1 and got["max_attempts"] == 3
    message = Message.objects.get(id=message_id)
    assert message.claimed_by == "w1" and str(message.claim_token) == got["claim_token"]


def test_claim__max_messages_default_1_zero_or_less_none_capped_at_100(tree, queue, editor):
    post(editor, q_url(tree["child"], rest="messages/"),
         {"messages": [{"payload": i} for i in range(105)]})  # fmt: skip
    assert len(claim(editor, tree["child"], n=0)) == 0
    assert len(claim(editor, tree["child"], n=-5)) == 0
    body = {"worker_id": "w1"}
    assert len(post(editor, q_url(tree["child"], rest="claim/"), body).json()["messages"]) == 1
    assert len(claim(editor, tree["child"], n=10**12)) == 100


def test_claim__paused_collection_answers_empty(tree, queue, editor):
    enqueue(editor, tree["child"])
    services.collection_update(collection=queue, paused=True)
    assert claim(editor, tree["child"]) == []


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "worker_id"),
        ({"worker_id": ""}, "worker_id"),
        ({"worker_id": "w" * 129}, "worker_id"),
        ({"worker_id": 7}, "worker_id"),
        ({"worker_id": "w", "max_messages": "2"}, "max_messages"),
        ({"worker_id": "w", "visibility_timeout": 0}, "visibility_timeout"),
        ({"worker_id": "w", "visibility_timeout": 43201}, "visibility_timeout"),
        ({"worker_id": "w", "wait_seconds": 21}, "wait_seconds"),
        ({"worker_id": "w", "wait_seconds": -1}, "wait_seconds"),
    ],
)
def test_claim__invalid_is_400_and_claims_nothing(tree, queue, editor, body, field):
    message_id = enqueue(editor, tree["child"])
    response = post(editor, q_url(tree["child"], rest="claim/"), body)
    assert field in assert_error(response, 400, "invalid")["details"]
    assert Message.objects.get(id=message_id).state == "ready"


# ----------------------------------------------------------------------- ack


def test_ack__batch_with_per_entry_results(tree, queue, editor):
    first, second = enqueue(editor, tree["child"]), enqueue(editor, tree["child"])
    claimed = claim(editor, tree["child"], n=2)
    tokens = {m["id"]: m["claim_token"] for m in claimed}
    body = {"acks": [{"id": first, "claim_token": tokens[first]},
                     {"id": second, "claim_token": str(uuid.uuid4())}]}  # fmt: skip
    response = post(editor, q_url(tree["child"], rest="ack/"), body)
    assert response.status_code == 200
    assert response.json() == {
        "acked": 1,
        "results": [{"id": first, "acked": True, "reason": None},
                    {"id": second, "acked": False, "reason": "lease_lost"}],
    }  # fmt: skip
    assert list(Message.objects.values_list("id", flat=True)) == [uuid.UUID(second)]


def test_ack__twice_is_lease_lost(tree, queue, editor):
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    body = {"acks": [{"id": message_id, "claim_token": claimed["claim_token"]}]}
    assert post(editor, q_url(tree["child"], rest="ack/"), body).json()["acked"] == 1
    again = post(editor, q_url(tree["child"], rest="ack/"), body).json()
    assert again["acked"] == 0 and again["results"][0]["reason"] == "lease_lost"


def test_ack__the_same_pair_twice_acks_once_and_says_duplicate(tree, queue, editor):
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    pair = {"id": message_id, "claim_token": claimed["claim_token"]}
    response = post(editor, q_url(tree["child"], rest="ack/"), {"acks": [pair, pair]})
    assert response.status_code == 200
    assert response.json() == {
        "acked": 1,
        "results": [{"id": message_id, "acked": True, "reason": None},
                    {"id": message_id, "acked": False, "reason": "duplicate"}],
    }  # fmt: skip
    assert not Message.objects.exists()


def test_ack__a_bad_entry_is_400_with_its_index(tree, queue, editor):
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    body = {"acks": [{"id": message_id, "claim_token": claimed["claim_token"]},
                     {"id": "nope", "claim_token": claimed["claim_token"]}]}  # fmt: skip
    error = assert_error(post(editor, q_url(tree["child"], rest="ack/"), body), 400, "invalid")
    assert error["details"]["index"] == 1 and "id" in error["details"]["acks"]["1"]
    assert Message.objects.get(id=message_id).state == "claimed"


def test_ack__over_500_is_400(tree, queue, editor):
    acks = [{"id": str(uuid.uuid4()), "claim_token": str(uuid.uuid4())}] * 501
    error = assert_error(post(editor, q_url(tree["child"], rest="ack/"), {"acks": acks}), 400,
                         "invalid")  # fmt: skip
    assert error["details"]["index"] == 500


def test_ack__missing_acks_is_400(tree, queue, editor):
    response = post(editor, q_url(tree["child"], rest="ack/"), {})
    assert "acks" in assert_error(response, 400, "invalid")["details"]


# -------------------------------------------- nack, fail, extend and release


@pytest.fixture
def held(tree, queue, editor):
    """A claimed message: (id, claim_token)."""
    message_id = enqueue(editor, tree["child"])
    (claimed,) = claim(editor, tree["child"])
    return {"id": message_id, "claim_token": claimed["claim_token"]}


def test_nack__200_ready_again_with_last_error(tree, editor, held):
    body = {**held, "delay_seconds": 0, "error": "try later"}
    response = post(editor, q_url(tree["child"], rest="nack/"), body)
    assert response.status_code == 200, response.content
    got = response.json()
    assert got["id"] == held["id"] and got["state"] == "ready" and got["last_error"] == "try later"
    assert claim(editor, tree["child"])[0]["attempt"] == 2


def test_nack__without_delay_uses_the_backoff(tree, editor, held):
    response = post(editor, q_url(tree["child"], rest="nack/"), held)
    assert response.status_code == 200 and response.json()["state"] == "ready"
    assert claim(editor, tree["child"]) == []  # not yet due


def test_nack__negative_delay_is_400(tree, editor, held):
    response = post(editor, q_url(tree["child"], rest="nack/"), {**held, "delay_seconds": -1})
    assert "delay_seconds" in assert_error(response, 400, "invalid")["details"]
    assert Message.objects.get(id=held["id"]).state == "claimed"


def test_fail__200_dead_failed(tree, editor, held):
    response = post(editor, q_url(tree["child"], rest="fail/"), {**held, "error": "bad"})
    assert response.status_code == 200
    assert response.json()["state"] == "dead" and response.json()["dead_reason"] == "failed"


def test_extend__200_with_the_new_lease(tree, editor, held):
    before = Message.objects.get(id=held["id"]).lease_expires_at
    assert before is not None
    response = post(editor, q_url(tree["child"], rest="extend/"),
                    {**held, "visibility_timeout": 600})  # fmt: skip
    assert response.status_code == 200
    after = Message.objects.get(id=held["id"]).lease_expires_at
    assert after is not None
    assert after > before


def test_extend__out_of_range_timeout_is_400(tree, editor, held):
    for bad in (0, 43201, "10", None):
        response = post(editor, q_url(tree["child"], rest="extend/"),
                        {**held, "visibility_timeout": bad})  # fmt: skip
        assert "visibility_timeout" in assert_error(response, 400, "invalid")["details"]


def test_release__200_ready_with_the_attempt_given_back(tree, editor, held):
    response = post(editor, q_url(tree["child"], rest="release/"), held)
    assert response.status_code == 200
    assert response.json()["state"] == "ready" and response.json()["attempt"] == 0


def timeout_for(action: str) -> dict[str, int]:
    """The extra field extend needs (the others refuse it as unknown)."""
    return {"visibility_timeout": 5} if action == "extend" else {}


@pytest.mark.parametrize("action", ["nack", "fail", "extend", "release"])
def test_holder_actions__stale_token_is_409_lease_lost(tree, editor, held, action):
    body = {**held, "claim_token": str(uuid.uuid4()), **timeout_for(action)}
    response = post(editor, q_url(tree["child"], rest=f"{action}/"), body)
    assert_error(response, 409, "lease_lost")
    assert Message.objects.get(id=held["id"]).state == "claimed"


@pytest.mark.parametrize("action", ["nack", "fail", "extend", "release"])
def test_holder_actions__message_of_another_collection_is_404(tree, editor, action):
    services.collection_create(group=tree["child"], name="jobs")
    other = services.collection_create(group=tree["child"], name="other")
    services.message_enqueue(collection=other, payload=1, enqueued_by="x")
    (claimed,) = services.message_claim(collection=other, worker_id="w")
    body = {"id": str(claimed.id), "claim_token": str(claimed.claim_token), **timeout_for(action)}
    assert_error(post(editor, q_url(tree["child"], rest=f"{action}/"), body), 404, "not_found")
    assert Message.objects.get(id=claimed.id).state == "claimed"


@pytest.mark.parametrize("action", ["nack", "fail", "extend", "release"])
def test_holder_actions__malformed_ids_are_400(tree, editor, held, action):
    body = {"id": "x", "claim_token": "y", "visibility_timeout": 5}
    details = assert_error(post(editor, q_url(tree["child"], rest=f"{action}/"), body), 400,
                           "invalid")["details"]  # fmt: skip
    assert {"id", "claim_token"} <= set(details)


# ----------------------------------------------------------- stats and dead


def test_stats__the_depths(tree, queue, editor, viewer):
    enqueue(editor, tree["child"])
    enqueue(editor, tree["child"], {"payload": 2, "delay_seconds": 3600})
    enqueue(editor, tree["child"])
    claim(editor, tree["child"])
    response = viewer.get(q_url(tree["child"], rest="stats/"))
    assert response.status_code == 200
    body = response.json()
    assert {k: body[k] for k in ("depth", "depth_pending", "delayed", "in_flight", "dead")} == {
        "depth": 3, "depth_pending": 1, "delayed": 1, "in_flight": 1, "dead": 0,
    }  # fmt: skip
    assert body["oldest_pending_age_seconds"] >= 0


def test_dead__paginated_most_recent_first(tree, queue, editor, viewer):
    ids = [enqueue(editor, tree["child"]) for _ in range(3)]
    for message in claim(editor, tree["child"], n=3):
        services.message_fail(collection=queue, id=message["id"],
                              claim_token=message["claim_token"], error="x")  # fmt: skip
    response = viewer.get(q_url(tree["child"], rest="dead/") + "?page_size=2")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    assert {m["id"] for m in body["results"]} <= set(ids)
    assert all(m["state"] == "dead" for m in body["results"])


# ---------------------------------------------------------- redrive and purge


def _kill_all(queue, n):
    for m in services.message_claim(collection=queue, worker_id="w", n=n):
        services.message_fail(collection=queue, id=m.id, claim_token=m.claim_token, error="x")


def test_redrive__ids_and_all(tree, queue, editor, admin):
    ids = [enqueue(editor, tree["child"]) for _ in range(3)]
    _kill_all(queue, 3)
    response = post(admin, q_url(tree["child"], rest="redrive/"), {"ids": ids[:1]})
    assert response.status_code == 200 and response.json() == {"count": 1}
    response = post(admin, q_url(tree["child"], rest="redrive/"), {"all": True})
    assert response.json() == {"count": 2}
    assert set(Message.objects.values_list("state", "attempt")) == {("ready", 0)}


@pytest.mark.parametrize(
    "body", [{}, {"all": False}, {"ids": [], "all": True}, {"ids": ["nope"]}, {"all": "yes"}]
)
def test_redrive__invalid_is_400(tree, queue, admin, body):
    assert_error(post(admin, q_url(tree["child"], rest="redrive/"), body), 400, "invalid")


def test_redrive__editor_is_403(tree, queue, editor):
    response = post(editor, q_url(tree["child"], rest="redrive/"), {"all": True})
    assert_error(response, 403, "permission_denied")


def test_purge__ready_and_optionally_dead(tree, queue, editor, admin):
    for _ in range(3):
        enqueue(editor, tree["child"])
    _kill_all(queue, 1)
    response = post(admin, q_url(tree["child"], rest="purge/"), {})
    assert response.status_code == 200 and response.json() == {"count": 2}
    response = post(admin, q_url(tree["child"], rest="purge/"), {"include_dead": True})
    assert response.json() == {"count": 1}
    assert not Message.objects.exists()


def test_purge__invalid_flag_is_400(tree, queue, admin):
    response = post(admin, q_url(tree["child"], rest="purge/"), {"include_dead": "yes"})
    assert "include_dead" in assert_error(response, 400, "invalid")["details"]


# ------------------------------------------------------ through an app chain


def test_app_enqueue__resolves_the_nearest_declaring_group(tree):
    near = services.collection_create(group=tree["child"], name="jobs")
    services.collection_create(group=tree["root"], name="jobs")
    client = app_client(tree["app_grandchild"], "queue:write", "queue:read")
    response = post(client, "/api/apps/app-grandchild/queues/jobs/messages/", {"payload": 1})
    assert response.status_code == 201, response.content
    message = Message.objects.get(id=response.json()["id"])
    assert message.collection_id == near.pk and message.enqueued_by == "app:app-grandchild"
    stats = client.get(f"/api/apps/{tree['app_grandchild'].pk}/queues/jobs/stats/")
    assert stats.status_code == 200 and stats.json()["depth"] == 1


def test_app_enqueue__batch(tree):
    services.collection_create(group=tree["root"], name="jobs")
    client = app_client(tree["app_grandchild"], "queue:write")
    body = {"messages": [{"payload": 1}, {"payload": 2}]}
    response = post(client, "/api/apps/app-grandchild/queues/jobs/messages/", body)
    assert response.status_code == 201 and len(response.json()["ids"]) == 2


def test_app_enqueue__unresolved_name_is_collection_not_found(tree):
    services.collection_create(group=tree["sibling"], name="jobs")
    client = app_client(tree["app_grandchild"], "queue:write")
    response = post(client, "/api/apps/app-grandchild/queues/jobs/messages/", {"payload": 1})
    assert_error(response, 404, "collection_not_found")


def test_app_enqueue__token_of_another_app_is_404(tree):
    services.collection_create(group=tree["root"], name="jobs")
    client = app_client(tree["app_child"], "queue:write", "queue:read")
    response = post(client, "/api/apps/app-grandchild/queues/jobs/messages/", {"payload": 1})
    assert_error(response, 404, "collection_not_found")
    assert_error(client.get("/api/apps/app-grandchild/queues/jobs/stats/"), 404,
                 "collection_not_found")  # fmt: skip
    assert not Message.objects.exists()


def test_app_enqueue__user_editor_of_the_owning_group(tree):
    services.collection_create(group=tree["child"], name="jobs")
    client = user_client(tree["child"], EDITOR)
    response = post(client, "/api/apps/app-grandchild/queues/jobs/messages/", {"payload": 1})
    assert response.status_code == 201
    assert Message.objects.get().enqueued_by == f"user:{client.user.pk}"


def test_app_enqueue__unknown_app_is_404(tree):
    client = user_client(tree["root"], EDITOR)
    response = post(client, "/api/apps/nope/queues/jobs/messages/", {"payload": 1})
    assert_error(response, 404, "collection_not_found")


def test_ack__a_full_batch_of_500(tree, queue, editor):
    post(editor, q_url(tree["child"], rest="messages/"),
         {"messages": [{"payload": i} for i in range(500)]})  # fmt: skip
    claimed = claim(editor, tree["child"], n=100)
    acks = [{"id": m["id"], "claim_token": m["claim_token"]} for m in claimed]
    acks += [{"id": str(uuid.uuid4()), "claim_token": str(uuid.uuid4())} for _ in range(400)]
    response = post(editor, q_url(tree["child"], rest="ack/"), {"acks": acks})
    assert response.status_code == 200 and response.json()["acked"] == 100
    assert Message.objects.count() == 400
