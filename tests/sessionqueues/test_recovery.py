"""Crash recovery of reservations (``services.reservation_recover``, the
selectors it reads, ``manage.py session_recover``): each rule of
docs/session-dispatch.md, on both databases. The SIGKILL of a real
dispatcher is ``test_dispatch_crash.py``."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from queueproject import clock
from queueproject.workers_registry import worker_heartbeat
from sessionqueues import selectors, services
from sessionqueues.models import QueuedMessage, SendNowClaim, Session
from sessionqueues.services import SendNowExpectation
from sessionqueues.services.recovery import Action, Reason, _settle
from tests.sessionqueues.conftest import contents, entry, put

pytestmark = pytest.mark.django_db


def ready(session: Session) -> Session:
    return services.session_set_agent_ready(session_id=session.pk, ready=True)


def reserve_as(session: Session, holder: str, **kwargs: Any) -> QueuedMessage:
    ready(session)
    row = services.reservation_reserve_for_agent(session_id=session.pk, holder=holder, **kwargs)
    assert row is not None
    return row


def lifecycle(session: Session, content: str, generation: int = 0) -> QueuedMessage:
    result = services.entry_lifecycle_upsert(
        session_id=session.pk,
        entry=entry(content, queued_by="workflow", coalesce_key=content),
        generation=generation,
    )
    assert result.accepted and result.admission is not None
    return result.admission.entry


def stored(session: Session) -> list[tuple[str, bool]]:
    rows = QueuedMessage.objects.filter(session=session).order_by("position")
    return [(row.content, row.reserved) for row in rows]


def beat(worker_id: str, kind: str = services.DISPATCHER_KIND) -> None:
    worker_heartbeat(id=worker_id, kind=kind, queues=["sessions"], counts={},
                     started_at=clock.now())  # fmt: skip


# --- the selectors -------------------------------------------------------------


def test_durable_lifecycle_entries__every_session_in_fifo_order(session, other_session):
    put(session, "ordinary")
    lifecycle(session, "l1")
    lifecycle(other_session, "l2")
    lifecycle(session, "l3")
    services.reservation_reserve_head(session_id=session.pk)  # "ordinary" taken
    services.reservation_reserve_head(session_id=session.pk)  # l1 reserved, stays listed
    found = selectors.durable_lifecycle_entries()
    by_session = {(r.session_id, r.content) for r in found}
    assert by_session == {(session.pk, "l1"), (session.pk, "l3"), (other_session.pk, "l2")}
    ours = [r.content for r in found if r.session_id == session.pk]
    assert ours == ["l1", "l3"]


def test_durable_delivery_entries__durable_ones_and_every_reservation(session, other_session):
    put(session, "visible ordinary")
    lifecycle(session, "durable")
    put(other_session, "held by a dispatcher")
    put(other_session, "waiting")
    reserve_as(other_session, "d1")
    found = {r.content for r in selectors.durable_delivery_entries()}
    assert found == {"durable", "held by a dispatcher"}


def test_recovery_candidates__reservations_and_stale_lifecycle_entries_only(session, other_session):
    lifecycle(session, "fresh lifecycle")
    put(session, "visible ordinary")
    put(other_session, "reserved")
    reserve_as(other_session, "d1")
    stale = lifecycle(other_session, "stale lifecycle")
    QueuedMessage.objects.filter(pk=stale.pk).update(lifecycle_generation=-1)
    found = {r.content for r in selectors.recovery_candidates()}
    assert found == {"reserved", "stale lifecycle"}


# --- a dispatcher that is gone ---------------------------------------------------


def test_holder_gone__released_at_its_position_and_the_agent_ready_again(session):
    for text in "abc":
        put(session, text)
    reserve_as(session, "d1")
    assert Session.objects.get(pk=session.pk).agent_ready is False
    done = services.reservation_recover(gone={"d1"})
    assert [(d.reason, d.action, d.holder) for d in done] == [
        (Reason.HOLDER_GONE, Action.RELEASED, "d1")
    ]
    assert stored(session) == [("a", False), ("b", False), ("c", False)]
    assert [r.position for r in QueuedMessage.objects.filter(session=session)] == [1, 2, 3]
    assert Session.objects.get(pk=session.pk).agent_ready is True
    assert QueuedMessage.objects.get(content="a").reserved_by == ""


def test_holder_gone__after_the_recovery_the_released_head_is_served_first(session):
    put(session, "a")
    put(session, "b")
    reserve_as(session, "d1")
    services.session_set_agent_ready(session_id=session.pk, ready=True)  # the agent says ready
    # The open reservation holds the session: "b" may not overtake "a".
    assert services.reservation_reserve_for_agent(session_id=session.pk, holder="d2") is None
    assert selectors.dispatchable_sessions() == []
    services.reservation_recover(gone={"d1"})
    row = services.reservation_reserve_for_agent(session_id=session.pk, holder="d2")
    assert row is not None and row.content == "a"


def test_live_holder__is_left_alone(session):
    put(session, "a")
    reserve_as(session, "me")
    assert services.reservation_recover(gone={"me"}, live={"me"}) == []
    assert services.reservation_recover() == []  # registry off in tests: nobody is judged gone
    assert stored(session) == [("a", True)]


def test_registry__a_dispatcher_without_a_live_row_is_gone(session, other_session, settings):
    settings.QUEUE_WORKER_REGISTRY = True
    settings.QUEUE_WORKER_EXPIRE_SECONDS = 30
    put(session, "held by a live dispatcher")
    put(other_session, "held by a dead dispatcher")
    with clock.frozen():
        beat("alive")
        beat("dead")
        beat("worker-not-dispatcher", kind="queue_worker")
        reserve_as(session, "alive")
        reserve_as(other_session, "dead")
        clock.advance(20)
        beat("alive")
        assert services.reservation_recover(dry_run=True) == []  # "dead" seen 20 s ago
        clock.advance(15)  # "dead": 35 s unseen
        done = services.reservation_recover()
    assert [(d.holder, d.action) for d in done] == [("dead", Action.RELEASED)]
    assert stored(session) == [("held by a live dispatcher", True)]
    assert stored(other_session) == [("held by a dead dispatcher", False)]


def test_registry__a_live_row_of_another_kind_does_not_keep_a_reservation(session, settings):
    settings.QUEUE_WORKER_REGISTRY = True
    put(session, "a")
    beat("host-7", kind="queue_worker")  # a queue worker took over the pid of a dead dispatcher
    reserve_as(session, "host-7")
    assert [d.reason for d in services.reservation_recover()] == [Reason.HOLDER_GONE]


# --- at most once, stale generations --------------------------------------------------


def test_attempted__dropped_never_released(session):
    put(session, "a")
    put(session, "b")
    row = reserve_as(session, "d1")
    services.reservation_mark_attempted(session_id=session.pk, reservation_ids=[row.reservation_id])
    done = services.reservation_recover(gone={"d1"})
    assert [d.action for d in done] == [Action.DROPPED]
    assert stored(session) == [("b", False)]
    assert Session.objects.get(pk=session.pk).agent_ready is False  # the agent may have it


def test_at_most_once_reserve__marks_attempted_at_once(session):
    put(session, "a")
    row = reserve_as(session, "d1", at_most_once=True)
    assert row.delivery_attempted
    assert [d.action for d in services.reservation_recover(gone={"d1"})] == [Action.DROPPED]
    assert stored(session) == []
    # Dropped stays dropped: another pass finds nothing to bring back.
    assert services.reservation_recover(gone={"d1"}) == []
    assert stored(session) == []


def test_stale_lifecycle__removed_reserved_or_not(session, other_session):
    snapshot = services.snapshot(lifecycle(session, "stale retry"))
    services.queue_purge_task(task_id=session.task_id)  # generation 0 → 1
    # A replace with a snapshot from before the purge brings the old retry back.
    services.queue_replace(session_id=session.pk, entries=[snapshot], pending_move=None)
    fresh = lifecycle(other_session, "fresh", generation=1)
    put(other_session, "after")
    held = reserve_as(other_session, "d1")
    assert held.pk == fresh.pk
    generation = Session.objects.get(pk=session.pk).generation
    done = services.reservation_recover(gone={"d1"})
    assert {(d.entry_id, d.reason, d.action) for d in done} == {
        (snapshot_id(snapshot), Reason.STALE_GENERATION, Action.REMOVED),
        (fresh.pk, Reason.HOLDER_GONE, Action.RELEASED),
    }
    assert stored(session) == []
    assert Session.objects.get(pk=session.pk).generation == generation + 1  # a delete
    assert stored(other_session) == [("fresh", False), ("after", False)]


def snapshot_id(data: dict[str, Any]) -> Any:
    import uuid

    return uuid.UUID(data["id"])


def test_stale_lifecycle_reserved_by_a_gone_holder__removed_not_released(session):
    lifecycle(session, "old")
    row = reserve_as(session, "d1")
    QueuedMessage.objects.filter(pk=row.pk).update(lifecycle_generation=-1)  # purged since
    assert [d.action for d in services.reservation_recover(gone={"d1"})] == [Action.REMOVED]
    assert stored(session) == []


# --- reservations bound to the incarnation only -----------------------------------------


def test_rest_reservation__kept_while_the_incarnation_lives(session):
    put(session, "a")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    assert services.reservation_recover(gone={"d1"}) == []
    assert stored(session) == [("a", True)]


def test_rest_reservation__released_once_the_session_is_recreated(session):
    put(session, "a")
    put(session, "b")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    services.session_reincarnate(session_id=session.pk)
    done = services.reservation_recover()
    assert [(d.reason, d.action, d.holder) for d in done] == [
        (Reason.INCARNATION_GONE, Action.RELEASED, "")
    ]
    assert stored(session) == [("a", False), ("b", False)]
    assert Session.objects.get(pk=session.pk).agent_ready is False  # not ours to change


def test_send_now_claim__its_durable_sources_come_back_and_the_claim_closes(session):
    source = lifecycle(session, "durable source")
    services.queue_send_now_claim(
        session_id=session.pk,
        expected=[SendNowExpectation(id=source.pk, content=source.content)],
    )
    services.session_reincarnate(session_id=session.pk)
    done = services.reservation_recover()
    assert [d.action for d in done] == [Action.RELEASED]
    assert stored(session) == [("durable source", False)]
    assert not SendNowClaim.objects.exists()


# --- dry runs and races -----------------------------------------------------------------------


def test_dry_run__reports_the_plan_and_changes_nothing(session):
    put(session, "a")
    reserve_as(session, "d1")
    plan = services.reservation_recover(gone={"d1"}, dry_run=True)
    assert [(d.action, d.position) for d in plan] == [(Action.RELEASED, 1)]
    assert stored(session) == [("a", True)]


def test_a_reservation_settled_meanwhile_is_left_alone(session):
    put(session, "a")
    put(session, "b")
    row = reserve_as(session, "d1")
    plan = services.reservation_recover(gone={"d1"}, dry_run=True)
    services.reservation_acknowledge(session_id=session.pk, reservation_id=row.reservation_id)
    services.session_set_agent_ready(session_id=session.pk, ready=True)
    again = reserve_as(session, "d1")  # the next head, under a new reservation
    assert _settle(session.pk, plan) == []
    assert stored(session) == [("b", True)]
    assert again.reservation_id != row.reservation_id


# --- manage.py session_recover ------------------------------------------------------------------


def recover_command(*args: str) -> str:
    out = StringIO()
    call_command("session_recover", *args, stdout=out)
    return out.getvalue()


def test_command__dry_run_then_recover_a_named_holder(session):
    put(session, "a")
    row = reserve_as(session, "host-1")
    text = recover_command("--holder", "host-1", "--dry-run")
    assert f"entry {row.pk} of session {session.pk} (position 1) would be released" in text
    assert "released=1 dropped=0 removed=0 (dry run)" in text
    assert stored(session) == [("a", True)]
    data = json.loads(recover_command("--holder", "host-1", "--json"))
    assert data["dry_run"] is False
    assert data["counts"] == {"released": 1, "dropped": 0, "removed": 0}
    [item] = data["entries"]
    assert item == {
        "entry_id": str(row.pk),
        "session_id": str(session.pk),
        "task_id": str(session.task_id),
        "position": 1,
        "reservation_id": str(row.reservation_id),
        "holder": "host-1",
        "reason": "holder_gone",
        "action": "released",
    }
    assert stored(session) == [("a", False)]


def test_command__nothing_to_do(session):
    put(session, "a")
    reserve_as(session, "host-1")
    assert recover_command().strip() == "released=0 dropped=0 removed=0"
    assert contents(session) == []


def test_acknowledge_delivery__only_by_its_holder(session):
    from sessionqueues import exceptions as err

    put(session, "a")
    row = reserve_as(session, "d1")
    with pytest.raises(err.ReservationChanged):
        services.reservation_acknowledge_delivery(
            session_id=session.pk, reservation_id=row.reservation_id, holder="d2", agent_ready=True
        )
    services.reservation_acknowledge_delivery(
        session_id=session.pk, reservation_id=row.reservation_id, holder="d1", agent_ready=True
    )
    assert stored(session) == [] and Session.objects.get(pk=session.pk).agent_ready is True
