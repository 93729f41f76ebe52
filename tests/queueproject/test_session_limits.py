"""Worker session limits (issue 16): a worker's PostgreSQL connections end an
idle transaction and a statement after the configured time, so a stuck
handler cannot hold back vacuum for longer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.backends.signals import connection_created

from queueproject import session_limits


@pytest.fixture
def limited(transactional_db: None, settings: Any) -> Iterator[None]:
    settings.QUEUE_WORKER_IDLE_IN_TRANSACTION_TIMEOUT_MS = 700
    settings.QUEUE_WORKER_STATEMENT_TIMEOUT_MS = 400
    connection.ensure_connection()
    session_limits.install_session_limits()
    yield
    connection_created.disconnect(dispatch_uid=session_limits.DISPATCH_UID)
    connection.close()  # the next test's connection has the server's defaults


def show(name: str) -> str:
    with connection.cursor() as cur:
        cur.execute(f"SHOW {name}")
        return str(cur.fetchone()[0])


@pytest.mark.postgres
def test_limits__set_on_open_and_new_connections(limited):
    assert (show("idle_in_transaction_session_timeout"), show("statement_timeout")) == (
        "700ms", "400ms",
    )  # fmt: skip
    connection.close()
    assert show("statement_timeout") == "400ms"  # a new connection gets them too


@pytest.mark.postgres
def test_limits__a_long_statement_is_cancelled(limited):
    with pytest.raises(OperationalError, match="statement timeout"), connection.cursor() as cur:
        cur.execute("SELECT pg_sleep(3)")


@pytest.mark.postgres
def test_limits__an_idle_transaction_is_ended(limited):
    import time

    ended = pytest.raises(DatabaseError, match="idle-in-transaction timeout")
    with ended, transaction.atomic():
        show("server_version")
        time.sleep(1.5)  # idle in transaction longer than 700 ms
        show("server_version")  # the server ended the session
    connection.close()


def test_limits__nothing_on_sqlite(db):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    session_limits.apply_session_limits(connection=connection)  # a no-op, no error


@pytest.mark.postgres
def test_limits__none_set_behind_a_transaction_pooler(transactional_db, settings):
    """A session SET through PgBouncer in transaction mode would stay on the
    server connection for its next client: behind a pooler none is made."""
    settings.DATABASE_TRANSACTION_POOLER = True
    settings.QUEUE_WORKER_STATEMENT_TIMEOUT_MS = 400
    before = show("statement_timeout")
    session_limits.install_session_limits()
    try:
        connection.close()
        assert show("statement_timeout") == before
    finally:
        connection_created.disconnect(dispatch_uid=session_limits.DISPATCH_UID)
        connection.close()
