"""Session limits of worker processes (issue 16; PostgreSQL): every database
connection a worker or dispatcher opens sets
``idle_in_transaction_session_timeout`` (``QUEUE_WORKER_IDLE_IN_TRANSACTION_
TIMEOUT_MS``, default 60 s) and ``statement_timeout``
(``QUEUE_WORKER_STATEMENT_TIMEOUT_MS``, default 300 s; 0 turns either off), so
a handler stuck inside a transaction cannot hold back the xmin horizon (and
the vacuum of every queue table) for longer than that: the server ends its
session and the worker's reconnect logic takes over. Web processes keep the
server's defaults.

Behind a transaction pooler (``DATABASE_TRANSACTION_POOLER``) no limit is set:
a session ``set_config`` would stay on the server connection for whichever
client has it next, and this client's next transaction may run on another.
The limits then come from the worker's role (``ALTER ROLE … SET``) or the
pooler's own timeouts (docs/production.md, "Behind PgBouncer").

``name_connections`` names a worker's connections (``application_name`` in
``pg_stat_activity``), so that an operator sees whose they are and counts
them per process."""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.backends.signals import connection_created

from queueproject import rawsql, sql
from queueproject.conf import product_settings

DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000
DEFAULT_STATEMENT_TIMEOUT_MS = 300_000
DISPATCH_UID = "queueproject.session_limits"
APPLICATION_NAME_MAX = 63  # PostgreSQL's NAMEDATALEN - 1


def limits() -> tuple[int, int]:
    """(idle in transaction timeout, statement timeout) in milliseconds."""
    return (
        int(getattr(settings, "QUEUE_WORKER_IDLE_IN_TRANSACTION_TIMEOUT_MS",
                    DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS)),
        int(getattr(settings, "QUEUE_WORKER_STATEMENT_TIMEOUT_MS", DEFAULT_STATEMENT_TIMEOUT_MS)),
    )  # fmt: skip


def apply_session_limits(sender: Any = None, connection: Any = None, **kwargs: Any) -> None:
    """Set the limits on ``connection`` (a ``connection_created`` receiver)."""
    if connection is None or connection.vendor != "postgresql":
        return
    if product_settings().transaction_pooler:
        return  # not ours to set: see the module's docstring
    idle, statement = limits()
    params = {"idle": f"{max(idle, 0)}ms", "statement": f"{max(statement, 0)}ms"}
    rawsql.fetch_one(sql.SESSION_LIMITS, params, using=connection.alias)


def name_connections(name: str) -> None:
    """Name this process's PostgreSQL connections, ``application_name``:
    those opened from now on through libpq's PGAPPNAME (the LISTEN
    connection too), those open now with a SET; unless the environment names
    them already. Call at a worker's start, before its threads."""
    if "PGAPPNAME" in os.environ:
        return
    os.environ["PGAPPNAME"] = name = name[:APPLICATION_NAME_MAX]
    for conn in connections.all(initialized_only=True):
        if conn.vendor == "postgresql" and conn.connection is not None:
            rawsql.fetch_one(sql.APPLICATION_NAME, {"name": name}, using=conn.alias)


def install_session_limits() -> None:
    """From now on in this process, every new connection gets the limits;
    the connections already open get them now. Call once at a worker's start."""
    connection_created.connect(apply_session_limits, dispatch_uid=DISPATCH_UID)
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            apply_session_limits(connection=conn)
