"""Dropping every other session of the test database, as a failover or an
operator's ``pg_terminate_backend`` would, without tripping the test itself."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection

SETTLE_BEHIND_POOLER = 0.5


def terminate_other_sessions() -> int:
    """Terminate every session of the test database but this one; return how
    many. Waits until each has exited (``pg_terminate_backend``'s timeout
    argument): a session terminated but not yet gone can still be handed out,
    and behind a pooler in transaction mode the test's own next transaction
    would then run on a server connection that is about to die. Behind a
    pooler it also gives the pooler a moment to notice the closed server
    sockets and drop them from its pool."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        (count,) = cur.fetchone()
    if settings.DATABASE_TRANSACTION_POOLER:
        time.sleep(SETTLE_BEHIND_POOLER)
    return count
