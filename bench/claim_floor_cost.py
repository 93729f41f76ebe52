"""What the claim floor costs on the plain path (a script, not a test; PostgreSQL only).

    .venv/bin/python bench/claim_floor_cost.py [--backlog 200000] [--n 10] [--rounds 3000]
                                               [--before 8d09e3f^1] [--db NAME]

The claim floor (``sql.CLAIM_FLOOR_POSTGRES``, the ``open`` / ``ready_above``
CTEs of ``sql.CLAIM_POSTGRES``) keeps claims fast behind a long-held
transaction; this measures what it adds when nothing holds one. Three claim
statements take turns on ONE queue in ONE process, in rotating order, so
machine drift lands on all three alike:

- ``before``: the claim statement as it was before the floor, read from git
  (``--before``, default ``8d09e3f^1``; no copy of it lives in the tree);
- ``floor``: today's statement with a fresh floor (refreshed every second,
  as a maintenance pass would at its interval);
- ``stale``: today's statement with no fresh floor (the path a claim takes
  when maintenance has not run for ``FLOOR_FRESH_SECONDS``).

Each round claims ``--n`` messages (server-side prepared, autocommit) and
deletes them (the batch ack's shape). Printed per statement: the median and
p99 client-side round trip of the claim, and the shared buffers one claim
touches (``EXPLAIN (ANALYZE, BUFFERS)``, inside a rolled-back transaction):
buffers do not depend on how busy the machine is. ``--held`` runs the same
with ``BEGIN; SELECT txid_current()`` held open by another connection from
before the first claim to the end (the scenario of ``held_xact_bench.py``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from held_xact_bench import ROOT, create_database, drop_database, fresh_queue, setup_django


def before_statement(rev: str) -> str:
    source = subprocess.run(["git", "show", f"{rev}:groupqueues/sql.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout  # fmt: skip
    namespace: dict[str, Any] = {}
    exec(compile(source, f"{rev}:groupqueues/sql.py", "exec"), namespace)
    statement: str = namespace["CLAIM_POSTGRES"]
    return statement


def buffers(conn: psycopg.Connection, statement: str, params: dict[str, Any]) -> int:
    """Shared buffers (hit + read) one execution touches; rolled back."""
    with conn.transaction(force_rollback=True):
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
        plan = rows.fetchone()[0][0]["Plan"]  # type: ignore[index]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backlog", type=int, default=200_000)
    parser.add_argument("--n", type=int, default=10, help="messages per claim")
    parser.add_argument("--rounds", type=int, default=3000, help="claims per statement")
    parser.add_argument("--before", default="8d09e3f^1")
    parser.add_argument("--db", default="bench_floorcost")
    parser.add_argument("--held", action="store_true",
                        help="hold a transaction open for the whole run")  # fmt: skip
    args = parser.parse_args()
    url = create_database(args.db)
    try:
        setup_django(url)
        from groupqueues import services, sql
        from groupqueues.models import Collection

        conn = psycopg.connect(url, autocommit=True)
        fresh_queue(conn, args.backlog)
        queue = Collection.objects.get(group__slug="bench", name="drain")
        holder = psycopg.connect(url) if args.held else None
        if holder is not None:  # not autocommit: the transaction stays open to the end
            holder.execute("SELECT txid_current()")
        statements = {"before": before_statement(args.before), "floor": sql.CLAIM_POSTGRES,
                      "stale": sql.CLAIM_POSTGRES}  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in statements}
        bufs: dict[str, list[int]] = {name: [] for name in statements}
        names = list(statements)
        last_refresh = 0.0
        from queueproject import clock

        for i in range(args.rounds * len(names)):
            name = names[(i + i // len(names)) % len(names)]  # rotate the order every round
            # Every turn writes the newest floor version once, outside the
            # timing: "stale" ages its timestamp by a day, the others put it
            # back (the floor itself only moves forward) or recompute it each
            # second.
            if name == "stale":
                stamp = clock.now() - timedelta(days=1)
            elif time.monotonic() - last_refresh > 1.0:
                services.collections_refresh_claim_floors()
                last_refresh, stamp = time.monotonic(), clock.now()
            else:
                stamp = clock.now()
            conn.execute("UPDATE groupqueues_claimfloor SET computed_at = %(at)s"
                         " WHERE collection_id = %(id)s AND version = (SELECT max(version)"
                         " FROM groupqueues_claimfloor WHERE collection_id = %(id)s)",
                         {"at": stamp, "id": queue.pk}, prepare=True)  # fmt: skip
            now = clock.now()
            params = {"collection_id": queue.pk, "now": now, "n": args.n, "worker_id": "bench",
                      "lease_expires_at": now + timedelta(seconds=60),
                      "async_commit": False}  # fmt: skip
            if i % 50 == 0:
                bufs[name].append(buffers(conn, statements[name], params))
            start = time.perf_counter()
            rows = conn.execute(statements[name], params, prepare=True).fetchall()
            times[name].append(time.perf_counter() - start)
            conn.execute("DELETE FROM groupqueues_message WHERE seq = ANY(%s)",
                         [[row[1] for row in rows]], prepare=True)  # fmt: skip
        held = ", a transaction held open throughout" if holder is not None else ""
        print(f"claim n={args.n}, {args.rounds} claims each, backlog {args.backlog:,}{held}")
        base = statistics.median(times["before"])
        for name in names:
            ms = sorted(t * 1000 for t in times[name])
            p50, p99 = statistics.median(ms), ms[int(len(ms) * 0.99)]
            print(f"  {name:7s} p50 {p50:6.3f} ms  p99 {p99:6.3f} ms  "
                  f"({p50 / (base * 1000):.2f} of before)  "
                  f"buffers/claim median {statistics.median(bufs[name]):.0f}")  # fmt: skip
        conn.close()
        if holder is not None:
            holder.close()
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(args.db)


if __name__ == "__main__":
    main()
