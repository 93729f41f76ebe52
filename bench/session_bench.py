"""Session-queue service throughput from one process, with queries per operation.

Usage (from the project root):

    .venv/bin/python bench/session_bench.py                      # SQLite (a temp file)
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench_sq \\
        .venv/bin/python bench/session_bench.py                  # PostgreSQL (scratch db)

The database is migrated first; on PostgreSQL it must exist and be disposable
(the script adds its own rows and deletes them at the end). Timing runs with
DEBUG off, as in production. Each round inserts ``--entries`` entries into
each of ``--sessions`` sessions (the default cap of 10 applies), then reserves
and acknowledges every one of them (reserve-for-delivery + acknowledge, the
dispatcher's and the REST consumers' pair).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the bench imports Django code only after django.setup()
    from sessionqueues.models import Session

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queueproject.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
os.environ["DEBUG"] = "0"
if "DATABASE_URL" not in os.environ:
    os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from principals.models import App, Group  # noqa: E402
from sessionqueues import services  # noqa: E402
from sessionqueues.services import NewEntry  # noqa: E402

RATES = "insert {:6.0f}/s   reserve+acknowledge {:6.0f}/s"


def setup(sessions: int) -> tuple[App, list]:
    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    app, _ = App.objects.get_or_create(slug="bench", defaults={"name": "Bench", "group": group})
    task = services.task_create(app=app, title="bench")
    made = []
    for _ in range(sessions):
        session = services.session_create(task=task)
        made.append(services.session_set_auto_merge(session_id=session.pk, enabled=False))
    return app, made


def insert_all(sessions: list, entries: int) -> None:
    for i in range(entries):
        for session in sessions:
            services.entry_insert(
                session_id=session.pk, entry=NewEntry(content=f"prompt {i}", queued_by="user:1")
            )


def drain_all(sessions: list, entries: int) -> None:
    for _ in range(entries):
        for session in sessions:
            row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
            assert row is not None, "the session ran dry before its entries were drained"
            services.reservation_acknowledge(
                session_id=session.pk, reservation_id=row.reservation_id
            )


def queries_per_operation(session: Session) -> dict[str, int]:
    """Round trips of one insert, one reserve and one acknowledge (BEGIN/COMMIT
    are not captured by Django; add 2 each on PostgreSQL)."""
    counts = {}
    with CaptureQueriesContext(connection) as q:
        services.entry_insert(session_id=session.pk, entry=NewEntry("x", "user:1"))
    counts["insert"] = len(q)
    with CaptureQueriesContext(connection) as q:
        row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    counts["reserve"] = len(q)
    assert row is not None, "nothing reserved: the insert did not land"
    with CaptureQueriesContext(connection) as q:
        services.reservation_acknowledge(session_id=session.pk, reservation_id=row.reservation_id)
    counts["acknowledge"] = len(q)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--entries", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    app, sessions = setup(args.sessions)
    n = args.sessions * args.entries
    try:
        print(f"{connection.vendor}: {n} entries per round, {args.rounds} rounds")
        print("queries per operation:", queries_per_operation(sessions[0]))
        best = [0.0, 0.0]
        cpu = [0.0, 0.0]
        for round_no in range(1, args.rounds + 1):
            wall, started = time.perf_counter(), time.process_time()
            insert_all(sessions, args.entries)
            wall_inserted, inserted = time.perf_counter(), time.process_time()
            drain_all(sessions, args.entries)
            wall_drained, drained = time.perf_counter(), time.process_time()
            rates = [n / (wall_inserted - wall), n / (wall_drained - wall_inserted)]
            best = [max(b, r) for b, r in zip(best, rates, strict=True)]
            cpu = [cpu[0] + inserted - started, cpu[1] + drained - inserted]
            print(f"round {round_no}: " + RATES.format(*rates))
        print("best:    " + RATES.format(*best))
        per_op = [1000 * c / (n * args.rounds) for c in cpu]
        print(
            "client CPU per operation: insert {:.2f} ms, reserve+acknowledge {:.2f} ms".format(
                *per_op
            )
        )
    finally:
        app.tasks.all().delete()


if __name__ == "__main__":
    main()
