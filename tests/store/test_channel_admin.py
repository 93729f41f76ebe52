"""The channel admin: the list with head and retained counts, the page with
the retained notifications, purge capability-checked and logged."""

from __future__ import annotations

import pytest

from principals.models import Role
from store import channels
from store.models import Notification
from tests.groupqueues.test_admin import act, logged, staff

pytestmark = pytest.mark.django_db

CHANNELS = "/admin/store/channel/"


@pytest.fixture
def channel(tree):
    made = channels.channel_create(group=tree["child"], name="news")
    for n in range(3):
        channels.publish(channel=made, payload={"note": f"n{n}"})
    return made


def test_changelist__shows_head_and_retained(tree, channel):
    page = staff(tree["child"], Role.VIEWER).get(CHANNELS).content.decode()
    assert "news" in page and "retained" in page.lower()


def test_change_page__lists_retained_notifications(tree, channel):
    page = staff(tree["child"], Role.VIEWER).get(f"{CHANNELS}{channel.pk}/change/")
    assert page.status_code == 200
    assert "n2" in page.content.decode()


def test_purge__admin_purges_and_it_is_logged(tree, channel):
    response = act(staff(tree["child"], Role.ADMIN), CHANNELS, "purge", [channel.pk])
    assert response.status_code == 302
    assert not Notification.objects.exists() and logged(channel, "Purged 3")


def test_purge__editor_may_not(tree, channel):
    act(staff(tree["child"], Role.EDITOR), CHANNELS, "purge", [channel.pk])
    assert Notification.objects.count() == 3


def test_changelist__outsiders_do_not_see_it(tree, channel):
    page = staff(tree["sibling"], Role.ADMIN).get(CHANNELS).content.decode()
    assert "news" not in page
