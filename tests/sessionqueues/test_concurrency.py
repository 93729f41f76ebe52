"""Concurrent callers on one session are serialised by its lock row (PostgreSQL,
real threads, one connection each)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from sessionqueues import exceptions as err
from sessionqueues import services
from sessionqueues.models import QueuedMessage, Session
from sessionqueues.services import Admission, NewEntry
from tests.factories import AppFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def run_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` in ``count`` threads released together; results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def runner(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


@pytest.fixture
def session() -> Session:
    task = services.task_create(app=AppFactory())
    created = services.session_create(task=task)
    return services.session_set_auto_merge(session_id=created.pk, enabled=False)


def insert(session: Session, text: str, **kwargs: Any) -> Admission:
    return services.entry_insert(
        session_id=session.pk, entry=NewEntry(content=text, queued_by="user:1"), **kwargs
    )


def test_16_concurrent_inserts_never_exceed_the_cap(session):
    results = run_threads(16, lambda i: insert(session, f"m{i}", max_per_session=10))
    full = [r for r in results if isinstance(r, err.QueueFull)]
    assert len(full) == 6
    assert not [r for r in results if isinstance(r, Exception) and r not in full]
    positions = sorted(
        QueuedMessage.objects.filter(session=session).values_list("position", flat=True)
    )
    assert positions == list(range(1, 11))


def test_concurrent_reserve_never_hands_out_one_entry_twice(session):
    for i in range(8):
        insert(session, f"m{i}")
    results = run_threads(
        12, lambda i: services.reservation_reserve_for_delivery(session_id=session.pk)[0]
    )
    assert not [r for r in results if isinstance(r, Exception)]
    handed = [r.pk for r in results if r is not None]
    assert len(handed) == len(set(handed)) == 8


def test_reorder_racing_an_insert_is_never_a_mixed_order(session):
    for attempt in range(5):
        services.queue_delete_all(session_id=session.pk)
        rows = [insert(session, f"{attempt}-{i}").entry for i in range(4)]
        wanted = [r.pk for r in reversed(rows)]

        def work(i: int, wanted: list = wanted) -> Any:
            if i == 0:
                return services.queue_reorder(session_id=session.pk, ordered_ids=wanted)
            return insert(session, "new")

        reorder, _ = run_threads(2, work)
        order = list(
            QueuedMessage.objects.filter(session=session)
            .order_by("position")
            .values_list("pk", flat=True)
        )
        if isinstance(reorder, err.QueueChanged):
            assert order[:4] == [r.pk for r in rows]
        else:
            assert not isinstance(reorder, Exception), reorder
            assert order[:4] == wanted
        assert len(order) == 5
