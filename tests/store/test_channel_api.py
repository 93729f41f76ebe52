"""The notify channel API (SPEC §6): status codes, bodies, bad input and the
authorisation matrix (list/get/listen = read, publish = enqueue, create/
delete/purge = manage). The channel belongs to group ``child``.

The events endpoint is exercised here as the JSON long-poll with short
timeouts (the test client); SSE framing and wake-ups run against a real
uvicorn server in ``tests/blackbox/test_channel_events.py``."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from store import channels
from store.models import Channel
from tests.groupqueues.api_helpers import (
    ADMIN,
    EDITOR,
    VIEWER,
    app_client,
    assert_error,
    user_client,
)

pytestmark = pytest.mark.django_db


def url(group, name="news", rest=""):
    return f"/api/groups/{group.slug}/channels/{name}/{rest}"


@pytest.fixture
def channel(tree):
    return channels.channel_create(group=tree["child"], name="news")


def publish(client, group, payload, **extra):
    return client.post(url(group, rest="messages/"), {"payload": payload, **extra}, format="json")


def poll(client, group, **params):
    return client.get(url(group, rest="events/"), {"timeout": 0, **params})


def test_create__201_then_409_for_the_same_name(tree, admin):
    created = admin.post(f"/api/groups/{tree['child'].slug}/channels/", {"name": "news"},
                         format="json")  # fmt: skip
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "news" and created.json()["head"] == 0
    again = admin.post(f"/api/groups/{tree['child'].slug}/channels/", {"name": "news"},
                       format="json")  # fmt: skip
    assert_error(again, 409, "already_exists")


@pytest.mark.parametrize("body", [{"name": "bad name"}, {"name": ""}, {"name": "x", "extra": 1},
                                  {"name": 5}, {}])  # fmt: skip
def test_create__bad_input_is_400_naming_the_field(tree, admin, body):
    response = admin.post(f"/api/groups/{tree['child'].slug}/channels/", body, format="json")
    error = assert_error(response, 400, "invalid")
    assert set(error["details"]) & {"name", "extra"}


def test_publish__201_with_increasing_ids_and_the_head_follows(tree, editor, channel):
    first = publish(editor, tree["child"], {"n": 1})
    second = publish(editor, tree["child"], [1, "two"])
    assert first.status_code == second.status_code == 201, first.content
    assert (first.json()["id"], second.json()["id"]) == (1, 2)
    assert set(first.json()) == {"id", "payload", "published_at"}
    assert editor.get(url(tree["child"])).json()["head"] == 2


def test_publish__repeated_idempotency_key_returns_the_first(tree, editor, channel):
    first = publish(editor, tree["child"], "a", idempotency_key="k1").json()
    again = publish(editor, tree["child"], "b", idempotency_key="k1").json()
    assert again == first
    assert Channel.objects.get().last_seq == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "payload"), ({"payload": 1, "x": 2}, "x"), ({"payload": 1, "idempotency_key": ""},
     "idempotency_key"),
     ({"payload": 1, "idempotency_key": 5}, "idempotency_key")],
)  # fmt: skip
def test_publish__bad_input_is_400_naming_the_field(tree, editor, channel, body, field):
    response = editor.post(url(tree["child"], rest="messages/"), body, format="json")
    assert field in assert_error(response, 400, "invalid")["details"]


def test_publish__too_large_payload_is_413(tree, editor, channel, settings):
    settings.NOTIFY_MAX_PAYLOAD_BYTES = 10
    assert_error(publish(editor, tree["child"], "x" * 20), 413, "payload_too_large")


def test_long_poll__without_after_attaches_at_the_head(tree, editor, channel):
    publish(editor, tree["child"], "before")
    response = poll(editor, tree["child"])
    assert response.status_code == 200, response.content
    assert response.json() == {"notifications": [], "last_event_id": 1}


def test_long_poll__after_returns_retained_in_order(tree, editor, channel):
    for n in range(3):
        publish(editor, tree["child"], n)
    body = poll(editor, tree["child"], after=1).json()
    assert [(n["id"], n["payload"]) for n in body["notifications"]] == [(2, 1), (3, 2)]
    assert body["last_event_id"] == 3


@pytest.mark.parametrize("params", [{"after": -1}, {"after": "x"}, {"timeout": 301},
                                    {"timeout": "soon"}, {"bogus": 1}])  # fmt: skip
def test_events__bad_query_is_400(tree, editor, channel, params):
    assert_error(poll(editor, tree["child"], **params), 400, "invalid")


def test_events__bad_last_event_id_header_is_400_json_even_for_event_stream(tree, editor, channel):
    response = editor.get(url(tree["child"], rest="events/"), HTTP_ACCEPT="text/event-stream",
                          HTTP_LAST_EVENT_ID="abc")  # fmt: skip
    assert response["Content-Type"].startswith("application/json")
    assert "Last-Event-ID" in assert_error(response, 400, "invalid")["details"]


def test_events__unknown_channel_is_404(tree, editor):
    assert_error(poll(editor, tree["child"]), 404, "channel_not_found")


def test_purge__deletes_retained_and_ids_keep_counting(tree, admin, channel):
    for n in range(3):
        publish(admin, tree["child"], n)
    response = admin.post(url(tree["child"], rest="purge/"))
    assert response.status_code == 200 and response.json() == {"deleted": 3}
    assert publish(admin, tree["child"], "next").json()["id"] == 4


def test_delete__204_then_404(tree, admin, channel):
    assert admin.delete(url(tree["child"])).status_code == 204
    assert_error(admin.get(url(tree["child"])), 404, "channel_not_found")


def test_list__paginated_by_name(tree, editor, channel):
    channels.channel_create(group=tree["child"], name="alerts")
    body = editor.get(f"/api/groups/{tree['child'].slug}/channels/").json()
    assert [c["name"] for c in body["results"]] == ["alerts", "news"]


# ------------------------------------------------------------------ authorisation


def calls(tree):
    g = tree["child"]
    return {
        "list": lambda c: c.get(f"/api/groups/{g.slug}/channels/"),
        "get": lambda c: c.get(url(g)),
        "listen": lambda c: poll(c, g),
        "publish": lambda c: publish(c, g, 1),
        "create": lambda c: c.post(f"/api/groups/{g.slug}/channels/", {"name": "more"},
                                   format="json"),
        "purge": lambda c: c.post(url(g, rest="purge/")),
        "delete": lambda c: c.delete(url(g)),
    }  # fmt: skip


READS, ENQUEUE, MANAGE = ("list", "get", "listen"), ("publish",), ("create", "purge", "delete")


@pytest.mark.parametrize(
    ("who", "allowed"),
    [("viewer", READS), ("editor", READS + ENQUEUE), ("admin", READS + ENQUEUE + MANAGE),
     ("read_scope_admin", READS), ("app_write", READS + ENQUEUE), ("app_read", READS)],
)  # fmt: skip
def test_authz__matrix(tree, channel, who, allowed):
    clients = {
        "viewer": lambda: user_client(tree["child"], VIEWER),
        "editor": lambda: user_client(tree["child"], EDITOR),
        "admin": lambda: user_client(tree["child"], ADMIN),
        "read_scope_admin": lambda: user_client(tree["child"], ADMIN, scopes=["queue:read"]),
        "app_write": lambda: app_client(tree["app_grandchild"], "queue:read", "queue:write"),
        "app_read": lambda: app_client(tree["app_grandchild"], "queue:read"),
    }
    for name, call in calls(tree).items():
        if name == "delete":
            continue  # last, below
        response = call(clients[who]())
        if name in allowed:
            assert response.status_code in (200, 201), (who, name, response.content)
        else:
            assert_error(response, 403, "permission_denied")
    response = calls(tree)["delete"](clients[who]())
    assert response.status_code == (204 if "delete" in allowed else 403), (who, response.content)


def test_authz__anonymous_is_401_and_outsider_404(tree, channel):
    for call in calls(tree).values():
        assert_error(call(APIClient()), 401, "not_authenticated")
        assert call(user_client(tree["sibling"], ADMIN)).status_code == 404
