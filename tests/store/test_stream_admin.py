"""The stream admin: topics with head offset, consumers and lag; purge and
consumer resets need manage and are recorded in the admin log."""

from __future__ import annotations

import pytest

from principals.models import Role
from store import streams
from store.models import StreamEntry
from store.streams import StreamEntryIn
from tests.groupqueues.test_admin import act, logged, staff

pytestmark = pytest.mark.django_db

TOPICS = "/admin/store/topic/"
CONSUMERS = "/admin/store/streamconsumer/"


@pytest.fixture
def topic(tree):
    topic = streams.topic_create(group=tree["child"], name="audit-log")
    streams.append(topic=topic, entries=[StreamEntryIn(i) for i in range(7)])
    streams.consumer_commit(topic=topic, name="billing", offset=3)
    return topic


def test_topics__list_and_page_show_head_consumers_and_lag(tree, topic):
    client = staff(tree["child"], Role.VIEWER)
    page = client.get(TOPICS).content.decode()
    assert "audit-log" in page and "max lag" in page.lower()
    detail = client.get(f"{TOPICS}{topic.pk}/change/")
    assert detail.status_code == 200
    assert "billing at 3 (lag 4)" in detail.content.decode()
    consumers = client.get(CONSUMERS).content.decode()
    assert "billing" in consumers


def test_actions__purge_and_reset_need_manage_and_are_logged(tree, topic):
    editor = staff(tree["child"], Role.EDITOR)
    act(editor, TOPICS, "purge", [topic.pk])
    assert StreamEntry.objects.count() == 7
    admin = staff(tree["child"], Role.ADMIN)
    act(admin, TOPICS, "purge", [topic.pk])
    assert StreamEntry.objects.count() == 0 and logged(topic, "Purged")
    consumer = streams.consumer_get(topic=topic, name="billing")
    act(admin, CONSUMERS, "reset_latest", [consumer.pk])
    consumer.refresh_from_db()
    assert consumer.committed_offset == 7 and logged(consumer, "Reset to latest")


def test_topics__outsiders_see_nothing(tree, topic):
    assert b"audit-log" not in staff(tree["sibling"], Role.ADMIN).get(TOPICS).content
