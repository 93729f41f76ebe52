"""The dashboard's reads and charts, and the admin pages of issue 16 with
Django's test client: who sees what, bad parameters, the reindex action (the
drawn page itself is checked in a real browser: tests/browser/)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from groupqueues import dashboard, services
from groupqueues.charts import Series, line_chart
from groupqueues.models import CollectionSample
from principals.models import Role
from queueproject import clock
from tests.factories import UserFactory, member

pytestmark = pytest.mark.django_db

DASHBOARD = "/admin/groupqueues/collection/dashboard/"
HEALTH = "/admin/groupqueues/collection/health/"


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser() -> Client:
    return login(UserFactory(username="su", is_superuser=True, is_staff=True))


@pytest.fixture
def queues(tree):
    mine = services.collection_create(group=tree["child"], name="mine")
    theirs = services.collection_create(group=tree["sibling"], name="theirs")
    return mine, theirs


def test_line_chart__one_polyline_per_series_with_points():
    svg = line_chart(title="t <&>", span=3600, series=[
        Series("ready", [(60.0, 1.0), (120.0, 7.0)]), Series("dead", []),
    ])  # fmt: skip
    assert svg.count("<polyline") == 1 and 'data-series="ready"' in svg
    assert 'data-points="2"' in svg and 'data-last="7"' in svg
    assert "t &lt;&amp;&gt;" in svg and "<&>" not in svg  # the title is escaped
    assert ">10<" in svg  # the y axis rounds 7 up to 10


def test_line_chart__empty_says_no_samples():
    svg = line_chart(title="t", span=60, series=[Series("ready", [])])
    assert "<polyline" not in svg and "no samples yet" in svg


def test_dashboard__buckets_depth_peak_and_flows_summed(queues):
    mine, _ = queues
    now = clock.now()
    CollectionSample.objects.bulk_create([
        CollectionSample(collection=mine, taken_at=now - timedelta(minutes=m), ready=100 - m,
                         enqueued=10, acked=5)
        for m in range(0, 120)
    ])  # fmt: skip
    board = dashboard.dashboard(collections=[mine], window="day")
    (panel,) = board.collections
    assert panel.label == str(mine)
    # 2 hours of minutes in 5-minute buckets: 24 or 25 points; 10 a minute.
    assert 'data-series="ready"' in panel.depth_svg and 'data-last="100"' in panel.depth_svg
    assert 'data-last="10"' in panel.flow_svg and 'data-last="5"' in panel.flow_svg
    hour = dashboard.dashboard(collections=[mine], window="hour")
    assert 'data-points="60"' in hour.collections[0].depth_svg
    # The week's hourly points are grouped by the database: 2 or 3 of them.
    week = dashboard.dashboard(collections=[mine], window="week").collections[0]
    points = int(week.depth_svg.split('data-series="ready" data-points="')[1].split('"')[0])
    assert 2 <= points <= 3 and 'data-last="100"' in week.depth_svg
    # 10 a minute over the one full hour (the axis' top); the partial hours less.
    assert ">10/min<" in week.flow_svg


def test_dashboard__top_lists_rank_backlog_and_dead(queues):
    mine, theirs = queues
    for _ in range(3):
        services.message_enqueue(collection=theirs, payload=1, enqueued_by="t")
    services.message_enqueue(collection=mine, payload=1, enqueued_by="t")
    (m,) = services.message_claim(collection=mine, worker_id="w", n=1)
    services.message_fail(collection=mine, id=m.id, claim_token=m.claim_token, error="e")
    board = dashboard.dashboard(collections=[mine, theirs])
    assert [c for c, _ in board.top_backlog] == [theirs]
    assert [c for c, _ in board.top_dead] == [mine]
    assert [p.group_slug for p in board.groups] == ["child", "sibling"]


def test_dashboard_page__shows_only_readable_queues(tree, queues):
    client = login(member(tree["child"], Role.VIEWER, is_staff=True))
    page = client.get(DASHBOARD)
    assert page.status_code == 200
    body = page.content.decode()
    assert "child/mine: depth" in body and "theirs" not in body


def test_dashboard_page__window_and_group(superuser, queues):
    assert superuser.get(DASHBOARD, {"window": "year"}).status_code == 400
    page = superuser.get(DASHBOARD, {"window": "week", "group": "sibling"})
    body = page.content.decode()
    assert page.status_code == 200 and "sibling/theirs" in body and "child/mine" not in body


def test_dashboard_page__needs_staff(queues):
    assert Client().get(DASHBOARD).status_code == 302  # to the login page


def test_health_page__superusers_only(tree, queues):
    client = login(member(tree["child"], Role.ADMIN, is_staff=True))
    assert client.get(HEALTH).status_code == 403
    assert client.post(HEALTH, {"action": "reindex"}).status_code == 403


def test_health_page__reports_and_validates(superuser, queues):
    page = superuser.get(HEALTH)
    assert page.status_code == 200 and b"Rebuild indexes" in page.content
    assert superuser.get(HEALTH, {"max_xact_age": "soon"}).status_code == 400
    assert superuser.get(HEALTH, {"max_idle_age": "-1"}).status_code == 400
    assert superuser.post(HEALTH, {"action": "vacuum"}).status_code == 400


@pytest.mark.django_db(transaction=True)
def test_health_page__reindex_action_rebuilds(tree):
    client = login(UserFactory(username="su2", is_superuser=True, is_staff=True))
    done = client.post(HEALTH, {"action": "reindex"}, follow=True)
    assert done.status_code == 200
    messages = [str(m) for m in done.context["messages"]]
    assert any(m.startswith("Rebuilt ") for m in messages), messages
