"""``manage.py queue_reindex [--table T ...]``: rebuild the indexes of the
queue tables (``REINDEX INDEX CONCURRENTLY`` on PostgreSQL, one at a time,
without blocking the queues; ``REINDEX <table>`` on SQLite)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from groupqueues.services.storage import queue_indexes_reindex
from queueproject.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Rebuild the queue tables' indexes (concurrently on PostgreSQL)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--table", action="append", dest="tables",
                            help="only this queue table (repeatable)")  # fmt: skip

    def run(self, *args: Any, **opts: Any) -> None:
        try:
            done = queue_indexes_reindex(tables=opts["tables"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        for item in done:
            self.stdout.write(f"reindexed {item.name} in {item.seconds:.2f}s")
        self.stdout.write(f"{len(done)} rebuilt")
