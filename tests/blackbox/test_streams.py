"""Streams as a client sees them, over HTTP against the real server (DEBUG
off): append with offsets and idempotent repeats, read after an offset and
from a consumer's saved offset, forward-only commits (409
``offset_regressed``), retention (409 ``offset_out_of_range`` with the first
available offset), lag, a long-poll read woken by an append, and the
capability split (an app token with only ``queue:write`` appends but cannot
read)."""

from __future__ import annotations

import threading
import time
import uuid

import httpx
import pytest

from tests.blackbox.conftest import World, assert_error


@pytest.fixture
def topic(world: World) -> str:
    name = f"bb-{uuid.uuid4().hex[:8]}"
    world.server.manage("stream_create", world.group, name, "--max-entries", "5")
    return name


def t_url(world: World, topic: str, rest: str = "") -> str:
    return f"/api/groups/{world.group}/topics/{topic}/{rest}"


def test_append_read_commit_and_retention(world: World, topic: str) -> None:
    with world.client(world.editor_token) as http:
        one = http.post(t_url(world, topic, "entries/"),
                        json={"payload": {"n": 0}, "idempotency_key": "k0"})  # fmt: skip
        assert (one.status_code, one.json()) == (201, {"offset": 1})
        again = http.post(t_url(world, topic, "entries/"), json={"payload": 1,
                          "idempotency_key": "k0"})  # fmt: skip
        assert (again.status_code, again.json()) == (200, {"offset": 1})
        three = {"entries": [{"payload": {"n": i}} for i in range(1, 4)]}
        batch = http.post(t_url(world, topic, "entries/"), json=three)
        assert (batch.status_code, batch.json()) == (201, {"offsets": [2, 3, 4]})
        page = http.get(t_url(world, topic, "entries/"), params={"since": 1, "limit": 2}).json()
        assert [e["offset"] for e in page["entries"]] == [2, 3] and page["head_offset"] == 4
        commit = t_url(world, topic, "consumers/billing/commit/")
        assert http.post(commit, json={"offset": 3}).json()["lag"] == 1
        assert_error(http.post(commit, json={"offset": 2}), 409, "offset_regressed")
        mine = http.get(t_url(world, topic, "consumers/billing/entries/")).json()
        assert [e["offset"] for e in mine["entries"]] == [4]
        detail = http.get(t_url(world, topic)).json()
        assert [(c["name"], c["lag"]) for c in detail["consumers"]] == [("billing", 1)]
    world.server.manage("stream_append", world.group, topic, *map(str, range(5)))
    world.server.manage("stream_prune")
    with world.client(world.editor_token) as http:
        gone = http.get(t_url(world, topic, "consumers/billing/entries/"))
        assert assert_error(gone, 409, "offset_out_of_range")["details"][
            "first_available_offset"
        ] == 5  # fmt: skip


def test_long_poll_read_is_woken_by_an_append(world: World, topic: str) -> None:
    def append_soon() -> None:
        time.sleep(0.5)
        with world.client(world.editor_token) as http:
            http.post(t_url(world, topic, "entries/"), json={"payload": "late"})

    writer = threading.Thread(target=append_soon)
    started = time.monotonic()
    writer.start()
    with world.client(world.editor_token) as http:
        page = http.get(t_url(world, topic, "entries/"), params={"wait_seconds": 10}).json()
    writer.join()
    assert [e["payload"] for e in page["entries"]] == ["late"]
    assert time.monotonic() - started < 9


def test_app_token_scopes(world: World, topic: str) -> None:
    writer = world.server.create_token(app="shop", scopes="queue:write")
    with world.client(writer) as http:
        appended = http.post(t_url(world, topic, "entries/"), json={"payload": 1})
        assert appended.status_code == 201, appended.text
        assert_error(http.get(t_url(world, topic, "entries/")), 403, "permission_denied")
    with world.client() as anonymous:
        response = anonymous.get(t_url(world, topic, "entries/"))
        assert isinstance(response, httpx.Response)
        assert_error(response, 401, "not_authenticated")
