"""The hot queries use their indexes (PostgreSQL EXPLAIN)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from sessionqueues import services
from sessionqueues.models import QueuedMessage, Session
from tests.factories import AppFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_head_lookup_uses_the_session_position_index():
    task = services.task_create(app=AppFactory())
    sessions = Session.objects.bulk_create([Session(task=task) for _ in range(300)])
    now = timezone.now()
    QueuedMessage.objects.bulk_create(
        QueuedMessage(
            session=s, task=task, position=p, content="x", queued_by="user:1", queued_at=now
        )
        for s in sessions
        for p in range(1, 11)
    )
    with connection.cursor() as cur:
        cur.execute("ANALYZE sessionqueues_queuedmessage")
    head = QueuedMessage.objects.filter(session=sessions[7], reservation_id__isnull=True).order_by(
        "position"
    )[:1]
    assert "qm_session_position" in head.explain()
