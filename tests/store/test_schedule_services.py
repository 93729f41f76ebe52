"""Schedule services (SPEC §6): create and resolve the collection, fire due
boundaries once, the catch-up bound after downtime, pause/resume, run now."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from groupqueues import services as queues
from groupqueues.exceptions import InvalidQueueInput
from groupqueues.models import Message
from queueproject import clock
from store import schedules
from store.exceptions import InvalidSchedule, ScheduleExists
from store.models import Schedule
from tests.factories import GroupFactory

T0 = datetime(2026, 6, 1, 12, 0, 0, 500000, tzinfo=UTC)


@pytest.fixture
def group(db):
    root = GroupFactory(slug="acme")
    queues.collection_create(group=root, name="jobs")
    return GroupFactory(slug="acme-web", parent=root)


def make(group, **fields):
    fields = {"collection": "jobs", "expression": "@every 1m", "payload": {"k": 1}, **fields}
    return schedules.schedule_create(group=group, name=fields.pop("name", "tick"), **fields)


def keys(schedule: Schedule) -> list[str]:
    prefix = f"schedule:{schedule.pk}:"
    found = Message.objects.filter(idempotency_key__startswith=prefix).order_by("seq")
    return [k.removeprefix(prefix) for k in found.values_list("idempotency_key", flat=True) if k]


def test_create__first_boundary_is_after_now_and_collection_comes_from_the_chain(group):
    with clock.frozen(T0):
        schedule = make(group)
    assert schedule.next_at == datetime(2026, 6, 1, 12, 1, tzinfo=UTC)
    assert schedule.last_fired_at is None
    with clock.frozen(T0.replace(minute=1)):
        assert schedules.schedules_fire_due() == 1
    message = Message.objects.get()
    assert message.collection.group.slug == "acme"  # the ancestor declaring "jobs"
    assert message.payload == {"k": 1}
    assert message.enqueued_by == "schedule:acme-web/tick"


def test_create__the_groups_own_collection_wins_over_an_ancestors(group):
    own = queues.collection_create(group=group, name="jobs")
    with clock.frozen(T0):
        make(group)
    with clock.frozen(T0.replace(minute=2)):
        schedules.schedules_fire_due()
    assert Message.objects.get().collection_id == own.pk


def test_create__refuses_unknown_collection_duplicate_names_and_bad_fields(group):
    with pytest.raises(InvalidSchedule) as caught:
        make(group, collection="nope")
    assert list(caught.value.details) == ["collection"]
    make(group)
    with pytest.raises(ScheduleExists):
        make(group)
    with pytest.raises(InvalidSchedule):
        make(group, name="bad name")
    with pytest.raises(InvalidQueueInput):
        make(group, name="p", priority=5000)


def test_fire__each_boundary_once_however_often_it_is_asked(group):
    with clock.frozen(T0):
        schedule = make(group)
    with clock.frozen(T0.replace(minute=1, second=30)):
        assert schedules.schedules_fire_due() == 1
        assert schedules.schedules_fire_due() == 0
        # a ticker holding the old cursor (it read before the move) fires nothing
        assert schedules.schedule_fire(schedule=schedule, now=clock.now()) == 0
    assert keys(schedule) == ["2026-06-01T12:01:00+00:00"]


def test_fire__after_downtime_only_the_latest_catch_up_boundaries_fire(group):
    with clock.frozen(T0):
        one = make(group, name="one")
        three = make(group, name="three", catch_up=3)
    with clock.frozen(T0.replace(minute=10, second=5)):  # ten boundaries missed
        assert schedules.schedules_fire_due() == 4
    assert keys(one) == ["2026-06-01T12:10:00+00:00"]
    assert keys(three) == [f"2026-06-01T12:{m:02d}:00+00:00" for m in (8, 9, 10)]
    three.refresh_from_db()
    assert three.last_fired_at == datetime(2026, 6, 1, 12, 10, tzinfo=UTC)
    assert three.next_at == datetime(2026, 6, 1, 12, 11, tzinfo=UTC)


def test_pause_resume__paused_boundaries_are_skipped_and_firing_restarts_after_now(group):
    with clock.frozen(T0):
        schedule = make(group, catch_up=100)
        schedules.schedule_pause(schedule=schedule)
    with clock.frozen(T0.replace(minute=5)):
        assert schedules.schedules_fire_due() == 0
    with clock.frozen(T0.replace(minute=7, second=10)):
        schedules.schedule_resume(schedule=schedule)
        assert schedule.next_at == datetime(2026, 6, 1, 12, 8, tzinfo=UTC)
        assert schedules.schedules_fire_due() == 0
    with clock.frozen(T0.replace(minute=8)):
        assert schedules.schedules_fire_due() == 1
    assert keys(schedule) == ["2026-06-01T12:08:00+00:00"]


def test_run_now__enqueues_without_moving_the_cursor(group):
    with clock.frozen(T0):
        schedule = make(group)
        result = schedules.schedule_run_now(schedule=schedule)
    assert Message.objects.get().id == result.id
    schedule.refresh_from_db()
    assert schedule.next_at == datetime(2026, 6, 1, 12, 1, tzinfo=UTC)
    assert schedule.last_fired_at is None


def test_update__new_expression_restarts_the_cursor(group):
    with clock.frozen(T0):
        schedule = make(group)
        schedules.schedule_update(schedule=schedule, expression="0 * * * *", timezone="Asia/Tokyo")
    assert schedule.next_at == datetime(2026, 6, 1, 13, tzinfo=UTC)
    with pytest.raises(InvalidSchedule):
        schedules.schedule_update(schedule=schedule, timezone="Nowhere/Land")


def test_fire__a_refused_enqueue_skips_the_boundary_and_keeps_the_error(group):
    with clock.frozen(T0):
        schedule = make(group)
    queues.collection_get(group=group.parent, name="jobs").delete()
    with clock.frozen(T0.replace(minute=1)):
        assert schedules.schedules_fire_due() == 0
    schedule.refresh_from_db()
    assert "jobs" in schedule.last_error
    assert schedule.next_at == datetime(2026, 6, 1, 12, 2, tzinfo=UTC)


def test_upsert__creates_then_updates_in_place(group):
    fields = {"group": group, "name": "u", "collection": "jobs", "declared_in_code": True}
    first, created = schedules.schedule_upsert(**fields, expression="@daily")
    again, created_again = schedules.schedule_upsert(**fields, expression="@hourly")
    assert (created, created_again) == (True, False)
    assert again.pk == first.pk and again.expression == "@hourly" and again.declared_in_code
