"""Blocked heads (issue 20 point 4): each reason and its age
(``selectors.blocked_sessions`` / ``blocked_heads``), the dispatcher's record of
failing deliveries, and the operator's audited actions (``services.blocked``)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import selectors, services
from sessionqueues.dispatcher import Dispatcher
from sessionqueues.models import AuditAction, AuditRecord, AuditVia, DeliveryFailure, Session
from sessionqueues.selectors import BlockedAges, BlockedReason
from sessionqueues.services import Actor, SessionIdentity
from tests.sessionqueues.conftest import contents, put

pytestmark = pytest.mark.django_db

ACTOR = Actor(label="user:7", via=AuditVia.REST)
R = BlockedReason


def blocked(
    session: Session | None = None, **kwargs: Any
) -> dict[uuid.UUID, selectors.BlockedHead]:
    """The blocked heads of every session (or of ``session``'s task) by session id."""
    sessions = Session.objects.all()
    if session is not None:
        sessions = sessions.filter(task_id=session.task_id)
    now = kwargs.pop("now", None) or clock.now()
    ages = kwargs.pop("ages", None)
    rows = list(selectors.blocked_sessions(sessions=sessions, ages=ages, now=now, **kwargs))
    return {h.session.pk: h for h in selectors.blocked_heads(page=rows, ages=ages, now=now)}


def reasons(head: selectors.BlockedHead) -> list[BlockedReason]:
    return [b.reason for b in head.blockers]


@pytest.fixture
def ready(session):
    return services.session_set_agent_ready(session_id=session.pk, ready=True)


# --- the reasons --------------------------------------------------------------


def test_nothing_waiting_blocks_nothing(ready):
    services.session_set_auto_run(session_id=ready.pk, enabled=False)
    assert blocked(ready) == {}
    put(ready, "a")
    services.session_set_auto_run(session_id=ready.pk, enabled=True)
    assert blocked(ready) == {}  # ready, auto-run on, nothing failing: it moves


def test_auto_run_paused__with_entries_waiting_since_it_was_paused(ready):
    with clock.frozen():
        paused_at = clock.now()
        services.session_set_auto_run(session_id=ready.pk, enabled=False)
        clock.advance(90)
        head = put(ready, "a")
        put(ready, "b")
        found = blocked(ready)[ready.pk]
    assert reasons(found) == [R.AUTO_RUN_PAUSED]
    (blocker,) = found.blockers
    assert blocker.since == paused_at and blocker.age_seconds == pytest.approx(90)
    assert found.head is not None and found.head.pk == head.pk and found.waiting == 2


def test_agent_not_ready__only_past_the_threshold(session):
    put(session, "a")  # a new session's agent has never been ready
    with override_settings(SESSIONQUEUES_BLOCKED_NOT_READY_SECONDS=600), clock.frozen():
        assert blocked(session) == {}
        clock.advance(601)
        found = blocked(session)[session.pk]
    assert reasons(found) == [R.AGENT_NOT_READY]
    assert found.blockers[0].age_seconds == pytest.approx(601, abs=1)


def test_agent_not_ready__counts_from_when_the_agent_went_busy(ready):
    put(ready, "a")
    put(ready, "b")
    with override_settings(SESSIONQUEUES_BLOCKED_NOT_READY_SECONDS=60), clock.frozen():
        clock.advance(3600)
        services.reservation_reserve_for_agent(
            session_id=ready.pk, holder="d1"
        )  # delivers a: busy now
        busy_at = clock.now()
        clock.advance(30)
        assert blocked(ready) == {}
        clock.advance(31)
        found = blocked(ready)[ready.pk]
    assert reasons(found) == [R.AGENT_NOT_READY] and found.blockers[0].since == busy_at


def test_agent_not_ready__paused_sessions_say_paused_only(session):
    put(session, "a")
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    assert reasons(blocked(session, ages=BlockedAges.configured(0))[session.pk]) == [
        R.AUTO_RUN_PAUSED
    ]


def test_delivery_failing__the_record_with_failures_error_and_retry(ready):
    put(ready, "a")
    with clock.frozen():
        first = clock.now()
        services.delivery_failure_record(session_id=ready.pk, error="boom 1", retry_in=1)
        clock.advance(5)
        services.delivery_failure_record(session_id=ready.pk, error="boom 2", retry_in=2)
        found = blocked(ready)[ready.pk]
    (blocker,) = found.blockers
    assert blocker.reason is R.DELIVERY_FAILING and blocker.since == first
    assert blocker.details["failures"] == 2 and blocker.details["last_error"] == "boom 2"
    assert blocker.details["retry_at"] == first + timedelta(seconds=7)
    assert services.delivery_failure_clear(session_id=ready.pk)
    assert blocked(ready) == {}


def test_delivery_failing__not_listed_once_nothing_waits(ready):
    services.delivery_failure_record(session_id=ready.pk, error="boom", retry_in=1)
    assert blocked(ready) == {}
    assert services.delivery_failure_record(session_id=uuid.uuid4(), error="x", retry_in=1) is None


@pytest.mark.django_db(transaction=True)
def test_delivery_failing__recorded_by_the_dispatcher_and_cleared_by_a_delivery(ready):
    put(ready, "a")
    failing = Dispatcher(deliverer_name="fail", until_empty=True)
    failing.run()
    assert failing.stats.released == 1
    record = DeliveryFailure.objects.get(session=ready)
    assert record.failures == 1 and "DeliveryFailed" in record.last_error
    assert record.retry_at > record.last_failed_at
    assert reasons(blocked(ready)[ready.pk]) == [R.DELIVERY_FAILING]
    # A later process (empty memory) delivers: the record goes.
    delivering = Dispatcher(deliverer_name="log", until_empty=True)
    delivering.run()
    assert delivering.stats.delivered == 1
    assert not DeliveryFailure.objects.filter(session=ready).exists()


def test_reservation_stuck__past_the_deadline_with_its_details(ready):
    put(ready, "a")
    put(ready, "b")
    with override_settings(SESSIONQUEUES_RESERVATION_DEADLINE_SECONDS=120), clock.frozen():
        row, _ = services.reservation_reserve_for_delivery(session_id=ready.pk)
        assert row is not None
        clock.advance(119)
        assert blocked(ready) == {}
        clock.advance(2)
        found = blocked(ready)[ready.pk]
    (blocker,) = found.blockers
    assert blocker.reason is R.RESERVATION_STUCK and blocker.since == row.reserved_at
    (held,) = blocker.details["reservations"]
    assert held["reservation_id"] == row.reservation_id and held["entry_id"] == row.pk
    assert found.head is not None and found.head.content == "b"


def test_reasons_combine_and_the_longest_blocked_comes_first(task):
    older, newer = (services.session_create(task=task) for _ in range(2))
    with clock.frozen():
        for s in (older, newer):
            put(s, "a")
            services.session_set_agent_ready(session_id=s.pk, ready=True)
        services.session_set_auto_run(session_id=newer.pk, enabled=False)
        clock.advance(10)
        services.session_set_auto_run(session_id=older.pk, enabled=False)
        services.delivery_failure_record(session_id=older.pk, error="x", retry_in=1)
        clock.advance(10)
        rows = list(selectors.blocked_sessions(sessions=Session.objects.all()))
        heads = {h.session.pk: h for h in selectors.blocked_heads(page=rows)}
    assert [s.pk for s in rows] == [newer.pk, older.pk]
    assert reasons(heads[older.pk]) == [R.AUTO_RUN_PAUSED, R.DELIVERY_FAILING]
    assert heads[older.pk].age_seconds == pytest.approx(10)


def test_reason_filter_min_age_and_archived_tasks(task, session, other_session):
    put(session, "a")
    put(other_session, "b")
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    with clock.frozen():
        clock.advance(5)
        zero = BlockedAges.configured(0)
        assert set(blocked(session, ages=zero)) == {session.pk, other_session.pk}
        assert set(blocked(session, ages=zero, reason=R.AGENT_NOT_READY)) == {other_session.pk}
        assert set(blocked(session, ages=zero, reason=R.AUTO_RUN_PAUSED)) == {session.pk}
        assert blocked(session, ages=BlockedAges.configured(10)) == {}
    services.task_archive(task_id=task.pk)
    assert blocked(session, ages=BlockedAges.configured(0)) == {}


# --- the actions ----------------------------------------------------------------


def test_release_stuck__the_entry_is_back_at_its_position_and_audited(ready):
    put(ready, "a")
    put(ready, "b")
    row, _ = services.reservation_reserve_for_delivery(session_id=ready.pk)
    assert row is not None
    record = services.reservation_release_stuck(
        session_id=ready.pk, reservation_id=row.reservation_id, actor=ACTOR, note="stuck 1h"
    )
    assert contents(ready) == ["a", "b"]
    assert record.action == AuditAction.RELEASE_RESERVATION and record.actor == "user:7"
    assert record.via == AuditVia.REST and record.note == "stuck 1h"
    assert record.entry_id == row.pk and record.session_id == ready.pk
    assert record.details["released"] is True and record.details["position"] == 1
    assert AuditRecord.objects.count() == 1


def test_release_stuck__an_attempted_delivery_is_dropped_not_released(ready):
    put(ready, "a")
    row, _ = services.reservation_reserve_for_delivery(session_id=ready.pk)
    assert row is not None
    services.reservation_mark_attempted(session_id=ready.pk, reservation_ids=[row.reservation_id])
    record = services.reservation_release_stuck(
        session_id=ready.pk, reservation_id=row.reservation_id, actor=ACTOR
    )
    assert record.details["released"] is False
    assert contents(ready) == []


def test_release_stuck__a_closed_reservation_changes_and_records_nothing(ready):
    put(ready, "a")
    for reservation in [uuid.uuid4(), "not-a-uuid"]:
        with pytest.raises(err.ReservationChanged):
            services.reservation_release_stuck(
                session_id=ready.pk, reservation_id=reservation, actor=ACTOR
            )
    assert not AuditRecord.objects.exists()


def test_skip_head__moves_it_behind_the_next_visible_entry(ready):
    a, b, c = (put(ready, t) for t in "abc")
    services.reservation_reserve_for_delivery(session_id=ready.pk)  # a, reserved: keeps its slot
    record = services.queue_skip_head(session_id=ready.pk, head_id=b.pk, actor=ACTOR)
    assert contents(ready) == ["c", "b"]
    assert record.entry_id == b.pk and record.details["now_head"] == str(c.pk)
    assert (record.details["from_position"], record.details["to_position"]) == (2, 3)
    assert a.pk is not None


def test_skip_head__another_head_or_nothing_behind_is_queue_changed(ready):
    a = put(ready, "a")
    with pytest.raises(err.QueueChanged):
        services.queue_skip_head(session_id=ready.pk, actor=ACTOR)  # nothing behind a
    put(ready, "b")
    for seen in [uuid.uuid4(), "not-a-uuid"]:
        with pytest.raises(err.QueueChanged):
            services.queue_skip_head(session_id=ready.pk, head_id=seen, actor=ACTOR)
    assert contents(ready) == ["a", "b"] and not AuditRecord.objects.exists()
    services.queue_skip_head(session_id=ready.pk, head_id=a.pk, actor=ACTOR)
    assert contents(ready) == ["b", "a"]


def test_resume_auto_run__turns_it_on_and_records_whether_it_changed(session):
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    first = services.session_resume_auto_run(session_id=session.pk, actor=ACTOR)
    again = services.session_resume_auto_run(session_id=session.pk, actor=ACTOR, note="twice")
    assert Session.objects.get(pk=session.pk).auto_run is True
    assert first.details == {"changed": True} and again.details == {"changed": False}
    assert [r.action for r in AuditRecord.objects.order_by("id")] == [
        AuditAction.RESUME_AUTO_RUN
    ] * 2


def test_actions__a_stale_identity_is_refused_and_nothing_recorded(ready):
    put(ready, "a")
    put(ready, "b")
    row, _ = services.reservation_reserve_for_delivery(session_id=ready.pk)
    assert row is not None
    stale = SessionIdentity.of(ready)
    services.session_reincarnate(session_id=ready.pk)
    calls = [
        lambda: services.reservation_release_stuck(
            session_id=ready.pk, reservation_id=row.reservation_id, actor=ACTOR, identity=stale
        ),
        lambda: services.queue_skip_head(session_id=ready.pk, actor=ACTOR, identity=stale),
        lambda: services.session_resume_auto_run(session_id=ready.pk, actor=ACTOR, identity=stale),
    ]
    for call in calls:
        with pytest.raises(err.SessionIdentityMismatch):
            call()
    assert not AuditRecord.objects.exists()
