"""Round trips of the hot operations, pinned (bench/session_bench.py measures
their throughput). Inside a test each service transaction is a savepoint:
SAVEPOINT and RELEASE stand where BEGIN and COMMIT run in production."""

from __future__ import annotations

import pytest

from queueproject import notify
from sessionqueues import services
from tests.sessionqueues.conftest import entry, put

TRANSACTION = 2  # begin + commit (savepoint + release in tests)


def wake_up() -> int:
    """One statement sends both wake-ups where LISTEN/NOTIFY is available."""
    return 1 if notify.listen_available() else 0


@pytest.mark.django_db
def test_insert__locks_aggregates_once_and_inserts(session, django_assert_num_queries):
    put(session, "first")
    # lock row; last position + visible count; INSERT; wake-up
    with django_assert_num_queries(TRANSACTION + 3 + wake_up()):
        services.entry_insert(session_id=session.pk, entry=entry("second"))


@pytest.mark.django_db
def test_insert__with_auto_merge_reads_the_tail_row_too(session, django_assert_num_queries):
    services.session_set_auto_merge(session_id=session.pk, enabled=True)
    put(session, "first", queued_by="user:1")
    with django_assert_num_queries(TRANSACTION + 4 + wake_up()):
        services.entry_insert(session_id=session.pk, entry=entry("other", queued_by="user:2"))


@pytest.mark.django_db
def test_reserve__locks_and_reserves_the_head_in_one_statement(session, django_assert_num_queries):
    put(session, "a")
    with django_assert_num_queries(TRANSACTION + 2):  # lock row; UPDATE … RETURNING
        row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None and row.content == "a"


@pytest.mark.django_db
def test_acknowledge__locks_and_deletes_in_one_statement(session, django_assert_num_queries):
    put(session, "a")
    row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    with django_assert_num_queries(TRANSACTION + 2):  # lock row; DELETE … RETURNING
        services.reservation_acknowledge(session_id=session.pk, reservation_id=row.reservation_id)


@pytest.mark.django_db
def test_dispatcher_reserve__locks_reserves_and_marks_busy(session, django_assert_num_queries):
    put(session, "a")
    services.session_set_agent_ready(session_id=session.pk, ready=True)
    # lock row; UPDATE … RETURNING (with the one-in-flight guard); agent busy
    with django_assert_num_queries(TRANSACTION + 3):
        row = services.reservation_reserve_for_agent(session_id=session.pk, holder="d1")
    assert row is not None


@pytest.mark.django_db
def test_dispatcher_acknowledge__and_ready_again_in_one_transaction(
    session, django_assert_num_queries
):
    put(session, "a")
    services.session_set_agent_ready(session_id=session.pk, ready=True)
    row = services.reservation_reserve_for_agent(session_id=session.pk, holder="d1")
    assert row is not None
    # lock row; DELETE … RETURNING; agent ready; wake-up
    with django_assert_num_queries(TRANSACTION + 3 + wake_up()):
        services.reservation_acknowledge_delivery(
            session_id=session.pk, reservation_id=row.reservation_id, holder="d1", agent_ready=True
        )
