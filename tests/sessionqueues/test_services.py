"""Session queue operations (SPEC §3): effects and errors, on both databases."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import selectors, services
from sessionqueues.models import PendingMove, QueuedMessage, SendNowClaim, Session, Task
from sessionqueues.services import SendNowExpectation, SessionIdentity
from tests.factories import AppFactory
from tests.sessionqueues.conftest import contents, entry, put

pytestmark = pytest.mark.django_db


def positions(session: Session) -> list[int]:
    return list(
        QueuedMessage.objects.filter(session=session)
        .order_by("position")
        .values_list("position", flat=True)
    )


# --- insert, cap, append, coalesce ------------------------------------------


def test_insert__is_fifo(session):
    for text in ["a", "b", "c"]:
        put(session, text)
    assert contents(session) == ["a", "b", "c"]
    assert positions(session) == [1, 2, 3]
    head = services.entry_take_head(session_id=session.pk)
    assert head is not None
    assert head.content == "a"
    assert contents(session) == ["b", "c"]


def test_insert__at_cap_raises_queue_full(session):
    for i in range(3):
        services.entry_insert(session_id=session.pk, entry=entry(str(i)), max_per_session=3)
    with pytest.raises(err.QueueFull):
        services.entry_insert(session_id=session.pk, entry=entry("x"), max_per_session=3)
    assert contents(session) == ["0", "1", "2"]


@override_settings(SESSIONQUEUES_MAX_PER_SESSION=2)
def test_insert__cap_comes_from_the_setting_and_zero_disables_it(session):
    put(session, "a")
    put(session, "b")
    with pytest.raises(err.QueueFull):
        put(session, "c")
    for i in range(5):
        services.entry_insert(session_id=session.pk, entry=entry(str(i)), max_per_session=0)
    assert len(contents(session)) == 7


def test_append_or_insert_tail__same_owner_appends_with_separator(session):
    put(session, "first", "user:1")
    result = services.entry_append_or_insert_tail(
        session_id=session.pk, entry=entry("second", "user:1")
    )
    assert result.appended
    assert contents(session) == ["first\n\n---\n\nsecond"]


def test_append_or_insert_tail__other_owner_inserts_and_honours_cap(session):
    put(session, "first", "user:1")
    result = services.entry_append_or_insert_tail(
        session_id=session.pk, entry=entry("second", "user:2")
    )
    assert not result.appended
    assert contents(session) == ["first", "second"]
    with pytest.raises(err.QueueFull):
        services.entry_append_or_insert_tail(
            session_id=session.pk, entry=entry("third", "user:3"), max_per_session=2
        )


def test_coalesce__replace_keeps_id_and_position(session):
    put(session, "a")
    first = services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("v1", coalesce_key="ci")
    )
    put(session, "c")
    second = services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("v2", model="m2", coalesce_key="ci")
    )
    assert second.replaced
    assert second.entry.pk == first.entry.pk
    assert second.entry.position == first.entry.position == 2
    assert contents(session) == ["a", "v2", "c"]


def test_coalesce__other_owner_does_not_match(session):
    services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("mine", "user:1", coalesce_key="k")
    )
    services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("theirs", "user:2", coalesce_key="k")
    )
    assert contents(session) == ["mine", "theirs"]


def test_coalesce__missing_without_insert_is_not_found(session):
    with pytest.raises(err.SessionQueueNotFound):
        services.entry_upsert_by_coalesce_key(
            session_id=session.pk, entry=entry("x", coalesce_key="k"), allow_insert=False
        )
    assert contents(session) == []


# --- lifecycle --------------------------------------------------------------


def test_lifecycle__accepted_at_the_current_generation(session, task):
    result = services.entry_lifecycle_upsert(
        session_id=session.pk, entry=entry("ci failed", "server", coalesce_key="ci"), generation=0
    )
    assert result.accepted
    assert result.admission is not None
    assert result.admission.entry.durable


def test_lifecycle__refused_on_stale_generation(session, task):
    services.queue_purge_task(task_id=task.pk)
    result = services.entry_lifecycle_upsert(
        session_id=session.pk, entry=entry("late", "server", coalesce_key="ci"), generation=0
    )
    assert not result.accepted
    assert contents(session) == []


def test_lifecycle__refused_on_archived_or_missing_task(session, task):
    services.task_archive(task_id=task.pk)
    archived = services.entry_lifecycle_upsert(
        session_id=session.pk, entry=entry("x", "server", coalesce_key="ci"), generation=0
    )
    missing = services.entry_lifecycle_upsert(
        session_id=uuid.uuid4(), entry=entry("x", "server", coalesce_key="ci"), generation=0
    )
    assert not archived.accepted and not missing.accepted
    assert contents(session) == []


# --- restore, requeue -------------------------------------------------------


def test_restore__returns_a_taken_entry_to_its_position_over_the_cap(session):
    for text in ["a", "b", "c"]:
        services.entry_insert(session_id=session.pk, entry=entry(text), max_per_session=3)
    taken = services.entry_take_head(session_id=session.pk)
    assert taken is not None
    services.entry_insert(session_id=session.pk, entry=entry("d"), max_per_session=3)
    restored = services.entry_restore(session_id=session.pk, entry=taken)
    assert restored.pk == taken.pk
    assert contents(session) == ["a", "b", "c", "d"]


def test_requeue__empty_queue_gets_position_1(session):
    services.entry_requeue(session_id=session.pk, entry=entry("r"))
    assert positions(session) == [1]


def test_requeue__head_at_1_shifts_positions_up(session):
    put(session, "a")
    put(session, "b")
    services.entry_requeue(session_id=session.pk, entry=entry("r"))
    assert contents(session) == ["r", "a", "b"]
    assert positions(session) == [1, 2, 3]


def test_requeue__stays_at_the_head_through_10_supersede_cycles(session):
    put(session, "older")
    services.entry_requeue(session_id=session.pk, entry=entry("retry"))
    for cycle in range(10):
        services.entry_insert(session_id=session.pk, entry=entry(f"new-{cycle}"), max_per_session=0)
        taken = services.entry_take_head(session_id=session.pk)
        assert taken is not None
        assert taken.content == "retry"
        services.entry_requeue(session_id=session.pk, entry=entry("retry"))
        assert contents(session)[0] == "retry"
    assert contents(session)[:2] == ["retry", "older"]
    assert all(p > 0 for p in positions(session))


def test_requeue__coalesce_match_is_replaced_in_place(session):
    put(session, "a")
    first = services.entry_requeue(session_id=session.pk, entry=entry("r1", coalesce_key="k"))
    second = services.entry_requeue(session_id=session.pk, entry=entry("r2", coalesce_key="k"))
    assert second.replaced and second.entry.pk == first.entry.pk
    assert contents(session) == ["r2", "a"]


# --- take, reserve, acknowledge, release -----------------------------------


def test_take_head__empty_returns_none(session):
    assert services.entry_take_head(session_id=session.pk) is None


def test_reserve_head__durable_entries_stay_reserved_until_acknowledged(session):
    put(session, "plain")
    services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("durable", "server", coalesce_key="k", durable=True)
    )
    plain = services.reservation_reserve_head(session_id=session.pk)
    assert plain is not None
    assert plain.content == "plain" and not QueuedMessage.objects.filter(pk=plain.pk).exists()
    durable = services.reservation_reserve_head(session_id=session.pk)
    assert durable is not None
    assert durable.reserved and QueuedMessage.objects.filter(pk=durable.pk).exists()
    assert contents(session) == []
    services.reservation_acknowledge(session_id=session.pk, reservation_id=durable.reservation_id)
    assert not QueuedMessage.objects.filter(session=session).exists()


def test_reserve_if_auto_run__distinguishes_paused_from_empty(session):
    assert services.reservation_reserve_head_if_auto_run(session_id=session.pk) == (None, True)
    put(session, "a")
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    assert services.reservation_reserve_head_if_auto_run(session_id=session.pk) == (None, False)
    assert contents(session) == ["a"]


def test_reserve_for_delivery__keeps_the_entry_bound_to_the_incarnation(session):
    put(session, "a")
    put(session, "b")
    row, auto_run = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    assert auto_run and row.content == "a"
    assert row.reservation_owner == session.incarnation_id
    assert contents(session) == ["b"]
    assert selectors.queue_status(session=session).count == 1


def test_queue_status__generations_are_the_task_and_session_generations(session):
    row = put(session, "a")
    services.entry_delete(session_id=session.pk, entry_id=row.pk)
    services.queue_purge_task(task_id=session.task_id)
    session.refresh_from_db()
    assert selectors.queue_status(session=session).generations == {"task": 1, "session": 2}


def test_acknowledge__another_reservation_is_reservation_changed(session):
    put(session, "a")
    row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    with pytest.raises(err.ReservationChanged):
        services.reservation_acknowledge(session_id=session.pk, reservation_id=uuid.uuid4())
    services.reservation_acknowledge(session_id=session.pk, reservation_id=row.reservation_id)
    with pytest.raises(err.ReservationChanged):
        services.reservation_acknowledge(session_id=session.pk, reservation_id=row.reservation_id)


def test_release__puts_the_entry_back_at_its_position(session):
    put(session, "a")
    put(session, "b")
    row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    put(session, "c")
    released, back = services.reservation_release(
        session_id=session.pk, reservation_id=row.reservation_id
    )
    assert back and released.position == 1
    assert contents(session) == ["a", "b", "c"]


def test_release__after_delivery_attempted_drops_the_entry(session):
    put(session, "a")
    row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    services.reservation_mark_attempted(session_id=session.pk, reservation_ids=[row.reservation_id])
    _, back = services.reservation_release(session_id=session.pk, reservation_id=row.reservation_id)
    assert not back
    assert not QueuedMessage.objects.filter(session=session).exists()


def test_reserved_entries_are_invisible_to_edits_and_deletes(session):
    put(session, "a")
    row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    with pytest.raises(err.SessionQueueNotFound):
        services.entry_edit(session_id=session.pk, entry_id=row.pk, queued_by="user:1", content="x")
    with pytest.raises(err.SessionQueueNotFound):
        services.entry_delete(session_id=session.pk, entry_id=row.pk)
    assert services.queue_delete_all(session_id=session.pk) == 0
    assert QueuedMessage.objects.filter(pk=row.pk).exists()


def test_pause_auto_run_if_pending__only_with_a_visible_entry(session):
    assert not services.session_pause_auto_run_if_pending(session_id=session.pk)
    put(session, "a")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    assert not services.session_pause_auto_run_if_pending(session_id=session.pk)
    put(session, "b")
    assert services.session_pause_auto_run_if_pending(session_id=session.pk)
    session.refresh_from_db()
    assert session.auto_run is False


# --- update, delete ---------------------------------------------------------


def test_update__owner_edits_content_and_null_metadata_removes_a_key(session):
    row = put(session, "a", metadata={"keep": 1, "drop": 2})
    updated = services.entry_edit(
        session_id=session.pk,
        entry_id=row.pk,
        queued_by="user:1",
        content="b",
        metadata_updates={"drop": None, "new": 3},
    )
    assert updated.content == "b" and updated.metadata == {"keep": 1, "new": 3}


def test_update__another_owner_or_a_reserved_owner_is_not_found(session):
    row = put(session, "a", "user:1")
    agent = put(session, "b", "agent")
    with pytest.raises(err.SessionQueueNotFound):
        services.entry_edit(session_id=session.pk, entry_id=row.pk, queued_by="user:2")
    with pytest.raises(err.SessionQueueNotFound):
        services.entry_edit(session_id=session.pk, entry_id=agent.pk, queued_by="agent")


def test_delete__an_id_of_another_session_is_not_found(session, other_session):
    row = put(other_session, "theirs")
    with pytest.raises(err.SessionQueueNotFound):
        services.entry_delete(session_id=session.pk, entry_id=row.pk)
    assert contents(other_session) == ["theirs"]


def test_delete_all__removes_visible_entries_and_bumps_the_generation(session):
    put(session, "a")
    put(session, "b")
    assert services.queue_delete_all(session_id=session.pk) == 2
    session.refresh_from_db()
    assert session.generation == 1


# --- merge ------------------------------------------------------------------


def test_merge_up__joins_content_attachments_and_references(session):
    put(session, "a", attachments=[{"type": "file", "name": "x"}], metadata={"references": [1]})
    source = put(
        session, "b", attachments=[{"type": "file", "name": "y"}], metadata={"references": [1, 2]}
    )
    target = services.entry_merge_up(session_id=session.pk, entry_id=source.pk, queued_by="user:1")
    assert target.content == "a\n\nb"
    assert [a["name"] for a in target.attachments] == ["x", "y"]
    assert target.metadata["references"] == [1, 2]
    assert target.queued_at >= source.queued_at
    assert contents(session) == ["a\n\nb"]


def test_merge_up__references_are_capped(session):
    put(session, "a", metadata={"references": list(range(15))})
    source = put(session, "b", metadata={"references": list(range(10, 30))})
    target = services.entry_merge_up(session_id=session.pk, entry_id=source.pk, queued_by="user:1")
    assert target.metadata["references"] == list(range(services.MAX_REFERENCES))


def test_merge_up__head_source_has_no_target(session):
    head = put(session, "a")
    with pytest.raises(err.NoMergeTarget):
        services.entry_merge_up(session_id=session.pk, entry_id=head.pk, queued_by="user:1")


def test_merge_up__mismatched_owners_are_refused(session):
    put(session, "a", "user:1")
    source = put(session, "b", "user:2")
    for caller in ["user:1", "user:2"]:
        with pytest.raises(err.NoMergeTarget):
            services.entry_merge_up(session_id=session.pk, entry_id=source.pk, queued_by=caller)
    assert contents(session) == ["a", "b"]


def test_merge_up__agent_entries_need_the_same_sender_task(session):
    put(session, "a", "agent", metadata={"sender_task_id": "t1"})
    other = put(session, "b", "agent", metadata={"sender_task_id": "t2"})
    with pytest.raises(err.NoMergeTarget):
        services.entry_merge_up(session_id=session.pk, entry_id=other.pk, queued_by="user:1")
    same = put(session, "c", "agent", metadata={"sender_task_id": "t2"})
    target = services.entry_merge_up(session_id=session.pk, entry_id=same.pk, queued_by="user:1")
    assert target.pk == other.pk and target.content == "b\n\nc"


def test_merge_up__reserved_target_is_refused(session):
    put(session, "a")
    source = put(session, "b")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    with pytest.raises(err.NoMergeTarget):
        services.entry_merge_up(session_id=session.pk, entry_id=source.pk, queued_by="user:1")


@override_settings(SESSIONQUEUES_MANUAL_MERGE=False)
def test_merge_up__disabled_globally(session):
    put(session, "a")
    source = put(session, "b")
    with pytest.raises(err.MergeDisabled):
        services.entry_merge_up(session_id=session.pk, entry_id=source.pk, queued_by="user:1")


def test_merge_up__missing_source_is_not_found(session):
    with pytest.raises(err.SessionQueueNotFound):
        services.entry_merge_up(session_id=session.pk, entry_id=uuid.uuid4(), queued_by="user:1")


# --- auto-merge -------------------------------------------------------------


def test_auto_merge__chain_of_three_folds_into_one(session):
    services.session_set_auto_merge(session_id=session.pk, enabled=True)
    results = [services.entry_insert(session_id=session.pk, entry=entry(t)) for t in "abc"]
    assert [r.merged for r in results] == [False, True, True]
    assert contents(session) == ["a\n\nb\n\nc"]


def test_auto_merge__incompatible_entries_stay_apart(session):
    services.session_set_auto_merge(session_id=session.pk, enabled=True)
    put(session, "a", model="m1")
    put(session, "b", model="m2")
    put(session, "c", model="m2", plan_mode=True)
    put(session, "d", "user:2", model="m2", plan_mode=True)
    put(session, "e", "user:2", model="m2", plan_mode=True, metadata={"x": 1})
    assert len(contents(session)) == 5


def test_auto_merge__a_folding_candidate_is_admitted_at_full_capacity(session):
    services.session_set_auto_merge(session_id=session.pk, enabled=True)
    services.entry_insert(session_id=session.pk, entry=entry("x", "user:2"), max_per_session=2)
    services.entry_insert(session_id=session.pk, entry=entry("a"), max_per_session=2)
    folded = services.entry_insert(session_id=session.pk, entry=entry("b"), max_per_session=2)
    assert folded.merged
    with pytest.raises(err.QueueFull):
        services.entry_insert(session_id=session.pk, entry=entry("c", "user:3"), max_per_session=2)
    assert contents(session) == ["x", "a\n\nb"]


def test_auto_merge__inherits_the_global_setting(task):
    session = services.session_create(task=task)
    with override_settings(SESSIONQUEUES_AUTO_MERGE=False):
        put(session, "a")
        put(session, "b")
    assert contents(session) == ["a", "b"]
    put(session, "c")
    assert contents(session) == ["a", "b\n\nc"]


def test_auto_merge__coalesce_and_requeue_paths_never_merge(session):
    services.session_set_auto_merge(session_id=session.pk, enabled=True)
    put(session, "a")
    services.entry_upsert_by_coalesce_key(session_id=session.pk, entry=entry("b", coalesce_key="k"))
    services.entry_requeue(session_id=session.pk, entry=entry("r"))
    assert contents(session) == ["r", "a", "b"]


# --- reorder ----------------------------------------------------------------


def test_reorder__exact_permutation_is_applied_and_compacted(session):
    rows = [put(session, t) for t in "abc"]
    services.entry_take_head(session_id=session.pk)
    services.queue_reorder(session_id=session.pk, ordered_ids=[rows[2].pk, rows[1].pk])
    assert contents(session) == ["c", "b"]
    assert positions(session) == [1, 2]


def test_reorder__reserved_entries_keep_their_slots(session):
    rows = [put(session, t) for t in "abc"]
    services.reservation_reserve_for_delivery(session_id=session.pk)
    services.queue_reorder(session_id=session.pk, ordered_ids=[rows[2].pk, rows[1].pk])
    ordered = QueuedMessage.objects.filter(session=session).order_by("position")
    assert [(r.content, r.position, r.reserved) for r in ordered] == [
        ("a", 1, True),
        ("c", 2, False),
        ("b", 3, False),
    ]


@pytest.mark.parametrize("drift", ["missing", "extra", "duplicate", "reserved", "unknown"])
def test_reorder__drift_is_queue_changed_and_changes_nothing(session, other_session, drift):
    rows = [put(session, t) for t in "abcd"]
    reserved, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert reserved is not None
    visible = [r.pk for r in rows[1:]][::-1]
    submitted = {
        "missing": visible[:-1],
        "extra": [*visible, put(other_session, "x").pk],
        "duplicate": [*visible[:-1], visible[0]],
        "reserved": [*visible, reserved.pk],
        "unknown": [*visible[:-1], uuid.uuid4()],
    }[drift]
    before = positions(session), contents(session)
    with pytest.raises(err.QueueChanged):
        services.queue_reorder(session_id=session.pk, ordered_ids=submitted)
    assert (positions(session), contents(session)) == before


# --- send now ---------------------------------------------------------------


def expect(*rows):
    return [SendNowExpectation(id=r.pk, content=r.content) for r in rows]


def test_send_now__claims_in_queue_order_and_turns_auto_run_on(session):
    a, _b, c = (put(session, t) for t in "abc")
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    _claim, dispatch = services.queue_send_now_claim(session_id=session.pk, expected=expect(c, a))
    assert dispatch["content"] == "a\n\nc"
    assert dispatch["sources"] == [str(a.pk), str(c.pk)]
    assert contents(session) == ["b"]
    session.refresh_from_db()
    assert session.auto_run


def test_send_now__drift_is_claim_changed_and_nothing_moves(session):
    a, b = put(session, "a"), put(session, "b")
    stale = [SendNowExpectation(id=a.pk, content="a"), SendNowExpectation(id=b.pk, content="old")]
    with pytest.raises(err.ClaimChanged):
        services.queue_send_now_claim(session_id=session.pk, expected=stale)
    with pytest.raises(err.ClaimChanged):
        services.queue_send_now_claim(
            session_id=session.pk, expected=[SendNowExpectation(id=uuid.uuid4(), content="a")]
        )
    assert contents(session) == ["a", "b"]
    assert not SendNowClaim.objects.exists()


def test_send_now__reserved_source_is_reservation_conflict(session):
    a = put(session, "a")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    with pytest.raises(err.ReservationConflict):
        services.queue_send_now_claim(session_id=session.pk, expected=expect(a))


def test_send_now__empty_selection_is_invalid(session):
    with pytest.raises(err.InvalidSessionInput):
        services.queue_send_now_claim(session_id=session.pk, expected=[])


def test_send_now__restore_puts_every_source_back(session):
    a, _b, c = (put(session, t) for t in "abc")
    durable = services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("d", "server", coalesce_key="k", durable=True)
    ).entry
    claim, _ = services.queue_send_now_claim(session_id=session.pk, expected=expect(a, c, durable))
    assert contents(session) == ["b"]
    put(session, "e")
    services.queue_send_now_restore(session_id=session.pk, claim_id=claim.pk)
    assert contents(session) == ["a", "b", "c", "d", "e"]
    assert not SendNowClaim.objects.exists()


def test_send_now__restore_after_a_destructive_change_is_refused(session):
    a, _b, c = (put(session, t) for t in "abc")
    claim, _ = services.queue_send_now_claim(session_id=session.pk, expected=expect(a))
    services.entry_delete(session_id=session.pk, entry_id=c.pk)
    with pytest.raises(err.ClaimChanged):
        services.queue_send_now_restore(session_id=session.pk, claim_id=claim.pk)
    assert contents(session) == ["b"]


def test_send_now__acknowledge_removes_durable_sources_all_or_nothing(session, task):
    a = put(session, "a")
    durable = services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("d", "server", coalesce_key="k", durable=True)
    ).entry
    claim, _ = services.queue_send_now_claim(session_id=session.pk, expected=expect(a, durable))
    assert services.queue_send_now_acknowledge(session_id=session.pk, claim_id=claim.pk) == 1
    assert not QueuedMessage.objects.filter(session=session).exists()
    with pytest.raises(err.SessionQueueNotFound):
        services.queue_send_now_acknowledge(session_id=session.pk, claim_id=claim.pk)


def test_send_now__acknowledge_after_purge_is_claim_changed(session, task):
    durable = services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("d", "server", coalesce_key="k", durable=True)
    ).entry
    claim, _ = services.queue_send_now_claim(session_id=session.pk, expected=expect(durable))
    QueuedMessage.objects.filter(pk=durable.pk).delete()  # a purge elsewhere removed it
    with pytest.raises(err.ClaimChanged):
        services.queue_send_now_acknowledge(session_id=session.pk, claim_id=claim.pk)


# --- purge, archive, transfer, replace --------------------------------------


def test_purge__removes_reserved_entries_too_and_bumps_the_generation(session, other_session, task):
    put(session, "a")
    put(session, "b")
    put(other_session, "c")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    removed, generation = services.queue_purge_task(task_id=task.pk)
    assert (removed, generation) == (3, 1)
    assert Task.objects.get(pk=task.pk).generation == 1
    assert not QueuedMessage.objects.filter(task=task).exists()


def test_transfer__appends_after_the_destination_and_combines_auto_run(session, other_session):
    put(other_session, "dest")
    put(session, "a")
    put(session, "b")
    services.pending_move_set(session_id=session.pk, move={"move_id": "m1"})
    services.session_set_auto_run(session_id=other_session.pk, enabled=True)
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    destination = services.queue_transfer(source_id=session.pk, destination_id=other_session.pk)
    assert contents(other_session) == ["dest", "a", "b"]
    assert positions(other_session) == [1, 2, 3]
    assert contents(session) == []
    assert destination.auto_run is False
    assert PendingMove.objects.get(session=other_session).move_id == "m1"
    assert not PendingMove.objects.filter(session=session).exists()


def test_transfer__across_tasks_is_session_identity_mismatch(session):
    other_task = services.task_create(app=session.task.app)
    foreign = services.session_create(task=other_task)
    put(session, "a")
    with pytest.raises(err.SessionIdentityMismatch):
        services.queue_transfer(source_id=session.pk, destination_id=foreign.pk)
    assert contents(session) == ["a"]


def test_identity__a_stale_incarnation_is_refused(session):
    identity = SessionIdentity.of(session)
    put(session, "a")
    services.session_reincarnate(session_id=session.pk)
    with pytest.raises(err.SessionIdentityMismatch):
        services.entry_insert(session_id=session.pk, entry=entry("b"), identity=identity)
    wrong_task = SessionIdentity(uuid.uuid4(), session.pk, identity.incarnation_id)
    with pytest.raises(err.SessionIdentityMismatch):
        services.entry_take_head(session_id=session.pk, identity=wrong_task)
    assert contents(session) == ["a"]


def test_replace_session__keeps_ids_positions_and_owners(session):
    rows = [put(session, t, f"user:{i}") for i, t in enumerate("ab")]
    snap = [services.snapshot(r) for r in rows]
    services.queue_delete_all(session_id=session.pk)
    services.queue_replace(session_id=session.pk, entries=snap, pending_move={"move_id": "m"})
    restored = selectors.visible_entries(session)
    assert [(r.pk, r.position, r.queued_by) for r in restored] == [
        (r.pk, r.position, r.queued_by) for r in rows
    ]
    move = selectors.pending_move_get(session=session)
    assert move is not None
    assert move.move_id == "m"


# --- pending moves ----------------------------------------------------------


def test_pending_move__set_get_take(session):
    services.pending_move_set(session_id=session.pk, move={"move_id": "m1", "actor": "user:1"})
    services.pending_move_set(session_id=session.pk, move={"move_id": "m2"})
    move = selectors.pending_move_get(session=session)
    assert move is not None
    assert move.move_id == "m2"
    taken = services.pending_move_take(session_id=session.pk)
    assert taken is not None
    assert taken.move_id == "m2"
    assert services.pending_move_take(session_id=session.pk) is None


def test_pending_move__stale_after_24_hours(session):
    with clock.frozen():
        services.pending_move_set(session_id=session.pk, move={"move_id": "m1"})
        clock.advance(24 * 3600 + 1)
        assert [r["move_id"] for r in selectors.stale_pending_moves()] == ["m1"]
        assert services.pending_move_take(session_id=session.pk) is None


def test_pending_move__delete_if_match_compares_the_record_and_drops_the_entry(session):
    handoff = put(session, "handoff")
    services.pending_move_set(session_id=session.pk, move={"move_id": "m1"})
    record = selectors.pending_moves()[0]
    assert not services.pending_move_delete_if_match(expected={**record, "move_id": "other"})
    assert services.pending_move_delete_if_match(expected=record, handoff_entry_id=handoff.pk)
    assert selectors.pending_move_get(session=session) is None
    assert contents(session) == []


def test_count_pending_by_tasks__excludes_reserved_entries(session, task):
    put(session, "a")
    put(session, "b")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    other = services.task_create(app=task.app)
    assert selectors.count_pending_by_tasks(task_ids=[task.pk, other.pk]) == {
        str(task.pk): 1,
        str(other.pk): 0,
    }


# --- the remaining operations (issue 20 point 2) --------------------------------


def test_acknowledge_by_id__removes_the_reserved_entry_whatever_its_owner(session):
    put(session, "mine")
    services.entry_upsert_by_coalesce_key(
        session_id=session.pk, entry=entry("lifecycle", "server", coalesce_key="k", durable=True)
    )
    services.reservation_reserve_for_delivery(session_id=session.pk)
    reserved, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert reserved is not None and reserved.queued_by == "server"
    gone = services.reservation_acknowledge_by_id(session_id=session.pk, entry_id=reserved.pk)
    assert gone.pk == reserved.pk
    assert not QueuedMessage.objects.filter(pk=reserved.pk).exists()
    assert QueuedMessage.objects.filter(session=session).count() == 1  # "mine", still reserved


def test_acknowledge_by_id__an_unreserved_missing_or_foreign_entry_is_reservation_changed(
    session, other_session
):
    visible = put(session, "a")
    foreign = put(other_session, "x")
    services.reservation_reserve_for_delivery(session_id=other_session.pk)
    for entry_id in [visible.pk, uuid.uuid4(), foreign.pk, "not-a-uuid"]:
        with pytest.raises(err.ReservationChanged):
            services.reservation_acknowledge_by_id(session_id=session.pk, entry_id=entry_id)
    assert contents(session) == ["a"]
    assert QueuedMessage.objects.filter(pk=foreign.pk).exists()


def test_acknowledge_by_id__a_stale_identity_is_refused(session):
    put(session, "a")
    reserved, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert reserved is not None
    stale = SessionIdentity.of(session)
    services.session_reincarnate(session_id=session.pk)
    with pytest.raises(err.SessionIdentityMismatch):
        services.reservation_acknowledge_by_id(
            session_id=session.pk, entry_id=reserved.pk, identity=stale
        )
    assert QueuedMessage.objects.filter(pk=reserved.pk).exists()


def test_auto_merge_up__folds_a_compatible_entry_into_the_one_above(session):
    put(session, "a", metadata={"references": ["r1"]})
    b = put(session, "b", metadata={"references": ["r2"]})
    generation = Session.objects.get(pk=session.pk).generation
    target = services.entry_auto_merge_up(session_id=session.pk, entry_id=b.pk)
    assert target is not None and target.content == "a\n\nb"
    assert target.metadata == {"references": ["r1", "r2"]}
    assert contents(session) == ["a\n\nb"]
    assert Session.objects.get(pk=session.pk).generation == generation + 1


@pytest.mark.parametrize(
    "above, source",
    [
        ({"queued_by": "user:2"}, {}),  # another owner
        ({"model": "m1"}, {"model": "m2"}),
        ({"plan_mode": True}, {}),
        ({"metadata": {"k": 1}}, {"metadata": {"k": 2}}),
        ({}, {"coalesce_key": "c"}),
        ({"durable": True}, {}),
    ],
)
def test_auto_merge_up__an_incompatible_pair_is_skipped_unchanged(session, above, source):
    put(session, "a", **{"queued_by": "user:1", **above})
    b = put(session, "b", **{"queued_by": "user:1", **source})
    assert services.entry_auto_merge_up(session_id=session.pk, entry_id=b.pk) is None
    assert contents(session) == ["a", "b"]


def test_auto_merge_up__head_missing_or_reserved_target_is_a_skip(session, other_session):
    a = put(session, "a")
    b = put(session, "b")
    assert services.entry_auto_merge_up(session_id=session.pk, entry_id=a.pk) is None
    assert services.entry_auto_merge_up(session_id=session.pk, entry_id=uuid.uuid4()) is None
    foreign = put(other_session, "x")
    assert services.entry_auto_merge_up(session_id=session.pk, entry_id=foreign.pk) is None
    services.reservation_reserve_for_delivery(session_id=session.pk)  # reserves a
    assert services.entry_auto_merge_up(session_id=session.pk, entry_id=b.pk) is None
    assert QueuedMessage.objects.filter(session=session).count() == 2


def test_purge_session__removes_reserved_entries_the_move_and_claims(session, other_session):
    a, b, _c = (put(session, t) for t in "abc")
    put(other_session, "stays")
    services.reservation_reserve_for_delivery(session_id=session.pk)
    services.queue_send_now_claim(session_id=session.pk, expected=[SendNowExpectation(b.pk, "b")])
    services.pending_move_set(session_id=session.pk, move={"move_id": "m"})
    generation = Session.objects.get(pk=session.pk).generation
    assert services.queue_purge_session(session_id=session.pk) == 2  # a (reserved) and c
    assert not QueuedMessage.objects.filter(session=session).exists()
    assert not PendingMove.objects.filter(session=session).exists()
    assert not SendNowClaim.objects.filter(session=session).exists()
    assert Session.objects.get(pk=session.pk).generation == generation + 1
    assert contents(other_session) == ["stays"]
    assert a.pk is not None


def test_restore__fenced_by_the_generations_it_was_taken_at(session, task):
    put(session, "a")
    put(session, "b")
    taken = services.entry_take_head(session_id=session.pk)
    assert taken is not None
    read = services.Generations(task=0, session=0)
    services.queue_purge_task(task_id=task.pk)
    with pytest.raises(err.QueueChanged) as refused:
        services.entry_restore(session_id=session.pk, entry=taken, generations=read)
    assert refused.value.details == {"generations": {"task": 1, "session": 1}}
    assert contents(session) == []
    current = services.Generations(task=1, session=1)
    services.entry_restore(session_id=session.pk, entry=taken, generations=current)
    assert contents(session) == ["a"]


def test_restore__an_id_stored_in_another_session_is_entry_exists(session, other_session):
    theirs = put(other_session, "x")
    clone = QueuedMessage(id=theirs.pk, content="x", queued_by="user:1", position=1)
    clone.queued_at = theirs.queued_at
    with pytest.raises(err.EntryExists):
        services.entry_restore(session_id=session.pk, entry=clone)
    assert contents(session) == [] and contents(other_session) == ["x"]


def test_requeue__fenced_by_generations(session):
    put(session, "a")
    services.queue_delete_all(session_id=session.pk)
    with pytest.raises(err.QueueChanged):
        services.entry_requeue(
            session_id=session.pk, entry=entry("r"), generations=services.Generations(session=0)
        )
    services.entry_requeue(
        session_id=session.pk, entry=entry("r"), generations=services.Generations(session=1)
    )
    assert contents(session) == ["r"]


@pytest.mark.parametrize("repeat", ["id", "position"])
def test_replace_session__a_repeated_id_or_position_changes_nothing(session, repeat):
    rows = [put(session, t) for t in "ab"]
    snap = [services.snapshot(r) for r in rows]
    snap[1][repeat] = snap[0][repeat]
    with pytest.raises(err.QueueChanged):
        services.queue_replace(session_id=session.pk, entries=snap, pending_move=None)
    assert contents(session) == ["a", "b"]


def test_replace_session__an_id_of_another_session_or_stale_generations_change_nothing(
    session, other_session
):
    put(session, "a")
    theirs = services.snapshot(put(other_session, "x"))
    with pytest.raises(err.EntryExists):
        services.queue_replace(session_id=session.pk, entries=[theirs], pending_move=None)
    with pytest.raises(err.QueueChanged):
        services.queue_replace(
            session_id=session.pk,
            entries=[],
            pending_move=None,
            generations=services.Generations(session=5),
        )
    assert contents(session) == ["a"] and contents(other_session) == ["x"]


def test_pending_move__delete_if_match_checks_the_identity(session):
    services.pending_move_set(session_id=session.pk, move={"move_id": "m1"})
    record = selectors.pending_moves()[0]
    stale = SessionIdentity.of(session)
    services.session_reincarnate(session_id=session.pk)
    with pytest.raises(err.SessionIdentityMismatch):
        services.pending_move_delete_if_match(expected=record, identity=stale)
    assert selectors.pending_move_get(session=session) is not None


def test_count_pending_by_tasks__scoped_to_an_app_counts_other_apps_as_zero(session, task):
    put(session, "a")
    foreign_task = services.task_create(app=AppFactory())
    put(services.session_create(task=foreign_task), "x")
    counts = selectors.count_pending_by_tasks(task_ids=[task.pk, foreign_task.pk], app=task.app)
    assert counts == {str(task.pk): 1, str(foreign_task.pk): 0}


def test_auto_run_and_agent_ready__changes_are_stamped(session):
    with clock.frozen():
        stamped = clock.now()
        services.session_set_auto_run(session_id=session.pk, enabled=False)
        services.session_set_agent_ready(session_id=session.pk, ready=True)
        clock.advance(60)
        services.session_set_auto_run(session_id=session.pk, enabled=False)  # unchanged
        services.session_set_agent_ready(session_id=session.pk, ready=True)
    fresh = Session.objects.get(pk=session.pk)
    assert fresh.auto_run_changed_at == stamped and fresh.agent_ready_changed_at == stamped
