"""The schedule admin: the list with the next boundaries and the code marker,
pause / resume / run-now capability-checked and recorded in the admin log."""

from __future__ import annotations

import pytest

from groupqueues import services as queues
from groupqueues.models import Message
from principals.models import Role
from store import schedules
from tests.groupqueues.test_admin import act, logged, staff

pytestmark = pytest.mark.django_db

SCHEDULES = "/admin/store/schedule/"


@pytest.fixture
def schedule(tree):
    queues.collection_create(group=tree["child"], name="jobs")
    return schedules.schedule_create(group=tree["child"], name="nightly", collection="jobs",
                                     expression="0 3 * * *", declared_in_code=True)  # fmt: skip


def test_changelist__shows_the_next_boundaries_and_the_code_marker(tree, schedule):
    page = staff(tree["child"], Role.VIEWER).get(SCHEDULES).content.decode()
    assert "nightly" in page and "next 5 boundaries" in page.lower()
    assert page.count("T03:00:00+00:00") == 5
    assert "declared in code" in page.lower()


def test_actions__pause_resume_run_now_are_logged(tree, schedule):
    client = staff(tree["child"], Role.ADMIN)
    assert act(client, SCHEDULES, "pause", [schedule.pk]).status_code == 302
    schedule.refresh_from_db()
    assert schedule.paused and logged(schedule, "Paused")
    act(client, SCHEDULES, "resume", [schedule.pk])
    schedule.refresh_from_db()
    assert not schedule.paused and logged(schedule, "Resumed")
    act(client, SCHEDULES, "run_now", [schedule.pk])
    assert Message.objects.count() == 1 and logged(schedule, "Ran now")


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_actions__refused_without_manage(tree, schedule, role):
    client = staff(tree["child"], role)
    act(client, SCHEDULES, "pause", [schedule.pk])
    act(client, SCHEDULES, "run_now", [schedule.pk])
    schedule.refresh_from_db()
    assert not schedule.paused and not Message.objects.exists()
    assert not logged(schedule, "Paused")


def test_changelist__outsiders_see_nothing(tree, schedule):
    page = staff(tree["sibling"], Role.ADMIN).get(SCHEDULES)
    assert b"nightly" not in page.content
