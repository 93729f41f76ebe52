"""How late a schedule's boundary fires (a script, not a test; PostgreSQL).

    .venv/bin/python bench/schedule_bench.py [--boundaries 200] [--schedules 20]

Creates a fresh database (``bench_schedule_<pid>`` on ``BENCH_SERVER_URL``,
default postgresql://postgres@127.0.0.1:5432), ``--schedules`` schedules of
``@every 1s`` into one queue, and starts one ``manage.py queue_worker`` with the
production settings (its scheduler thread leads and ticks; the queue is served
by another, idle collection's consumer so nothing drains the ticks). It waits
until ``--boundaries`` messages were fired, stops the worker, and reports the
lateness of each fired message — its ``enqueued_at`` minus the boundary named
in its idempotency key (``schedule:<id>:<boundary>``) — as p50, p99 and max.
The first boundary of each schedule is left out (it may fall while the worker
is still starting). The database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("BENCH_SERVER_URL", "postgresql://postgres@127.0.0.1:5432")
PY = sys.executable


def env_for(url: str) -> dict[str, str]:
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="queueproject.settings")
    env.update(SECRET_KEY="bench-only-secret-key", DEBUG="0", LOG_LEVEL="WARNING")
    env["PYTHONPATH"] = str(ROOT)
    return env


def manage(url: str, *args: str) -> None:
    subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env_for(url), check=True)


def lateness(url: str) -> list[float]:
    """Seconds between each fired message's boundary and its enqueue, leaving
    out each schedule's first boundary."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT idempotency_key, enqueued_at FROM groupqueues_message"
            " WHERE idempotency_key LIKE 'schedule:%' ORDER BY seq"
        ).fetchall()
    seen: set[str] = set()
    out = []
    for key, enqueued_at in rows:
        _, schedule_id, boundary = key.split(":", 2)
        if schedule_id not in seen:
            seen.add(schedule_id)
            continue
        out.append((enqueued_at - datetime.fromisoformat(boundary)).total_seconds())
    return out


def fired(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM groupqueues_message WHERE idempotency_key LIKE 'schedule:%'"
        ).fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boundaries", type=int, default=200, help="fired messages to wait for")
    parser.add_argument("--schedules", type=int, default=20, help="@every 1s schedules")
    args = parser.parse_args()
    name = f"bench_schedule_{os.getpid()}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{SERVER}/{name}"
    try:
        manage(url, "migrate", "-v", "0")
        manage(url, "create_group", "bench")
        manage(url, "create_queue", "bench", "ticks")
        manage(url, "create_queue", "bench", "idle")
        for i in range(args.schedules):
            manage(url, "create_schedule", "bench", f"s{i}", "--collection", "ticks",
                   "--schedule", "@every 1s")  # fmt: skip
        worker = subprocess.Popen(
            [PY, "manage.py", "queue_worker", "--queue", "bench/idle", "--handler", "noop"],
            cwd=ROOT, env=env_for(url),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120 + args.boundaries / args.schedules * 3
            while fired(url) < args.boundaries + args.schedules and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
        late = sorted(lateness(url))
        if not late:
            sys.exit("no boundary fired")
        p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
        print(f"{len(late)} boundaries of {args.schedules} '@every 1s' schedules, one queue_worker")
        print(f"lateness p50 {statistics.median(late) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms,"
              f" max {late[-1] * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
