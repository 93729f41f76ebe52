"""Schedules declared in code (QUEUE_SCHEDULES): created on migrate and on
sync, updated in place, never duplicated, deleted when no longer declared."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings

from groupqueues import services as queues
from store.models import Schedule
from store.schedule_declared import schedules_sync_declared

pytestmark = pytest.mark.django_db

NIGHTLY = {"group": "child", "collection": "jobs", "schedule": "0 3 * * *",
           "timezone": "Europe/Berlin", "payload": {"report": "daily"}}  # fmt: skip


@pytest.fixture
def jobs(tree):
    return queues.collection_create(group=tree["root"], name="jobs")


def test_migrate__creates_the_declared_schedules_once(jobs):
    with override_settings(QUEUE_SCHEDULES={"nightly": NIGHTLY}):
        call_command("migrate", verbosity=0)
        call_command("migrate", verbosity=0)
    schedule = Schedule.objects.get()
    assert schedule.declared_in_code and schedule.group.slug == "child"
    assert schedule.payload == {"report": "daily"} and schedule.timezone == "Europe/Berlin"


def test_sync__restarts_keep_the_cursor_and_changes_update_in_place(jobs):
    with override_settings(QUEUE_SCHEDULES={"nightly": NIGHTLY}):
        assert schedules_sync_declared() == (1, 0, 0)
        first = Schedule.objects.get()
        Schedule.objects.filter(pk=first.pk).update(last_fired_at=first.next_at)
        assert schedules_sync_declared() == (0, 1, 0)  # a restart
    again = Schedule.objects.get()
    assert (again.pk, again.next_at, again.last_fired_at) == (
        first.pk, first.next_at, first.next_at)  # fmt: skip
    with override_settings(QUEUE_SCHEDULES={"nightly": {**NIGHTLY, "schedule": "@hourly"}}):
        schedules_sync_declared()
    changed = Schedule.objects.get()
    assert changed.pk == first.pk and changed.expression == "@hourly"


def test_sync__deletes_only_declared_schedules_no_longer_named(tree, jobs):
    from store import schedules

    schedules.schedule_create(group=tree["child"], name="manual", collection="jobs",
                              expression="@daily")  # fmt: skip
    with override_settings(QUEUE_SCHEDULES={"nightly": NIGHTLY}):
        schedules_sync_declared()
    with override_settings(QUEUE_SCHEDULES={}):
        assert schedules_sync_declared() == (0, 0, 1)
    assert list(Schedule.objects.values_list("name", flat=True)) == ["manual"]


def test_sync__skips_entries_whose_group_is_missing_and_refuses_bad_shapes(jobs):
    with override_settings(QUEUE_SCHEDULES={"x": {**NIGHTLY, "group": "nope"}}):
        assert schedules_sync_declared() == (0, 0, 0)
    for bad in ({**NIGHTLY, "colour": "red"}, {"collection": "jobs"}, "0 3 * * *"):
        with override_settings(QUEUE_SCHEDULES={"x": bad}), pytest.raises(ImproperlyConfigured):
            schedules_sync_declared()
