"""Enqueue one by one and in batches: the services against the same statement
through bare psycopg, in one process (issue 13; not a test).

    BENCH_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/perf_enq \
        .venv/bin/python bench/enqueue_profile.py [--n 5000] [--rounds 3] [--profile]

The database is created, migrated and dropped at the end. Interleaved round
by round: ``services.message_enqueue`` (what the harness's agent calls), the
same ``sql.ENQUEUE_ONE_POSTGRES`` through a bare psycopg connection (prepared,
binary: the floor of any Python enqueue of this statement), and a bare
``INSERT`` (the floor of any enqueue into this table); the same for batches
of 500 (``message_enqueue_batch``). ``--profile`` runs the services once more
under pyinstrument (``PYINSTRUMENT``: its ``pyinstrument`` module must import).
The difference between the first two is the Python of the service; between
the last two, the statement's own server cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/perf_enq")
PAD = "x" * 64


def setup() -> None:
    base, _, name = URL.rpartition("/")
    subprocess.run(["psql", "-X", "-q", f"{base}/postgres", "-c",
                    f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', "-c",
                    f'CREATE DATABASE "{name}"'], check=True)  # fmt: skip
    os.environ.update(DATABASE_URL=URL, DJANGO_SETTINGS_MODULE="queueproject.settings",
                      SECRET_KEY="bench-only", DEBUG="0", LOG_LEVEL="WARNING")  # fmt: skip
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    setup()
    import psycopg
    from django.db import connection, connections

    from groupqueues import services, sql
    from groupqueues.models import Message
    from principals.models import Group

    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "bench"})
    queue = services.collection_create(group=group, name="q")
    raw = psycopg.connect(URL, autocommit=True, prepare_threshold=None)

    def body() -> dict:
        return {"t": time.time(), "pad": PAD}

    def service_one(n: int) -> None:
        for _ in range(n):
            services.message_enqueue(collection=queue, payload=body(), enqueued_by="user:bench")

    def service_bulk(n: int) -> None:
        for _ in range(0, n, 500):
            services.message_enqueue_batch(
                collection=queue, enqueued_by="user:bench",
                messages=[services.NewMessage(body()) for _ in range(500)],
            )  # fmt: skip

    params = {"group_id": group.pk, "collection_id": queue.pk, "enqueued_by": "user:bench",
              "channel": queue.wake_channel, "wake": True, "priority": 0, "expires_at": None,
              "max_attempts": 3, "key": None, "ordering_key": None}  # fmt: skip

    def psycopg_one(n: int) -> None:
        cur = raw.cursor(binary=True)
        for _ in range(n):
            at = datetime.now(UTC)
            cur.execute(sql.ENQUEUE_ONE_POSTGRES, {**params, "id": uuid.uuid4(), "now": at,
                                                   "deliver_after": at,
                                                   "payload": json.dumps(body())},
                        prepare=True)  # fmt: skip

    def psycopg_insert(n: int) -> None:
        cur = raw.cursor()
        for _ in range(n):
            cur.execute(
                "INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority,"
                " enqueued_at, deliver_after, state, claimed_by, attempt, max_attempts,"
                " enqueued_by) VALUES (%s, %s, %s, %s, 0, now(), now(), 'ready', '', 0, 3, %s)",
                (uuid.uuid4(), group.pk, queue.pk, json.dumps(body()), "user:bench"),
                prepare=True,
            )

    cases = {"services.message_enqueue": service_one,
             "ENQUEUE_ONE via bare psycopg": psycopg_one,
             "bare INSERT via psycopg": psycopg_insert,
             "services.message_enqueue_batch (500)": service_bulk}  # fmt: skip
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # the client's CPU per message (load does not inflate it)
    for _ in range(args.rounds):
        for label, fn in cases.items():
            Message.objects.all().delete()
            with connection.cursor() as c:
                c.execute("VACUUM ANALYZE groupqueues_message")
                c.execute("CHECKPOINT")
            t0, cpu0 = time.perf_counter(), time.process_time()
            fn(args.n)
            runs.setdefault(label, []).append(args.n / (time.perf_counter() - t0))
            cpu.setdefault(label, []).append((time.process_time() - cpu0) / args.n * 1e6)
    for label, rates in runs.items():
        med = statistics.median(rates)
        print(f"{label:<40} {med:>8,.0f} msg/s  {1e6 / med:>7.1f} µs/msg  "
              f"client CPU {statistics.median(cpu[label]):5.1f} µs/msg  "
              f"runs {[round(r) for r in rates]}")  # fmt: skip
    if args.profile:
        from pyinstrument import Profiler  # type: ignore[import-not-found]  # not a requirement

        for fn in (service_one, service_bulk):
            profiler = Profiler(interval=0.0002)
            with profiler:
                fn(args.n)
            print(profiler.output_text(unicode=True, show_all=False))
    raw.close()
    connections.close_all()
    base, _, name = URL.rpartition("/")
    subprocess.run(["psql", "-X", "-q", f"{base}/postgres", "-c",
                    f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'])  # fmt: skip


if __name__ == "__main__":
    main()
