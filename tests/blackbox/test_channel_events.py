"""Notify channels over HTTP against the production command (uvicorn, ASGI):
SSE framing, fan-out to every listener attached before a publish, order per
channel under concurrent publishers, no replay, ``Last-Event-ID`` resume, the
JSON long-poll waking on a publish, and errors in the JSON envelope."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error
from tests.blackbox.server import AsgiServer

SSE = {"Accept": "text/event-stream"}


class Listener:
    """An SSE connection read on a thread: ``events`` fills as they arrive."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.events: list[dict[str, Any]] = []
        self.comments: list[str] = []
        self.retry: int | None = None
        self.ready = threading.Event()  # the first frame: attached (LISTEN on, head read)
        self.arrived = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        event: dict[str, Any] = {}
        try:
            for line in self.response.iter_lines():
                if line == "":
                    if "data" in event:
                        with self.arrived:
                            self.events.append(event)
                            self.arrived.notify_all()
                    event = {}
                elif line.startswith(":"):
                    self.comments.append(line)
                else:
                    field, _, value = line.partition(": ")
                    if field == "retry":
                        self.retry = int(value)
                        self.ready.set()
                    elif field == "data":
                        event["data"] = event.get("data", "") + value
                    else:
                        event[field] = value
        except httpx.HTTPError:
            pass  # closed by the test

    def wait_for(self, n: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.events) < n and time.monotonic() < deadline:
                self.arrived.wait(0.1)
        assert len(self.events) >= n, f"{len(self.events)} of {n} events: {self.events}"
        return self.events


@pytest.fixture(scope="module")
def channel(world: World, asgi_server: AsgiServer) -> Iterator[str]:
    """A fresh channel per module; the tests make their own channels too."""
    yield make_channel(world, asgi_server, "bb-events")


def make_channel(world: World, srv: AsgiServer, name: str) -> str:
    with srv.client(world.admin_token) as http:
        created = http.post(f"/api/groups/{world.group}/channels/", json={"name": name})
        assert created.status_code == 201, created.text
    return f"/api/groups/{world.group}/channels/{name}/"


def publish(http: httpx.Client, path: str, payload: Any) -> int:
    response = http.post(path + "messages/", json={"payload": payload})
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


@contextmanager
def listening(srv: AsgiServer, token: str, path: str, **headers: str) -> Iterator[Listener]:
    """An attached SSE listener: the server sends ``retry:`` once it has
    subscribed and read the head."""
    http = httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"},
                        timeout=httpx.Timeout(30, read=60))  # fmt: skip
    with http, http.stream("GET", path + "events/", headers={**SSE, **headers}) as response:
        assert response.status_code == 200, response.read()
        listener = Listener(response)
        assert listener.ready.wait(15), "no first frame"
        yield listener
        response.close()


def test_sse__framing_headers_and_one_event_per_notification(world, asgi_server, channel):
    with asgi_server.client(world.editor_token) as http, \
            listening(asgi_server, world.editor_token, channel) as listener:  # fmt: skip
        assert listener.response.headers["content-type"].startswith("text/event-stream")
        assert listener.response.headers["cache-control"] == "no-cache"
        ids = [publish(http, channel, {"n": n}) for n in range(3)]
        events = listener.wait_for(3)
    assert listener.retry == 1000
    assert [int(e["id"]) for e in events] == ids
    bodies = [json.loads(e["data"]) for e in events]
    assert [b["payload"] for b in bodies] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [b["id"] for b in bodies] == ids and all(b["published_at"] for b in bodies)
    assert all("event" not in e for e in events)  # default type: EventSource.onmessage


def test_sse__no_replay_for_late_listeners_and_fan_out(world, asgi_server):
    path = make_channel(world, asgi_server, "bb-fanout")
    with asgi_server.client(world.editor_token) as http:
        publish(http, path, "before")
        with listening(asgi_server, world.editor_token, path) as a, \
                listening(asgi_server, world.app_token, path) as b:  # fmt: skip
            after = publish(http, path, "after")
            for listener in (a, b):
                (event,) = listener.wait_for(1)
                assert int(event["id"]) == after and json.loads(event["data"])["payload"] == "after"
            time.sleep(0.3)
            assert len(a.events) == len(b.events) == 1


def test_sse__order_per_channel_under_concurrent_publishers(world, asgi_server):
    path = make_channel(world, asgi_server, "bb-order")
    n = 40
    with listening(asgi_server, world.editor_token, path) as listener:

        def one(i: int) -> int:
            with asgi_server.client(world.editor_token) as http:
                return publish(http, path, i)

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(one, range(n)))
        events = listener.wait_for(n)
    seen = [int(e["id"]) for e in events]
    assert seen == sorted(ids) == list(range(1, n + 1))  # every one, in id order, no gap
    by_id = {i: p for i, p in zip(ids, range(n), strict=True)}
    assert [json.loads(e["data"])["payload"] for e in events] == [by_id[i] for i in seen]


def test_sse__last_event_id_resumes_after_it_without_loss(world, asgi_server):
    path = make_channel(world, asgi_server, "bb-resume")
    with asgi_server.client(world.editor_token) as http:
        ids = [publish(http, path, n) for n in range(5)]
    resume = {"Last-Event-ID": str(ids[1])}
    with listening(asgi_server, world.editor_token, path, **resume) as listener:
        events = listener.wait_for(3)
        time.sleep(0.3)
    assert [int(e["id"]) for e in listener.events] == ids[2:]
    assert [json.loads(e["data"])["payload"] for e in events] == [2, 3, 4]


def test_sse__stream_ends_after_timeout_with_keepalives(world, asgi_server, channel):
    auth = {"Authorization": f"Bearer {world.editor_token}"}
    with httpx.Client(base_url=asgi_server.url, timeout=30, headers=auth) as http:
        started = time.monotonic()
        response = http.get(channel + "events/", params={"timeout": 1}, headers=SSE)
    assert response.status_code == 200 and 0.9 <= time.monotonic() - started < 10
    assert response.text.startswith("retry: 1000\n\n")


def test_long_poll__wakes_on_publish(world, asgi_server):
    path = make_channel(world, asgi_server, "bb-poll")
    with asgi_server.client(world.editor_token) as http:
        head = http.get(path + "events/", params={"timeout": 0}).json()["last_event_id"]
        result: dict[str, Any] = {}

        def wait() -> None:
            started = time.monotonic()
            with asgi_server.client(world.editor_token) as poller:
                params = {"after": head, "timeout": 20}
                result["body"] = poller.get(path + "events/", params=params).json()
            result["took"] = time.monotonic() - started

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.5)
        sent = publish(http, path, "wake")
        waiter.join(30)
    assert [n["id"] for n in result["body"]["notifications"]] == [sent]
    assert result["body"]["last_event_id"] == sent
    assert result["took"] < 10


def test_events__errors_are_json_envelopes_even_for_event_stream(world, asgi_server, channel):
    with asgi_server.client(world.editor_token) as http:
        bad = http.get(channel + "events/", headers={**SSE, "Last-Event-ID": "x"})
        assert_error(bad, 400, "invalid")
        missing = http.get(f"/api/groups/{world.group}/channels/nope/events/", headers=SSE)
        assert_error(missing, 404, "channel_not_found")
    with asgi_server.client() as anonymous:
        assert_error(anonymous.get(channel + "events/", headers=SSE), 401, "not_authenticated")
