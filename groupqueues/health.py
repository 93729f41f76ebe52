"""Database health of the queue tables, for the operator (``manage.py
queue_health``): on PostgreSQL the tables' live and dead rows, sizes and last
(auto)vacuum/analyze, and the open transactions, oldest first, so a warning can
name the one holding back the xmin horizon (the reason dead rows pile up and
claims slow down: issue 12); on SQLite the file, WAL and freelist figures.

Read-only and unprivileged: ``pg_stat_activity`` shows other users' queries
only to superusers or ``pg_read_all_stats`` members (otherwise the query is
blank, everything else is shown)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from django.apps import apps
from django.db import connection

from queueproject import rawsql

# The queue tables: the group-queue messages and the session-queue tables
# (by model label, so this app imports no other app's models).
QUEUE_MODELS = (
    "groupqueues.Message",
    "sessionqueues.QueuedMessage",
    "sessionqueues.PendingMove",
    "sessionqueues.SendNowClaim",
)
MAX_XACT_AGE_SECONDS = 300.0
# An idle-in-transaction session holds its locks (and usually a snapshot)
# while doing nothing: warn sooner than for a busy transaction.
MAX_IDLE_IN_TRANSACTION_SECONDS = 60.0
MAX_DEAD_RATIO = 0.2  # dead tuples per live one (autovacuum's default scale factor)
MIN_DEAD_TUPLES = 1000  # below this, a ratio on a small table is noise
QUERY_CHARS = 200
MAX_TRANSACTIONS = 20

TABLES_SQL = """
SELECT relname::text, n_live_tup, n_dead_tup, pg_table_size(relid), pg_indexes_size(relid),
       last_vacuum, last_autovacuum, last_analyze, last_autoanalyze
FROM pg_stat_user_tables
WHERE relname::text = ANY(%(tables)s::text[])
ORDER BY relname
"""

# Open transactions of this database but ours, oldest first. ``holds_xmin``:
# a snapshot (backend_xmin) or a transaction id (backend_xid) keeps VACUUM from
# removing rows deleted after it began.
TRANSACTIONS_SQL = """
SELECT pid, usename::text, application_name, host(client_addr), state,
       EXTRACT(EPOCH FROM clock_timestamp() - xact_start)::float8,
       left(query, %(chars)s), backend_xmin IS NOT NULL OR backend_xid IS NOT NULL
FROM pg_stat_activity
WHERE datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
ORDER BY xact_start
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class TableHealth:
    table: str
    live_rows: int
    dead_rows: int
    table_bytes: int
    index_bytes: int
    last_vacuum: str | None
    last_autovacuum: str | None
    last_analyze: str | None
    last_autoanalyze: str | None


@dataclass(frozen=True)
class OpenTransaction:
    pid: int
    user: str | None
    application_name: str | None
    client_addr: str | None
    state: str | None
    age_seconds: float
    query: str | None
    holds_xmin: bool


@dataclass(frozen=True)
class Health:
    """What ``queue_health`` reports; ``warnings`` are the lines an operator
    must act on (empty: healthy)."""

    vendor: str
    tables: list[TableHealth] = field(default_factory=list)
    transactions: list[OpenTransaction] = field(default_factory=list)
    idle_in_transaction: int = 0
    sqlite: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def database_health(
    *,
    max_xact_age: float = MAX_XACT_AGE_SECONDS,
    max_dead_ratio: float = MAX_DEAD_RATIO,
    max_idle_age: float = MAX_IDLE_IN_TRANSACTION_SECONDS,
) -> Health:
    """The health of the default database. Warns for each transaction holding
    back the xmin horizon for longer than ``max_xact_age`` seconds (naming its
    pid, user, application and client) and for each queue table with more
    than ``max_dead_ratio`` dead tuples per live one (and at least
    MIN_DEAD_TUPLES), and for each session idle in a transaction open longer
    than ``max_idle_age`` seconds (not already warned for)."""
    if connection.vendor == "postgresql":
        return _postgres_health(max_xact_age, max_dead_ratio, max_idle_age)
    if connection.vendor == "sqlite":
        return Health(vendor="sqlite", sqlite=_sqlite_figures())
    return Health(vendor=connection.vendor)


def _postgres_health(max_xact_age: float, max_dead_ratio: float, max_idle_age: float) -> Health:
    tables = [TableHealth(*_iso_times(row)) for row in rawsql.fetch_all(
        TABLES_SQL, {"tables": queue_tables()})]  # fmt: skip
    transactions = [OpenTransaction(*row) for row in rawsql.fetch_all(
        TRANSACTIONS_SQL, {"chars": QUERY_CHARS, "limit": MAX_TRANSACTIONS})]  # fmt: skip
    warnings = [_xact_warning(t) for t in transactions
                if t.holds_xmin and t.age_seconds > max_xact_age]  # fmt: skip
    warned = {t.pid for t in transactions if t.holds_xmin and t.age_seconds > max_xact_age}
    warnings += [_idle_warning(t) for t in transactions
                 if _idle(t) and t.age_seconds > max_idle_age and t.pid not in warned]  # fmt: skip
    warnings += [_dead_warning(t) for t in tables if _too_dead(t, max_dead_ratio)]
    idle = sum(1 for t in transactions if _idle(t))
    return Health("postgresql", tables, transactions, idle, warnings=warnings)


def queue_tables() -> list[str]:
    """The table names of QUEUE_MODELS that are installed."""
    installed = {m._meta.label: m._meta.db_table for m in apps.get_models()}
    return [installed[label] for label in QUEUE_MODELS if label in installed]


def _iso_times(row: tuple[Any, ...]) -> list[Any]:
    return [v.isoformat() if hasattr(v, "isoformat") else v for v in row]


def _too_dead(table: TableHealth, ratio: float) -> bool:
    return table.dead_rows >= MIN_DEAD_TUPLES and table.dead_rows > ratio * table.live_rows


def _xact_warning(t: OpenTransaction) -> str:
    return (
        f"WARNING: pid {t.pid} (user {t.user}, application {t.application_name!r}, "
        f"client {t.client_addr or 'local'}, {t.state}) has held a transaction open for "
        f"{t.age_seconds:.0f}s and holds back the xmin horizon: dead queue rows cannot be "
        f"vacuumed until it ends (pg_terminate_backend({t.pid}) ends it)"
    )


def _idle(t: OpenTransaction) -> bool:
    return (t.state or "").startswith("idle in transaction")


def _idle_warning(t: OpenTransaction) -> str:
    return (
        f"WARNING: pid {t.pid} (user {t.user}, application {t.application_name!r}, "
        f"client {t.client_addr or 'local'}) is idle in a transaction open for "
        f"{t.age_seconds:.0f}s: it holds its locks and snapshot while doing nothing "
        f"(set idle_in_transaction_session_timeout, or pg_terminate_backend({t.pid}))"
    )


def _dead_warning(t: TableHealth) -> str:
    return (
        f"WARNING: {t.table} has {t.dead_rows} dead tuples for {t.live_rows} live rows "
        "(is an old transaction holding back vacuum, or is autovacuum falling behind?)"
    )


def _sqlite_figures() -> dict[str, int]:
    """File and WAL sizes in bytes (0 when absent) and the page figures."""
    figures = {}
    for pragma in ("page_size", "page_count", "freelist_count"):
        (figures[pragma],) = rawsql.fetch_one(f"PRAGMA {pragma}")
    path = str(connection.settings_dict["NAME"])  # read after connecting: the WAL exists
    return {"file_bytes": _size(path), "wal_bytes": _size(f"{path}-wal"), **figures}


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0
