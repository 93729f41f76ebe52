"""``manage.py queue_health [--json] [--max-xact-age S] [--max-dead-ratio R]
[--max-idle-age S] [--fail-on-warning]``: the database health of the queue tables
(``groupqueues.health``); exit status 2 on a warning with --fail-on-warning."""

from __future__ import annotations

import json
from typing import Any

from groupqueues.health import (
    MAX_DEAD_RATIO,
    MAX_IDLE_IN_TRANSACTION_SECONDS,
    MAX_XACT_AGE_SECONDS,
    Health,
    database_health,
)
from queueproject.commands import ServiceCommand

TABLE_COLUMNS = ("table", "live", "dead", "table_bytes", "index_bytes", "last_autovacuum")


class Command(ServiceCommand):
    help = "Report the queue tables' health and name the transaction holding back vacuum."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument("--max-xact-age", type=float, default=MAX_XACT_AGE_SECONDS,
                            help="warn for a transaction open longer (seconds)")  # fmt: skip
        parser.add_argument("--max-dead-ratio", type=float, default=MAX_DEAD_RATIO,
                            help="warn for more dead tuples per live row")  # fmt: skip
        parser.add_argument("--max-idle-age", type=float, default=MAX_IDLE_IN_TRANSACTION_SECONDS,
                            help="warn for a session idle in transaction longer (s)")  # fmt: skip
        parser.add_argument("--fail-on-warning", action="store_true", help="exit 2 on a warning")

    def run(self, *args: Any, **opts: Any) -> None:
        health = database_health(
            max_xact_age=opts["max_xact_age"],
            max_dead_ratio=opts["max_dead_ratio"],
            max_idle_age=opts["max_idle_age"],
        )
        if opts["json"]:
            self.stdout.write(json.dumps(health.as_dict(), indent=2))
        else:
            self._print(health)
        if health.warnings and opts["fail_on_warning"]:
            raise SystemExit(2)

    def _print(self, health: Health) -> None:
        self.stdout.write(f"database: {health.vendor}")
        for key, value in health.sqlite.items():
            self.stdout.write(f"{key}: {value}")
        rows = [TABLE_COLUMNS] + [
            (t.table, t.live_rows, t.dead_rows, t.table_bytes, t.index_bytes,
             t.last_autovacuum or "-") for t in health.tables
        ]  # fmt: skip
        if health.tables:
            widths = [max(len(str(r[i])) for r in rows) for i in range(len(TABLE_COLUMNS))]
            for row in rows:
                cells = [str(c).ljust(w) for c, w in zip(row, widths, strict=True)]
                self.stdout.write("  ".join(cells).rstrip())
        if health.vendor == "postgresql":
            self._print_transactions(health)
        for warning in health.warnings:
            self.stderr.write(warning)

    def _print_transactions(self, health: Health) -> None:
        self.stdout.write(f"idle in transaction: {health.idle_in_transaction}")
        holders = [t for t in health.transactions if t.holds_xmin]
        if not holders:
            self.stdout.write("oldest transaction: none holds back the xmin horizon")
            return
        t = holders[0]
        self.stdout.write(
            f"oldest transaction: pid {t.pid} user {t.user} application {t.application_name!r} "
            f"client {t.client_addr or 'local'} state {t.state} age {t.age_seconds:.0f}s "
            f"query {t.query!r}"
        )
