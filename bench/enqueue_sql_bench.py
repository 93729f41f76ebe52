"""What the database spends on one enqueue (issue 13; not a test).

    BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/perf_sql \
        .venv/bin/python bench/enqueue_sql_bench.py [--seconds 8] [--rounds 3]

The database is created (and dropped at the end) and migrated. Every variant
runs through pgbench's C client (``-M prepared``, one client, one commit per
statement: durable, fsync as configured), so only the server's share of an
enqueue is measured, with the pieces of ``sql.ENQUEUE_ONE_POSTGRES`` taken away
one at a time, beside the harness's raw ceiling (``insert1``: the bare table
of /work/shared/peers, two indexes). The variants are interleaved round by
round, so drift of the machine falls on all of them alike.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/perf_sql")
BULK_ROWS = 100
PAYLOAD = '{"t": 1764460000.123456, "pad": "' + "x" * 64 + '"}'
# A time-ordered id like the services' UUIDv7 ones (a sequence, server-side).
NEW_ID = "('00000000-0000-7000-8000-' || lpad(to_hex(nextval('bench_ids')), 12, '0'))::uuid"

CEILING_SCHEMA = """
DROP TABLE IF EXISTS q;
CREATE TABLE q (
    id bigserial PRIMARY KEY, priority int NOT NULL DEFAULT 0,
    status text NOT NULL DEFAULT 'ready', run_after timestamptz NOT NULL DEFAULT now(),
    locked_at timestamptz, attempts int NOT NULL DEFAULT 0, payload jsonb NOT NULL);
CREATE INDEX q_ready_idx ON q (priority DESC, id) WHERE status = 'ready';
CREATE SEQUENCE IF NOT EXISTS bench_ids;
"""


def setup() -> tuple[int, str, str]:
    """Create and migrate the database; a queue; (collection id, group id, channel)."""
    base, _, name = URL.rpartition("/")
    subprocess.run(["psql", "-X", "-q", f"{base}/postgres", "-c",
                    f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', "-c",
                    f'CREATE DATABASE "{name}"'], check=True)  # fmt: skip
    os.environ.update(DATABASE_URL=URL, DJANGO_SETTINGS_MODULE="queueproject.settings",
                      SECRET_KEY="bench-only", DEBUG="0", LOG_LEVEL="WARNING")  # fmt: skip
    import django

    django.setup()
    from django.core.management import call_command

    from groupqueues import services
    from principals.models import Group

    call_command("migrate", verbosity=0)
    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "bench"})
    queue = services.collection_create(group=group, name="q", visibility_timeout=300)
    subprocess.run(["psql", "-X", "-q", URL, "-c", CEILING_SCHEMA], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return queue.pk, str(group.pk), queue.wake_channel


def variants(cid: int, gid: str, channel: str) -> dict[str, tuple[str, int]]:
    """label -> (one pgbench statement, messages it enqueues)."""
    from groupqueues import sql

    values = {"id": NEW_ID, "group_id": f"'{gid}'::uuid", "collection_id": str(cid),
              "payload": f"'{PAYLOAD}'", "priority": "0", "now": "now()",
              "deliver_after": "now()", "expires_at": "NULL::timestamptz", "max_attempts": "3",
              "enqueued_by": "'user-bench'", "key": "NULL::varchar",
              "ordering_key": "NULL::varchar", "channel": f"'{channel}'",
              "wake": "true"}  # fmt: skip

    def inline(query: str, **over: str) -> str:
        return re.sub(r"%\((\w+)\)s", lambda m: {**values, **over}[m[1]], query).strip()

    ours = inline(sql.ENQUEUE_ONE_POSTGRES)
    no_conflict = ours.replace(
        "ON CONFLICT (collection_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        "",
    )
    plain_insert = (
        "INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority, "
        "enqueued_at, deliver_after, state, claimed_by, attempt, max_attempts, enqueued_by) "
        f"VALUES ({NEW_ID}, '{gid}'::uuid, {cid}, '{PAYLOAD}', 0, now(), now(), 'ready', '', 0, "
        "3, 'user-bench')"
    )
    rows = BULK_ROWS
    payloads = "[" + ",".join([PAYLOAD] * rows) + "]"
    bulk_ids = f"ARRAY(SELECT {NEW_ID} FROM generate_series(1, {rows}))"
    bulk = inline(sql.ENQUEUE_PLAIN_POSTGRES, ids=bulk_ids, payloads=f"'{payloads}'")
    bulk_plain = (
        "INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority, "
        "enqueued_at, deliver_after, state, claimed_by, attempt, max_attempts, enqueued_by) "
        f"SELECT {NEW_ID}, '{gid}'::uuid, {cid}, '{PAYLOAD}', 0, now(), now(), 'ready', '', 0, "
        f"3, 'user-bench' FROM generate_series(1, {rows})"
    )
    return {
        "ceiling insert1 (table q)": (
            f"INSERT INTO q (priority, payload) VALUES (0, '{PAYLOAD}')",
            1,
        ),
        "ENQUEUE_ONE as shipped": (ours, 1),
        "  without the wake-up": (inline(sql.ENQUEUE_ONE_POSTGRES, wake="false"), 1),
        "  without FOR KEY SHARE": (ours.replace("FOR KEY SHARE", ""), 1),
        "  without ON CONFLICT": (no_conflict, 1),
        "plain INSERT into groupqueues_message": (plain_insert, 1),
        "plain INSERT + pg_notify": (
            plain_insert + f" RETURNING (SELECT pg_notify('{channel}', ''))",
            1,
        ),
        f"ceiling insert{rows} (table q)": (
            "INSERT INTO q (priority, payload) SELECT (random() * 9)::int, "
            f"'{PAYLOAD}' FROM generate_series(1, {rows})",
            rows,
        ),
        f"ENQUEUE_PLAIN as shipped, {rows} rows": (bulk, rows),
        "  without the wake-up ": (
            inline(
                sql.ENQUEUE_PLAIN_POSTGRES, wake="false", ids=bulk_ids, payloads=f"'{payloads}'"
            ),
            rows,
        ),
        f"plain INSERT..SELECT {rows} rows, constant payload": (bulk_plain, rows),
    }


def pgbench(statement: str, seconds: int, no_flush_wait: bool = False) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(statement + ";\n")
    out = subprocess.run(["pgbench", "-n", "-c", "1", "-M", "prepared", "-T", str(seconds),
                          "-f", f.name, URL], capture_output=True, text=True,
                         env=dict(os.environ, PGOPTIONS="-c synchronous_commit=off")
                         if no_flush_wait else None)  # fmt: skip
    os.unlink(f.name)
    tps = re.search(r"tps = ([\d.]+)", out.stdout)
    if tps is None:
        raise SystemExit(f"pgbench failed: {out.stderr.strip()[:500]}\n{statement}")
    return float(tps[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--no-flush-wait",
        action="store_true",
        help="pgbench's sessions only: synchronous_commit=off, so a commit does all "
        "its work but does not wait for the WAL flush (a measurement of CPU "
        "per statement that a loaded machine's fsync queue does not drown)",
    )
    args = ap.parse_args()
    cid, gid, channel = setup()
    runs: dict[str, list[float]] = {}
    try:
        for r in range(args.rounds):
            for label, (statement, per) in variants(cid, gid, channel).items():
                subprocess.run(["psql", "-X", "-q", URL, "-c",
                                "TRUNCATE q, groupqueues_message; CHECKPOINT"], check=True,
                               stdout=subprocess.DEVNULL)  # fmt: skip
                runs.setdefault(label, []).append(
                    pgbench(statement, args.seconds, args.no_flush_wait) * per
                )
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        from django.db import connections

        connections.close_all()
        base, _, name = URL.rpartition("/")
        subprocess.run(["psql", "-X", "-q", f"{base}/postgres", "-c",
                        f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'])  # fmt: skip
    ceiling = statistics.median(runs["ceiling insert1 (table q)"])
    for label, tps in runs.items():
        if label.startswith("ceiling insert") and "insert1 " not in label:
            ceiling = statistics.median(tps)
        med = statistics.median(tps)
        print(
            f"{label:<50} {med:>8,.0f} msg/s  {1e6 / med:>6.1f} µs/msg  {med / ceiling:>5.0%}  "
            f"runs {[round(t) for t in tps]}"
        )


if __name__ == "__main__":
    main()
