"""Stream services (SPEC §6): offsets, idempotency, reads, forward-only
consumer offsets, resets, retention and lag, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from queueproject import clock
from store import streams
from store.exceptions import (
    ConsumerNotFound,
    InvalidStreamInput,
    OffsetOutOfRange,
    OffsetRegressed,
    StreamPayloadTooLarge,
    TopicExists,
    TopicNotFound,
)
from store.models import StreamEntry, Topic
from store.streams import StreamEntryIn
from tests.factories import GroupFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def topic() -> Topic:
    return streams.topic_create(group=GroupFactory(slug="g"), name="events")


def put(topic: Topic, *payloads: object, key: str | None = None) -> list[int]:
    return streams.append(topic=topic, entries=[StreamEntryIn(p, key) for p in payloads])


def offsets(page: streams.StreamPage) -> list[int]:
    return [e.offset for e in page.entries]


def test_topic_create__defaults_from_settings_duplicate_is_409(settings):
    settings.STREAMS_RETENTION_SECONDS, settings.STREAMS_MAX_ENTRIES = 60.0, None
    group = GroupFactory()
    topic = streams.topic_create(group=group, name="t")
    assert (topic.retention_seconds, topic.max_entries, topic.head_offset) == (60.0, None, 0)
    with pytest.raises(TopicExists):
        streams.topic_create(group=group, name="t")
    with pytest.raises(InvalidStreamInput):
        streams.topic_create(group=group, name="bad name")
    with pytest.raises(TopicNotFound):
        streams.topic_get(group=group, name="other")


def test_append__offsets_are_dense_from_one_in_order(topic):
    assert put(topic, "a") == [1]
    assert put(topic, "b", "c", "d") == [2, 3, 4]
    topic.refresh_from_db()
    assert topic.head_offset == 4
    page = streams.stream_read(topic=topic, since=0)
    assert offsets(page) == [1, 2, 3, 4]
    assert [e.payload for e in page.entries] == ["a", "b", "c", "d"]


def test_append__batch_limits_and_bad_payload_append_nothing(topic):
    with pytest.raises(InvalidStreamInput):
        streams.append(topic=topic, entries=[])
    with pytest.raises(InvalidStreamInput):
        put(topic, *range(streams.APPEND_MAX + 1))
    with pytest.raises(InvalidStreamInput) as bad:
        put(topic, 1, float("nan"))
    assert bad.value.details["index"] == 1
    assert put(topic, *range(streams.APPEND_MAX)) == list(range(1, streams.APPEND_MAX + 1))


def test_append__payload_over_the_topics_limit_is_413(topic):
    streams.topic_update(topic=topic, max_payload_bytes=10)
    with pytest.raises(StreamPayloadTooLarge):
        put(topic, "x" * 20)
    assert StreamEntry.objects.count() == 0


def test_append__idempotency_key_repeat_answers_the_existing_offset(topic):
    assert put(topic, "a", key="k1") == [1]
    assert put(topic, "again", key="k1") == [1]
    results = streams.stream_append_results(
        topic=topic,
        entries=[StreamEntryIn("b", "k2"), StreamEntryIn("a'", "k1"), StreamEntryIn("b'", "k2")],
    )
    assert [(r.offset, r.created) for r in results] == [(2, True), (1, False), (2, False)]
    assert [e.payload for e in streams.stream_read(topic=topic, since=0).entries] == ["a", "b"]


def test_append__key_is_free_again_once_its_entry_is_pruned(topic):
    put(topic, "a", key="k")
    put(topic, "b")
    streams.topic_update(topic=topic, max_entries=1)
    assert streams.topic_prune(topic=topic) == 1
    assert put(topic, "a2", key="k") == [3]


def test_read__since_limit_and_next_since(topic):
    put(topic, *range(10))
    page = streams.stream_read(topic=topic, since=3, limit=4)
    assert offsets(page) == [4, 5, 6, 7]
    assert (page.next_since, page.head_offset, page.first_offset) == (7, 10, 1)
    empty = streams.stream_read(topic=topic, since=10)
    assert (empty.entries, empty.next_since) == ([], 10)
    with pytest.raises(OffsetOutOfRange) as beyond:
        streams.stream_read(topic=topic, since=11)
    assert beyond.value.details == {"since": 11, "first_available_offset": 1, "head_offset": 10}
    with pytest.raises(InvalidStreamInput):
        streams.stream_read(topic=topic, since=-1)
    with pytest.raises(InvalidStreamInput):
        streams.stream_read(topic=topic, since=0, limit=0)


def test_read__behind_retention_is_out_of_range_with_the_first_offset(topic):
    put(topic, *range(10))
    streams.topic_update(topic=topic, max_entries=4)
    assert streams.topic_prune(topic=topic) == 6
    with pytest.raises(OffsetOutOfRange) as gone:
        streams.stream_read(topic=topic, since=5)
    assert gone.value.details["first_available_offset"] == 7
    assert gone.value.details["head_offset"] == 10
    assert offsets(streams.stream_read(topic=topic, since=6)) == [7, 8, 9, 10]


def test_prune__by_age_deletes_the_old_prefix_only(topic):
    streams.topic_update(topic=topic, retention_seconds=60, max_entries=None)
    put(topic, "old1", "old2")
    clock.advance(120)
    put(topic, "new")
    assert streams.streams_prune() == 2
    topic.refresh_from_db()
    assert (topic.pruned_through, topic.first_offset) == (2, 3)
    assert offsets(streams.stream_read(topic=topic, since=2)) == [3]
    assert streams.streams_prune() == 0
    clock.advance(120)
    assert streams.streams_prune(now=clock.now() + timedelta(seconds=1)) == 1
    topic.refresh_from_db()
    assert (topic.pruned_through, topic.head_offset) == (3, 3)
    assert put(topic, "after") == [4]


def test_purge__deletes_all_offsets_go_on(topic):
    put(topic, 1, 2, 3)
    assert streams.topic_purge(topic=topic) == 3
    assert put(topic, 4) == [4]
    with pytest.raises(OffsetOutOfRange):
        streams.stream_read(topic=topic, since=0)


def test_commit__forward_only_same_again_is_fine_below_is_409(topic):
    put(topic, *range(5))
    consumer = streams.consumer_commit(topic=topic, name="c", offset=3)
    assert (consumer.committed_offset, streams.consumer_lag(consumer)) == (3, 2)
    assert streams.consumer_commit(topic=topic, name="c", offset=3).committed_offset == 3
    with pytest.raises(OffsetRegressed) as back:
        streams.consumer_commit(topic=topic, name="c", offset=2)
    assert back.value.details == {"committed_offset": 3, "offset": 2}
    with pytest.raises(OffsetOutOfRange):
        streams.consumer_commit(topic=topic, name="c", offset=6)
    assert streams.consumer_get(topic=topic, name="c").committed_offset == 3


def test_reset__moves_back_earliest_and_latest(topic):
    put(topic, *range(5))
    streams.consumer_commit(topic=topic, name="c", offset=4)
    assert streams.consumer_reset(topic=topic, name="c", offset=1).committed_offset == 1
    assert streams.consumer_reset(topic=topic, name="c", to="latest").committed_offset == 5
    streams.topic_update(topic=topic, max_entries=2)
    streams.topic_prune(topic=topic)
    assert streams.consumer_reset(topic=topic, name="c", to="earliest").committed_offset == 3
    with pytest.raises(InvalidStreamInput):
        streams.consumer_reset(topic=topic, name="c")
    with pytest.raises(OffsetOutOfRange):
        streams.consumer_reset(topic=topic, name="c", offset=9)


def test_consumer_read__from_the_saved_offset_new_ones_from_the_first_available(topic):
    put(topic, *range(6))
    assert offsets(streams.consumer_read(topic=topic, name="fresh", limit=2)) == [1, 2]
    with pytest.raises(ConsumerNotFound):
        streams.consumer_get(topic=topic, name="fresh")  # reading does not create
    streams.consumer_commit(topic=topic, name="c", offset=4)
    assert offsets(streams.consumer_read(topic=topic, name="c")) == [5, 6]
    streams.topic_update(topic=topic, max_entries=1)
    streams.topic_prune(topic=topic)
    with pytest.raises(OffsetOutOfRange) as gone:
        streams.consumer_read(topic=topic, name="c")
    assert gone.value.details["first_available_offset"] == 6
    assert offsets(streams.consumer_read(topic=topic, name="fresh")) == [6]


def test_lag__head_minus_committed_per_consumer(topic):
    put(topic, *range(7))
    streams.consumer_commit(topic=topic, name="a", offset=7)
    streams.consumer_commit(topic=topic, name="b", offset=2)
    put(topic, "more")
    topic.refresh_from_db()
    lags = {c.name: streams.consumer_lag(c) for c in streams.consumers_of(topic=topic)}
    assert lags == {"a": 1, "b": 6}


def test_wait__returns_at_once_with_entries_and_after_the_wait_without(topic):
    put(topic, "a")
    assert offsets(streams.stream_wait(topic=topic, since=0, wait_seconds=5)) == [1]
    page = streams.stream_wait(topic=topic, since=1, wait_seconds=0.2)
    assert page.entries == []
    with pytest.raises(InvalidStreamInput):
        streams.stream_wait(topic=topic, since=1, wait_seconds=streams.WAIT_MAX + 1)


def test_scheduler_tick__applies_stream_retention(topic):
    from store.schedule_tick import Scheduler

    put(topic, *range(5))
    streams.topic_update(topic=topic, max_entries=2)
    Scheduler(owner="t", once=True).tick()
    topic.refresh_from_db()
    assert topic.pruned_through == 3
