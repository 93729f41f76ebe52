"""The one raw-SQL runner: Django counts its statements; on PostgreSQL it
prepares them (once per connection, generic plans) through one kept psycopg
cursor, and with QUEUE_PREPARED_STATEMENTS off it sends plain statements."""

import threading
from typing import Any

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from rest_framework.request import Request

from principals import sql as principals_sql
from principals.throttling import PrincipalRateThrottle
from queueproject import rawsql
from queueproject.leases import lease_try
from queueproject.notify import notify
from tests.conftest import is_postgres

pytestmark = pytest.mark.django_db

COUNTER = {"key": "token:1", "window_start": 0, "n": 1}


def prepared_like(marker: str) -> list[tuple[int, int]]:
    """(generic_plans, custom_plans) of this connection's prepared statements with ``marker``."""
    return [
        (generic, custom)
        for text, generic, custom in rawsql.fetch_all(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        )
        if marker in text
    ]


def test_helpers__run_one_statement_each_and_django_counts_them():
    with CaptureQueriesContext(connection) as queries:
        assert rawsql.fetch_one(principals_sql.RATE_COUNTER_ADD, COUNTER) == (1,)
        assert rawsql.fetch_one(principals_sql.RATE_COUNTER_ADD, COUNTER) == (2,)
        assert rawsql.fetch_all("SELECT key, count FROM principals_ratecounter") == [("token:1", 2)]
        assert rawsql.execute(principals_sql.RATE_COUNTER_PRUNE, {"before": 1}) == 1
    assert len(queries) == 4
    assert rawsql.fetch_one("SELECT count(*) FROM principals_ratecounter") == (0,)


def _kept_cursor_in_a_new_thread() -> object:
    box = []

    def run():
        try:
            with rawsql.cursor() as cur:
                box.append(cur.cursor)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return box[0]


@pytest.mark.postgres
def test_cursor__one_psycopg_cursor_is_kept_per_connection():
    with rawsql.cursor() as first:
        kept = first.cursor
    with rawsql.cursor() as second:
        assert second.cursor is kept
        assert not kept.closed  # closing the wrapper leaves it open
    assert _kept_cursor_in_a_new_thread() is not kept  # another connection, its own


@pytest.mark.postgres
def test_shared_statements__are_prepared_once_and_keep_their_generic_plan(rf):
    throttle, request = throttle_and_request(rf, limit=10)  # below 20: every request is shared
    for _ in range(6):
        assert lease_try(name="m", owner="a", ttl=10)
        assert throttle.allow_request(request, None)
        notify("dq_test_prepared")
    assert rawsql.fetch_one("SHOW plan_cache_mode") == ("force_generic_plan",)
    assert rawsql.fetch_one("SHOW jit") == ("off",)  # generic plans' costs are blind
    assert prepared_like("INSERT INTO queueproject_lease") == [(6, 0)]
    assert prepared_like("INSERT INTO principals_ratecounter") == [(6, 0)]
    assert prepared_like("pg_notify") == [(6, 0)]


@pytest.mark.postgres
def test_results__are_read_in_binary():
    with rawsql.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.cursor.pgresult.fformat(0) == 1  # 1: binary


def test_prepared_statements__off_sends_plain_statements(settings, rf):
    settings.QUEUE_PREPARED_STATEMENTS = False  # e.g. behind PgBouncer in transaction mode
    throttle, request = throttle_and_request(rf, limit=10)
    assert lease_try(name="m", owner="a", ttl=10)
    assert throttle.allow_request(request, None)
    notify("dq_test_plain")
    if is_postgres():
        assert rawsql.fetch_all("SELECT name FROM pg_prepared_statements") == []


def throttle_and_request(
    rf: RequestFactory, *, limit: int
) -> tuple[PrincipalRateThrottle, Request]:
    throttle = PrincipalRateThrottle()
    throttle.num_requests, throttle.duration = limit, 3600
    request = Request(rf.get("/"))  # what a DRF view hands its throttles
    request.auth = type("Token", (), {"pk": 7})()
    return throttle, request


def test_throttle__counts_in_the_database(rf):
    throttle, request = throttle_and_request(rf, limit=2)
    with CaptureQueriesContext(connection) as queries:
        assert [throttle.allow_request(request, None) for _ in range(3)] == [True, True, False]
    assert len(queries) == 2  # the admitted ones; a refusal writes nothing
    assert rawsql.fetch_one("SELECT count FROM principals_ratecounter") == (2,)


# --- model rows: one statement, the instances the ORM would give -------------


def _same_fields(ours: Any, orms: Any) -> None:
    assert type(ours) is type(orms)
    for field in type(orms)._meta.concrete_fields:
        mine, theirs = getattr(ours, field.attname), getattr(orms, field.attname)
        assert mine == theirs and type(mine) is type(theirs), field.name
    assert ours._state.db == orms._state.db and not ours._state.adding


def test_model_reader__token_with_its_app_and_group_as_the_orm_reads_them():
    from datetime import UTC, datetime

    from principals.authentication import token_with_owner
    from principals.models import ApiToken
    from principals.tokens import hash_secret
    from tests.factories import AppFactory, make_token

    app = AppFactory()
    token, secret = make_token(
        scopes=["queue:read", "queue:write"], app=app,
        expires_at=datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC),
    )  # fmt: skip
    ours: Any = token_with_owner(hash_secret(secret))
    orms = ApiToken.objects.select_related("user", "app__group").get(pk=token.pk)
    _same_fields(ours, orms)
    assert ours.scopes == ["queue:read", "queue:write"] and ours.user is None
    _same_fields(ours.app, orms.app)
    assert orms.app is not None
    _same_fields(ours.app.group, orms.app.group)
    assert token_with_owner(hash_secret(secret + "x")) is None


def test_model_reader__token_of_a_user():
    from principals.authentication import token_with_owner
    from principals.models import ApiToken
    from principals.tokens import hash_secret
    from tests.factories import UserFactory, make_token

    user = UserFactory()
    token, secret = make_token(scopes=["queue:read"], user=user)
    ours: Any = token_with_owner(hash_secret(secret))
    orms = ApiToken.objects.select_related("user").get(pk=token.pk)
    _same_fields(ours.user, orms.user)
    assert ours.app is None and ours.user.is_active is True


def test_model_reader__queue_with_its_group_by_slug_and_by_id():
    from groupqueues import selectors, services
    from groupqueues.models import Collection
    from tests.factories import GroupFactory

    group = GroupFactory()
    created = services.collection_create(group=group, name="jobs", max_depth=7)
    orms = Collection.objects.select_related("group").get(pk=created.pk)
    for ref in (group.slug, str(group.pk)):
        ours: Any = selectors.collection_at(group_ref=ref, name="jobs")
        _same_fields(ours, orms)
        _same_fields(ours.group, orms.group)
    assert selectors.collection_at(group_ref=group.slug, name="other") is None
