"""Storage upkeep of the queue tables (issue 16): rebuild their indexes.
On PostgreSQL each index is rebuilt with ``REINDEX INDEX CONCURRENTLY`` (no
lock that blocks claims, enqueues or acks; a bloated index of a hot queue
table shrinks back to its live entries); on SQLite ``REINDEX <table>``."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.db import connection

from groupqueues import sql
from groupqueues.health import queue_tables
from queueproject import rawsql

logger = logging.getLogger("groupqueues.storage")


@dataclass(frozen=True)
class Reindexed:
    name: str  # the index (PostgreSQL) or table (SQLite)
    seconds: float


def queue_indexes_reindex(*, tables: list[str] | None = None) -> list[Reindexed]:
    """Rebuild the indexes of the queue tables (``tables``: a subset of
    ``health.queue_tables()``), one after another, in autocommit; what was
    rebuilt. Raises RuntimeError inside a transaction (PostgreSQL refuses
    REINDEX CONCURRENTLY there) and ValueError for a table that is not a
    queue table."""
    known = queue_tables()
    chosen = known if tables is None else tables
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise ValueError(f"not queue tables: {', '.join(unknown)}")
    if connection.in_atomic_block:
        raise RuntimeError("queue_indexes_reindex runs in autocommit, not inside a transaction")
    quote = connection.ops.quote_name
    done = []
    if connection.vendor == "postgresql":
        names = [r[0] for r in rawsql.fetch_all(sql.QUEUE_INDEXES_POSTGRES, {"tables": chosen})]
        statements = [(n, sql.REINDEX_CONCURRENTLY_POSTGRES.format(index=quote(n))) for n in names]
    else:
        statements = [(t, sql.REINDEX_TABLE_SQLITE.format(table=quote(t))) for t in chosen]
    for name, statement in statements:
        started = time.monotonic()
        rawsql.execute(statement)  # autocommit: its own transaction
        done.append(Reindexed(name, time.monotonic() - started))
        logger.info("reindexed %s in %.2fs", name, done[-1].seconds)
    return done
