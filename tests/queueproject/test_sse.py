"""The shared SSE framing and wait loops (queueproject.sse)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from django.test import RequestFactory

from queueproject import sse


def test_format_event__id_event_and_one_data_line_per_line() -> None:
    frame = sse.format_event("a\nb", id=7, event="notification")
    assert frame == b"id: 7\nevent: notification\ndata: a\ndata: b\n\n"


def test_format_json_event__compact_single_line() -> None:
    assert sse.format_json_event({"x": [1, 2]}, id="3") == b'id: 3\ndata: {"x":[1,2]}\n\n'


def test_format_event__line_break_in_id_is_refused() -> None:
    with pytest.raises(ValueError):
        sse.format_event("x", id="1\n2")


def test_comment_and_retry() -> None:
    assert sse.comment("keep-alive") == b": keep-alive\n\n"
    assert sse.comment() == b":\n\n"
    assert sse.retry(1500) == b"retry: 1500\n\n"


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "9" * 30, "١٢"])
def test_parse_cursor__rejects_non_integers(value: str) -> None:
    with pytest.raises(ValueError):
        sse.parse_cursor(value)


def test_parse_cursor__accepts_integers_and_none() -> None:
    assert sse.parse_cursor(None) is None
    assert sse.parse_cursor(" 42 ") == 42


def test_last_event_id__header_wins_over_query() -> None:
    rf = RequestFactory()
    assert sse.last_event_id(rf.get("/", HTTP_LAST_EVENT_ID="5")) == "5"
    assert sse.last_event_id(rf.get("/?last_event_id=6")) == "6"
    assert sse.last_event_id(rf.get("/?last_event_id=6", HTTP_LAST_EVENT_ID="5")) == "5"
    assert sse.last_event_id(rf.get("/")) is None


def _counter_fetch(limit: int):  # type: ignore[no-untyped-def]
    def fetch(cursor: int) -> tuple[Sequence[int], int]:
        if cursor >= limit:
            return [], cursor
        return [cursor + 1], cursor + 1

    return fetch


def test_event_stream__renders_items_in_order_then_ends_at_max_seconds() -> None:
    async def collect() -> list[bytes]:
        stream = sse.event_stream(
            fetch=_counter_fetch(3), start=lambda: 0, wake=sse.Wakeup(None),
            render=lambda n: sse.format_event(str(n), id=n), max_seconds=0.3,
            first=sse.retry(10),
        )  # fmt: skip
        return [chunk async for chunk in stream]

    chunks = asyncio.run(collect())
    assert chunks[0] == b"retry: 10\n\n"
    assert b"".join(chunks[1:]) == b"id: 1\ndata: 1\n\nid: 2\ndata: 2\n\nid: 3\ndata: 3\n\n"


def test_event_stream__keepalive_when_idle() -> None:
    async def collect() -> list[bytes]:
        stream = sse.event_stream(
            fetch=_counter_fetch(0), start=lambda: 0, wake=sse.Wakeup(None),
            render=lambda n: b"", keepalive=0.05, max_seconds=0.3,
        )  # fmt: skip
        return [chunk async for chunk in stream]

    assert b": keep-alive\n\n" in asyncio.run(collect())


def test_long_poll__returns_empty_with_cursor_after_timeout() -> None:
    items, cursor = asyncio.run(
        sse.long_poll(fetch=_counter_fetch(0), start=lambda: 4, wake=sse.Wakeup(None), timeout=0.1)
    )
    assert (list(items), cursor) == ([], 4)
