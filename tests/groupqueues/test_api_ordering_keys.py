"""Ordering keys, fairness and limits over REST (SPEC §7): the collection
object carries them, enqueue takes ``ordering_key``, ``on_conflict`` and
``debounce_seconds``, ``GET …/keys/`` lists the keys and their heads, the stats
say what waits behind a key or a limit, and bad input is 400 with the field."""

from __future__ import annotations

import pytest

from groupqueues import services
from tests.groupqueues.api_helpers import ADMIN, EDITOR, assert_error, q_url, user_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs")


@pytest.fixture
def admin(tree):
    return user_client(tree["child"], ADMIN)


@pytest.fixture
def editor(tree):
    return user_client(tree["child"], EDITOR)


def _post(client, url, body):
    return client.post(url, body, format="json")


def _enqueue(client, group, **body):
    response = _post(client, q_url(group, rest="messages/"), {"payload": {"n": 1}, **body})
    assert response.status_code in (200, 201), response.content
    return response.json()["id"]


def test_collection__settings_round_trip(tree, admin):
    body = {"name": "fair", "fairness": "enqueuer", "max_in_flight": 10,
            "max_in_flight_per_key": 2, "rate_limit": "100/s"}  # fmt: skip
    response = _post(admin, f"/api/groups/{tree['child'].slug}/queues/", body)
    assert response.status_code == 201, response.content
    got = response.json()
    assert (got["fairness"], got["max_in_flight"], got["max_in_flight_per_key"],
            got["rate_limit"]) == ("enqueuer", 10, 2, "100/s")  # fmt: skip
    response = admin.patch(q_url(tree["child"], "fair"), {"rate_limit": None}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["rate_limit"] is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fairness", "tenant"),
        ("rate_limit", "5/week"),
        ("rate_limit", 5),
        ("max_in_flight", 0),
        ("max_in_flight_per_key", "x"),
    ],
)
def test_collection__bad_settings_are_400_with_the_field(tree, queue, admin, field, value):
    response = admin.patch(q_url(tree["child"]), {field: value}, format="json")
    error = assert_error(response, 400, "invalid")
    assert field in error["details"]


def test_enqueue__ordering_key_and_the_keys_list(tree, queue, editor):
    child = tree["child"]
    first = _enqueue(editor, child, ordering_key="order-1")
    _enqueue(editor, child, ordering_key="order-1")
    _enqueue(editor, child, ordering_key="order-2")
    response = _post(editor, q_url(child, rest="claim/"), {"worker_id": "w", "max_messages": 10})
    assert response.status_code == 200, response.content
    claimed = [m["id"] for m in response.json()["messages"]]
    assert first in claimed and len(claimed) == 2
    blocked = editor.get(q_url(child, rest="keys/"), {"blocked": "true"}).json()
    assert blocked["count"] == 2  # both heads are claimed
    assert {k["ordering_key"] for k in blocked["results"]} == {"order-1", "order-2"}
    one = next(k for k in blocked["results"] if k["ordering_key"] == "order-1")
    assert one["waiting"] == 2 and one["head"]["id"] == first and one["blocked"] is True
    assert editor.get(q_url(child, rest="keys/"), {"blocked": "false"}).json()["count"] == 0
    stats = editor.get(q_url(child, rest="stats/")).json()
    assert stats["waiting_behind_key"] == 1


def test_keys__bad_blocked_is_400(tree, queue, editor):
    response = editor.get(q_url(tree["child"], rest="keys/"), {"blocked": "yes"})
    assert "blocked" in assert_error(response, 400, "invalid")["details"]


def test_stats__waiting_behind_a_limit(tree, queue, editor):
    services.collection_update(collection=queue, max_in_flight=1)
    for _ in range(3):
        _enqueue(editor, tree["child"])
    _post(editor, q_url(tree["child"], rest="claim/"), {"worker_id": "w", "max_messages": 5})
    stats = editor.get(q_url(tree["child"], rest="stats/")).json()
    assert stats["waiting_behind_limit"] == 2 and stats["in_flight"] == 1


def test_enqueue__replace_keeps_the_id(tree, queue, editor):
    child = tree["child"]
    first = _enqueue(editor, child, idempotency_key="r")
    body = {"payload": {"n": 2}, "idempotency_key": "r", "on_conflict": "replace",
            "debounce_seconds": 0}  # fmt: skip
    response = _post(editor, q_url(child, rest="messages/"), body)
    assert response.status_code == 200 and response.json()["id"] == first
    assert editor.get(q_url(child, rest=f"messages/{first}/")).json()["payload"] == {"n": 2}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ordering_key": ""}, "ordering_key"),
        ({"ordering_key": 5}, "ordering_key"),
        ({"on_conflict": "merge"}, "on_conflict"),
        ({"on_conflict": "replace"}, "on_conflict"),
        ({"debounce_seconds": -1}, "debounce_seconds"),
    ],
)
def test_enqueue__bad_input_is_400_with_the_field(tree, queue, editor, body, field):
    response = _post(editor, q_url(tree["child"], rest="messages/"), {"payload": 1, **body})
    error = assert_error(response, 400, "invalid")
    assert field in error["details"], error
