"""The effect of migration 0011 (hot table storage: fillfactor and per-table
autovacuum settings) on HOT updates (a script, not a test; PostgreSQL only).

    .venv/bin/python bench/hot_storage_bench.py [--collections 1000] [--rounds 5]
                                                [--messages 2000] [--db NAME]

Creates a fresh database (``--db``, default ``bench_hot_<pid>``, on the
server of ``BENCH_SERVER_URL``, default postgresql://postgres@127.0.0.1:5432)
and drops it at the end. Phases, interleaved: ``before`` (migrated to 0010:
the default fillfactor 100), ``after`` (0011 applied), ``before``, ``after``;
each phase first rewrites the tables (``VACUUM FULL``: a fillfactor applies
to pages written after it is set) and resets their statistics, then runs:

- ``floors``: ``collections_refresh_claim_floors()`` ``--rounds`` times over
  ``--collections`` queues (one UPDATE of each collection row per round, as
  every maintenance pass does);
- ``tallies``: as many rounds of one tally flush per collection (one UPDATE of
  each tally row, as each process does every few seconds);
- ``claim/nack``: ``--messages`` messages in one queue, each claimed and
  nacked once (no delay), then claimed and acked.

Reported per phase and table: updates, HOT updates and their share (from
``pg_stat_user_tables`` after ``pg_stat_force_next_flush()``), and the
phase's seconds. The server runs with ``autovacuum = off`` globally, so the
per-table autovacuum settings cannot show an effect here: only fillfactor.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_SERVER_URL", "postgresql://postgres@127.0.0.1:5432")
TABLES = ("groupqueues_collection", "groupqueues_collectiontally", "groupqueues_message")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--collections", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--db", default=f"bench_hot_{os.getpid()}")
    args = parser.parse_args()
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{args.db}"')
        admin.execute(f'CREATE DATABASE "{args.db}"')
    try:
        run(args)
    finally:
        from django.db import connections

        from groupqueues import tally

        tally.reset()  # nothing left to flush into the dropped database at exit
        connections.close_all()
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')


def run(args: argparse.Namespace) -> None:
    os.environ.update(
        DATABASE_URL=f"{SERVER}/{args.db}", DJANGO_SETTINGS_MODULE="queueproject.settings",
        DEBUG="true", QUEUE_LISTEN_NOTIFY="false",
    )  # fmt: skip
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from groupqueues import services
    from groupqueues.models import Collection
    from principals.models import Group

    call_command("migrate", verbosity=0)
    group = Group.objects.create(slug="bench", name="bench")
    queues = [
        services.collection_create(group=group, name=f"q{i}") for i in range(args.collections)
    ]
    for q in queues:  # a first message each, so every floor has something to compute
        services.message_enqueue(collection=q, payload=0, enqueued_by="bench")
    drain = Collection.objects.get(group=group, name="q0")
    print(f"{'phase':<7} {'table':<28} {'updates':>8} {'hot':>8} {'hot %':>6}  seconds")
    for phase in ("before", "after", "before", "after"):
        call_command("migrate", "groupqueues", "0011" if phase == "after" else "0010", verbosity=0)
        seconds = workload(args, queues, drain)
        for table, (upd, hot) in stats().items():
            share = 100.0 * hot / upd if upd else 0.0
            print(f"{phase:<7} {table:<28} {upd:>8} {hot:>8} {share:>5.1f}%  {seconds[table]:.2f}")


def rewrite_and_reset() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        for table in TABLES:
            cur.execute(f"VACUUM FULL {table}")
            cur.execute("SELECT pg_stat_reset_single_table_counters(%s::regclass)", [table])


def stats() -> dict[str, tuple[int, int]]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(1.5)  # let this backend's counters reach the shared statistics
    with connection.cursor() as cur:
        cur.execute(
            "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
            "WHERE relname = ANY(%s) ORDER BY relname",
            [list(TABLES)],
        )
        return {name: (upd, hot) for name, upd, hot in cur.fetchall()}


def workload(args: argparse.Namespace, queues: list[Any], drain: Any) -> dict[str, float]:
    from groupqueues import services, tally

    rewrite_and_reset()
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    for _ in range(args.rounds):
        services.collections_refresh_claim_floors()
    seconds["groupqueues_collection"] = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(args.rounds):
        for q in queues:
            tally.count(q.pk, enqueued=1)
        tally.flush()
    seconds["groupqueues_collectiontally"] = time.perf_counter() - started
    for first in range(0, args.messages, 500):
        batch = [
            services.NewMessage(payload=i) for i in range(first, min(first + 500, args.messages))
        ]
        services.message_enqueue_batch(collection=drain, messages=batch, enqueued_by="bench")
    started = time.perf_counter()
    for _ in range(args.messages):
        (m,) = services.message_claim(collection=drain, worker_id="bench", n=1)
        services.message_nack(collection=drain, id=m.id, claim_token=m.claim_token,
                              delay_seconds=0)  # fmt: skip
    while held := services.message_claim(collection=drain, worker_id="bench", n=100):
        services.message_ack_batch(collection=drain, acks=[(m.id, m.claim_token) for m in held])
    seconds["groupqueues_message"] = time.perf_counter() - started
    return seconds


if __name__ == "__main__":
    main()
