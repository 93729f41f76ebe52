"""Stream subscriptions over SSE against the production command (uvicorn,
ASGI; the framing is ``queueproject.sse``, shared with notify channels): a
consumer's stream starts after its saved offset, carries ``id:`` = offset,
delivers appends made while it is open, resumes after ``Last-Event-ID``, and
refuses a start behind retention with the JSON envelope."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.blackbox.conftest import World, assert_error
from tests.blackbox.server import AsgiServer
from tests.blackbox.test_channel_events import listening


def make_topic(world: World, srv: AsgiServer) -> str:
    name = f"bb-sse-{uuid.uuid4().hex[:8]}"
    with srv.client(world.admin_token) as http:
        created = http.post(f"/api/groups/{world.group}/topics/", json={"name": name})
        assert created.status_code == 201, created.text
    return f"/api/groups/{world.group}/topics/{name}/"


def append(http: httpx.Client, topic: str, *payloads: object) -> list[int]:
    response = http.post(topic + "entries/", json={"entries": [{"payload": p} for p in payloads]})
    assert response.status_code == 201, response.text
    return list(response.json()["offsets"])


def test_sse__from_the_saved_offset_then_live_appends(
    world: World, asgi_server: AsgiServer
) -> None:
    topic = make_topic(world, asgi_server)
    consumer = topic + "consumers/billing/"
    with asgi_server.client(world.editor_token) as http:
        append(http, topic, "a", "b", "c")
        assert http.post(consumer + "commit/", json={"offset": 1}).status_code == 200
        with listening(asgi_server, world.editor_token, consumer) as listener:
            first = listener.wait_for(2)
            assert [(e["id"], json.loads(e["data"])["payload"]) for e in first] == [
                ("2", "b"), ("3", "c"),
            ]  # fmt: skip
            append(http, topic, "d")
            events = listener.wait_for(3)
            assert events[2]["id"] == "4" and json.loads(events[2]["data"])["offset"] == 4
        with listening(asgi_server, world.editor_token, consumer,
                       **{"Last-Event-ID": "3"}) as resumed:  # fmt: skip
            assert [e["id"] for e in resumed.wait_for(1)] == ["4"]


def test_sse__behind_retention_is_a_json_409(world: World, asgi_server: AsgiServer) -> None:
    topic = make_topic(world, asgi_server)
    with asgi_server.client(world.admin_token) as http:
        append(http, topic, 1, 2, 3)
        assert http.post(topic + "purge/").json() == {"count": 3}
        gone = http.get(topic + "consumers/c/events/", headers={"Last-Event-ID": "1",
                        "Accept": "text/event-stream"})  # fmt: skip
        error = assert_error(gone, 409, "offset_out_of_range")
        assert error["details"]["first_available_offset"] == 4
