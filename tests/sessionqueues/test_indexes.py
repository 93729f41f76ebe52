"""The hot queries use their indexes (PostgreSQL EXPLAIN)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sessionqueues import positions, services
from sessionqueues.models import QueuedMessage, Session
from tests.factories import AppFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def sessions():
    """300 sessions of 10 entries each, analysed."""
    task = services.task_create(app=AppFactory())
    made = Session.objects.bulk_create([Session(task=task) for _ in range(300)])
    now = timezone.now()
    QueuedMessage.objects.bulk_create(
        QueuedMessage(
            session=s, task=task, position=p, content="x", queued_by="user:1", queued_at=now
        )
        for s in made
        for p in range(1, 11)
    )
    with connection.cursor() as cur:
        cur.execute("ANALYZE sessionqueues_queuedmessage")
    return made


def test_head_lookup_uses_the_session_position_index(sessions):
    head = QueuedMessage.objects.filter(session=sessions[7], reservation_id__isnull=True).order_by(
        "position"
    )[:1]
    assert "qm_session_position" in head.explain()


def test_tail_lookup_uses_the_session_position_index(sessions):
    with CaptureQueriesContext(connection) as captured:
        positions.tail(sessions[7])
    sql = captured.captured_queries[0]["sql"]
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "qm_session_position" in plan and "Seq Scan" not in plan
