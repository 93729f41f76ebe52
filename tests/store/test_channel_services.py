"""Notify channel services (SPEC §6): publish order and ids, attach-before-
publish and no replay through ``listen()``, resume, idempotency, retention by
count (at publish) and by age (``notifications_prune``, the scheduler's)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections

from queueproject import clock
from store import channels
from store.exceptions import ChannelExists, ChannelNotFound, InvalidChannelInput
from store.models import Notification
from store.schedule_tick import Scheduler


@pytest.fixture
def channel(tree):
    return channels.channel_create(group=tree["child"], name="news")


def payloads(notes):
    return [n.payload for n in notes]


@pytest.mark.django_db
def test_channel_create__bad_name_and_duplicate(tree, channel):
    with pytest.raises(InvalidChannelInput):
        channels.channel_create(group=tree["child"], name="no spaces")
    with pytest.raises(ChannelExists):
        channels.channel_create(group=tree["child"], name="news")
    assert channels.channel_create(group=tree["sibling"], name="news").group == tree["sibling"]


@pytest.mark.django_db
def test_publish__ids_count_up_per_channel(tree, channel):
    other = channels.channel_create(group=tree["child"], name="other")
    assert [channels.publish(channel=channel, payload=i).seq for i in range(3)] == [1, 2, 3]
    assert channels.publish(channel=other, payload="x").seq == 1
    assert channels.channel_head(channel=channel) == 3


@pytest.mark.django_db
def test_publish__idempotency_key_delivers_once(tree, channel):
    first = channels.publish(channel=channel, payload="a", idempotency_key="k")
    again = channels.publish(channel=channel, payload="b", idempotency_key="k")
    assert again.pk == first.pk and again.payload == "a"
    assert channels.channel_head(channel=channel) == 1
    assert channels.publish(channel=channel, payload="c", idempotency_key="k2").seq == 2


@pytest.mark.django_db
def test_publish__deleted_channel_is_not_found(tree, channel):
    channels.channel_delete(channel=channel)
    with pytest.raises(ChannelNotFound):
        channels.publish(channel=channel, payload=1)


@pytest.mark.django_db
def test_listen__attached_listener_gets_later_ones_only_in_order(tree, channel):
    channels.publish(channel=channel, payload="before")
    with channels.listen(channel=channel, timeout=0.2) as listener:
        for n in range(3):
            channels.publish(channel=channel, payload=n)
        assert payloads(listener) == [0, 1, 2]  # not "before": no replay
    with channels.listen(channel=channel, timeout=0.1) as late:
        assert payloads(late) == []  # attached after all of them


@pytest.mark.django_db
def test_listen__resume_after_an_id(tree, channel):
    for n in range(5):
        channels.publish(channel=channel, payload=n)
    assert payloads(channels.listen(channel=channel, after=2, timeout=0.1)) == [2, 3, 4]


@pytest.mark.django_db(transaction=True)
def test_listen__wakes_on_publishes_from_another_thread_in_order(tree, channel):
    channels.publish(channel=channel, payload="before")

    def publish_later() -> None:
        try:
            threading.Event().wait(0.3)
            for n in range(10):
                channels.publish(channel=channel, payload=n)
        finally:
            connections.close_all()

    with channels.listen(channel=channel, timeout=10) as listener:
        thread = threading.Thread(target=publish_later)
        thread.start()
        received = [(note.seq, note.payload) for _, note in zip(range(10), listener, strict=False)]
        thread.join(20)
    assert received == [(n + 2, n) for n in range(10)]


@pytest.mark.django_db(transaction=True)
def test_publish__concurrent_publishers_get_dense_ids_in_commit_order(tree, channel):
    def publish_many(k: int) -> None:
        try:
            for n in range(10):
                channels.publish(channel=channel, payload=[k, n])
        finally:
            connections.close_all()

    threads = [threading.Thread(target=publish_many, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    seqs = list(Notification.objects.filter(channel=channel).values_list("seq", flat=True))
    assert sorted(seqs) == list(range(1, 41))
    rows = Notification.objects.filter(channel=channel).values_list("seq", "payload")
    by_seq: dict[int, Any] = dict(rows)
    for k in range(4):  # each publisher's own order is kept
        mine = [seq for seq in sorted(by_seq) if by_seq[seq][0] == k]
        assert [by_seq[s][1] for s in mine] == list(range(10))


@pytest.mark.django_db
def test_retention__count_prunes_at_publish(tree, channel, settings):
    settings.NOTIFY_RETENTION_COUNT = 3
    for n in range(5):
        channels.publish(channel=channel, payload=n)
    assert payloads(channels.notifications_after(channel=channel, after=0)) == [2, 3, 4]


@pytest.mark.django_db
def test_retention__age_prunes_in_the_scheduler_tick(tree, channel, settings):
    settings.NOTIFY_RETENTION_SECONDS = 60
    with clock.frozen(clock.now() - timedelta(seconds=120)):
        channels.publish(channel=channel, payload="old")
    channels.publish(channel=channel, payload="new")
    scheduler = Scheduler(owner="t", once=True)
    scheduler.tick()
    assert payloads(channels.notifications_after(channel=channel, after=0)) == ["new"]


@pytest.mark.django_db
def test_retention__prune_also_applies_the_count(tree, channel, settings):
    for n in range(4):
        channels.publish(channel=channel, payload=n)
    settings.NOTIFY_RETENTION_COUNT = 2
    assert channels.notifications_prune() == 2
    assert payloads(channels.notifications_after(channel=channel, after=0)) == [2, 3]


@pytest.mark.django_db
def test_purge__empties_and_ids_keep_counting(tree, channel):
    for n in range(3):
        channels.publish(channel=channel, payload=n)
    assert channels.channel_purge(channel=channel) == 3
    assert channels.publish(channel=channel, payload="x").seq == 4
