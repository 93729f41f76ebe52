"""Claims behind a long-held transaction (a script, not a test; PostgreSQL only).

    .venv/bin/python bench/held_xact_bench.py [--duration 300] [--backlog 600000]
                                              [--rate 250] [--workers 2] [--db NAME]
                                              [--floor-refresh 0.5] [--phases plain,held]

The final figure (issue 12's target: held ≤ 20 % slower than plain, in the same
run) wants a quiet machine and the defaults: 300 s phases, backlog 600,000,
``--floor-refresh 0.5`` (the product default). ``--floor-refresh 0.5,0`` runs
each phase once per value (0: the floor is recomputed by the maintenance pass only,
every 10 s, as before the incremental refresh), so before and after are
compared in one run. Short phases (``--duration 90``) show the direction only.

Creates a fresh database (``--db``, default ``bench_heldxact_<pid>``, on the
server of ``BENCH_SERVER_URL``, default postgresql://postgres@127.0.0.1:5432)
and drops it at the end (``--keep`` leaves it). Two phases in one run, each on
an emptied message table (TRUNCATE, so no dead tuples carry over):

1. ``plain``: ``--backlog`` messages are enqueued, then ``--workers``
   ``manage.py queue_worker --queue bench/drain --handler noop`` processes
   (production settings: DEBUG off, LISTEN/NOTIFY, prepared statements,
   maintenance on; their default batch) drain for ``--duration`` seconds while
   a third process enqueues ``--rate`` messages/s in batches every 100 ms.
2. ``held``: the same while another connection holds ``BEGIN; SELECT
   txid_current();`` open for the whole phase (opened before the workers
   start), so vacuum can remove nothing deleted or updated meanwhile.

Reported per phase: claim+ack (rows deleted, from ``pg_stat_user_tables``) per
10 s bucket with the depth at the bucket's end and the shared buffers one claim
of 10 touches at that moment (EXPLAIN (ANALYZE, BUFFERS) of the claim
statement, rolled back: a figure that does not depend on how busy the machine
is), the overall rate, and ``n_dead_tup`` of the message table at the end.
The backlog should be large enough that the queue never runs empty (a bucket at depth 0 measured the
enqueue rate, not the drain).

Vacuum: this server runs with ``autovacuum = off`` globally, and then a
table's ``autovacuum_enabled = on`` does nothing (the launcher does not run),
so the bench does what autovacuum would with its defaults: every 60 s
(``autovacuum_naptime``), ``VACUUM (ANALYZE)`` of the message table when its
dead tuples exceed 50 + 20 % of its live ones.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_SERVER_URL", "postgresql://postgres@127.0.0.1:5432")
PY = sys.executable
BUCKET = 10.0
VACUUM_NAPTIME = 60.0

ENQUEUER = """
import sys, time
sys.path.insert(0, {root!r})
import django
django.setup()
from groupqueues import services
from groupqueues.models import Collection
queue = Collection.objects.get(group__slug="bench", name="drain")
per_tick, tick, start, i = max(1, round({rate} * 0.1)), 0, time.monotonic(), 0
while True:
    news = [services.NewMessage(payload={{"n": i + k}}) for k in range(per_tick)]
    services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="bench")
    i, tick = i + per_tick, tick + 1
    time.sleep(max(0.0, start + tick * 0.1 - time.monotonic()))
"""


def env_for(url: str, floor_refresh: float = 1.0) -> dict[str, str]:
    """Production settings (DEBUG off) with a throwaway key."""
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="queueproject.settings")
    env.update(SECRET_KEY="bench-only-secret-key", DEBUG="0", LOG_LEVEL="WARNING")
    env["QUEUE_CLAIM_FLOOR_INTERVAL"] = str(floor_refresh)
    env["PYTHONPATH"] = str(ROOT)
    return env


def create_database(name: str) -> str:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{SERVER}/{name}"
    subprocess.run([PY, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env_for(url), check=True)
    return url


def drop_database(name: str) -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(url: str) -> None:
    os.environ.update(env_for(url))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def fresh_queue(conn: psycopg.Connection, backlog: int) -> None:
    """An empty message table (no dead tuples), one queue, ``backlog`` messages."""
    from groupqueues import services
    from groupqueues.models import Collection
    from principals.models import Group

    conn.execute("TRUNCATE groupqueues_message")
    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "bench"})
    queue = Collection.objects.filter(group=group, name="drain").first()
    queue = queue or services.collection_create(group=group, name="drain")
    for start in range(0, backlog, services.MAX_BATCH):
        news = [services.NewMessage(payload={"n": i})
                for i in range(start, min(backlog, start + services.MAX_BATCH))]  # fmt: skip
        services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="bench")
    conn.execute("VACUUM (ANALYZE) groupqueues_message")


def table_stats(conn: psycopg.Connection) -> tuple[int, int, int]:
    """(rows deleted so far, live, dead) of the message table."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT n_tup_del, n_live_tup, n_dead_tup FROM pg_stat_user_tables"
        " WHERE relname = 'groupqueues_message'"
    ).fetchone()
    assert row is not None  # the table exists (migrated)
    return row[0], row[1], row[2]


def depth(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT count(*) FROM groupqueues_message WHERE state IN ('ready', 'claimed')"
    ).fetchone()
    assert row is not None  # an aggregate answers one row
    count: int = row[0]
    return count


class Vacuumer(threading.Thread):
    """What autovacuum would do with its default settings (see the docstring)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.stop, self.runs = url, threading.Event(), 0

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.wait(VACUUM_NAPTIME):
                _, live, dead = table_stats(conn)
                if dead > 50 + 0.2 * live:
                    conn.execute("VACUUM (ANALYZE) groupqueues_message")
                    self.runs += 1


def _buffers(node: dict) -> int:
    return int(node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0))


def _cte_buffers(node: dict, into: dict[str, int]) -> None:
    name = node.get("Subplan Name", "")
    if name.startswith("CTE "):
        into[name[4:]] = into.get(name[4:], 0) + _buffers(node)
    for child in node.get("Plans", []):
        _cte_buffers(child, into)


def claim_buffers(conn: psycopg.Connection) -> tuple[int, int, int, int]:
    """Shared buffers one claim of 10 touches now (EXPLAIN (ANALYZE, BUFFERS)
    of the claim statement in a transaction rolled back): (all, its ``ready``
    scan, its ``lapsed`` scan, and the whole statement the workers run: an
    ack of 10 claimed just before and a claim of 10, ``ACK_BATCH_AND_CLAIM``)."""
    from datetime import UTC, datetime, timedelta

    from groupqueues import sql
    from groupqueues.models import Collection

    queue = Collection.objects.get(group__slug="bench", name="drain")
    now = datetime.now(UTC)
    params = {"collection_id": queue.pk, "now": now, "n": 10, "worker_id": "bench-explain",
              "lease_expires_at": now + timedelta(seconds=30), "async_commit": False}  # fmt: skip
    from groupqueues.services.postgres import ack_arrays

    with conn.transaction(force_rollback=True):
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql.CLAIM_POSTGRES, params
        ).fetchone()
        held = [(r[2], r[8]) for r in conn.execute(sql.CLAIM_POSTGRES, params).fetchall()]
        both = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql.ACK_BATCH_AND_CLAIM_POSTGRES,
            {**params, **ack_arrays(held), "pairs": len(held)},
        ).fetchone()
    assert row is not None and both is not None  # EXPLAIN answers one row
    plan = row[0][0]["Plan"]
    ctes: dict[str, int] = {}
    _cte_buffers(plan, ctes)
    return _buffers(plan), ctes.get("ready", 0), ctes.get("lapsed", 0), _buffers(both[0][0]["Plan"])


def maintenance_pass_ms() -> float:
    """One maintenance pass (what the workers' leader runs every 10 s), timed."""
    from groupqueues.maintenance import maintenance_pass

    start = time.perf_counter()
    maintenance_pass()
    return (time.perf_counter() - start) * 1000


def start_processes(
    url: str, workers: int, rate: int, floor_refresh: float
) -> list[subprocess.Popen]:
    env = env_for(url, floor_refresh)
    worker = [PY, "manage.py", "queue_worker", "--queue", "bench/drain", "--handler", "noop"]
    enqueuer = [PY, "-c", ENQUEUER.format(root=str(ROOT), rate=rate)]
    spawn = [worker] * workers + ([enqueuer] if rate > 0 else [])
    return [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL) for cmd in spawn]


def stop_processes(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_phase(url: str, args: argparse.Namespace, held: bool, floor_refresh: float) -> dict:
    conn = psycopg.connect(url, autocommit=True)
    fresh_queue(conn, args.backlog)
    holder = psycopg.connect(url) if held else None
    if holder is not None:  # BEGIN is implicit (not autocommit); kept open until the end
        holder.execute("SELECT txid_current()")
    vacuumer = Vacuumer(url)
    vacuumer.start()
    deleted0, _, _ = table_stats(conn)
    procs = start_processes(url, args.workers, args.rate, floor_refresh)
    # (acked, depth, n_dead_tup, claim buffers: all, ready, lapsed, ack+claim)
    buckets: list[tuple[int, int, int, tuple[int, int, int, int]]] = []
    start, last = time.monotonic(), deleted0
    while len(buckets) < round(args.duration / BUCKET):
        time.sleep(max(0.0, start + (len(buckets) + 1) * BUCKET - time.monotonic()))
        deleted, _, dead = table_stats(conn)
        buckets.append((deleted - last, depth(conn), dead, claim_buffers(conn)))
        last = deleted
    stop_processes(procs)
    vacuumer.stop.set()
    _, _, dead = table_stats(conn)
    pass_ms = maintenance_pass_ms()  # the holder is still open
    if holder is not None:
        holder.rollback()
        holder.close()
    conn.close()
    return {"buckets": buckets, "acked": last - deleted0, "dead": dead, "vacuums": vacuumer.runs,
            "pass_ms": pass_ms}  # fmt: skip


def report(name: str, result: dict, duration: float, rate: int) -> float:
    """Print the phase; returns its drain rate (overall if the queue emptied at once)."""
    print(f"== phase {name}: {result['acked']:,} claim+ack in {duration:.0f} s = "
          f"{result['acked'] / duration:,.0f} msg/s; n_dead_tup at the end "
          f"{result['dead']:,}; bench VACUUMs {result['vacuums']}")  # fmt: skip
    # The drain rate proper: from the second bucket (the first includes the
    # workers' start-up) while a backlog is left (more than a bucket's enqueues).
    busy = [acked for acked, live, _, _ in result["buckets"][1:] if live > rate * BUCKET]
    drain: float = sum(busy) / (len(busy) * BUCKET) if busy else result["acked"] / duration
    print(f"   draining a backlog (from 10 s): {drain:,.0f} msg/s over {len(busy) * BUCKET:.0f} s;"
          f" one maintenance pass at the end: {result['pass_ms']:,.0f} ms")  # fmt: skip
    for i, (acked, live, dead, buffers) in enumerate(result["buckets"]):
        print(f"   {i * BUCKET:4.0f}-{(i + 1) * BUCKET:4.0f} s: {acked / BUCKET:7,.0f} msg/s"
              f"   depth {live:8,}   n_dead_tup {dead:9,}"
              f"   claim buffers {buffers[0]:6,}"
              f" (ready {buffers[1]:,}, lapsed {buffers[2]:,};"
              f" ack+claim {buffers[3]:,})")  # fmt: skip
    return drain


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=300.0, help="seconds per phase")
    parser.add_argument("--backlog", type=int, default=600_000, help="messages before a phase")
    parser.add_argument("--rate", type=int, default=250, help="enqueued messages/s meanwhile")
    parser.add_argument("--workers", type=int, default=2, help="queue_worker processes")
    parser.add_argument("--db", default=f"bench_heldxact_{os.getpid()}")
    parser.add_argument("--keep", action="store_true", help="do not drop the database")
    parser.add_argument("--phases", default="plain,held", help="which phases, in order")
    parser.add_argument(
        "--floor-refresh", default="0.5",
        help="QUEUE_CLAIM_FLOOR_INTERVAL of the workers, seconds; a comma list runs every "
        "phase once per value (0: the maintenance pass alone recomputes the floor)",
    )  # fmt: skip
    args = parser.parse_args()
    url = create_database(args.db)
    try:
        setup_django(url)
        for value in args.floor_refresh.split(","):
            refresh = float(value)
            rates = {}
            for phase in args.phases.split(","):
                result = run_phase(url, args, held=phase == "held", floor_refresh=refresh)
                rates[phase] = report(f"{phase} (floor refresh {value} s)", result,
                                      args.duration, args.rate)  # fmt: skip
            if {"plain", "held"} <= rates.keys():
                plain, held = rates["plain"], rates["held"]
                slower = (1 - held / plain) * 100
                print(f"floor refresh {value} s: drain rate held / plain: {held / plain:.2f}"
                      f" ({slower:+.0f} % slower)")  # fmt: skip
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            drop_database(args.db)


if __name__ == "__main__":
    main()
