"""Bearer authentication's bookkeeping (principals/authentication.py) and what
an authenticated request writes: a read writes nothing (issue 21)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from groupqueues import services
from principals.models import ApiToken
from tests.conftest import bearer
from tests.factories import make_token

pytestmark = pytest.mark.django_db

WRITES = re.compile(r"\bINSERT\s+INTO\b|\bUPDATE\s+\S+\s+SET\b|\bDELETE\s+FROM\b", re.I)


@pytest.fixture(autouse=True)
def _statements_with_their_text(settings):
    """Prepared statements are logged without their text (PostgreSQL)."""
    settings.QUEUE_PREPARED_STATEMENTS = False


def writes(queries: CaptureQueriesContext) -> list[str]:
    """The statements that change rows (raw SQL and CTEs included)."""
    statements = (q["sql"] or "" for q in queries.captured_queries)
    return [sql for sql in statements if WRITES.search(sql)]


def test_last_used__recorded_at_most_once_a_minute(tree):
    token, secret = make_token(app=tree["app_child"], scopes=["queue:read"])
    client = bearer(secret)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            assert client.get("/api/groups/").status_code == 200
    assert len([q for q in writes(queries) if "principals_apitoken" in q]) == 1
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now() - timedelta(seconds=61))
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/groups/").status_code == 200
    assert len(writes(queries)) == 1
    last_used = ApiToken.objects.get(pk=token.pk).last_used_at
    assert last_used is not None and last_used > timezone.now() - timedelta(seconds=5)


def test_reads__write_nothing(tree):
    """Authentication, throttling and the view together: once the token's use
    is recorded, reading a queue's stats writes nothing at all."""
    services.collection_create(group=tree["child"], name="jobs")
    _, secret = make_token(app=tree["app_child"], scopes=["queue:read"])
    client = bearer(secret)
    url = "/api/groups/child/queues/jobs/stats/"
    assert client.get(url).status_code == 200  # records the token's use
    with CaptureQueriesContext(connection) as queries:
        for _ in range(20):
            assert client.get(url).status_code == 200
    assert writes(queries) == []


def test_enqueue__writes_only_its_message(tree):
    services.collection_create(group=tree["child"], name="jobs")
    _, secret = make_token(app=tree["app_child"], scopes=["queue:write"])
    client = bearer(secret)
    url = "/api/groups/child/queues/jobs/messages/"
    assert client.post(url, {"payload": 0}, format="json").status_code == 201
    with CaptureQueriesContext(connection) as queries:
        assert client.post(url, {"payload": 1}, format="json").status_code == 201
    (statement,) = writes(queries)
    assert re.search(r'INSERT INTO "?groupqueues_message"? ', statement)
