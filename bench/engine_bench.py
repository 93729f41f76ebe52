"""Throughput of the group queue engine (not a test; see bench/README.md).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python bench/engine_bench.py
    .venv/bin/python bench/engine_bench.py                  # SQLite (a temporary file)

Measures, through the services (the code path the API and workers use):
enqueue one by one and in batches of 500; claim+ack at batch sizes 1 and 100
with 1 and 4 processes; batch 1 and 100 with each ack carrying the next claim
(``message_ack_and_claim``, ``message_ack_batch_and_claim``); the same with
1,000,000 dead rows in the table.
Prints messages/second. Each scenario runs in its own fresh collection.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the bench imports Django code only after django.setup()
    from multiprocessing.synchronize import Event

    from cpu_cost import Cost

    from groupqueues.models import Collection

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(database_url: str | None) -> None:
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ["DEBUG"] = "0"
    os.environ["DJANGO_SETTINGS_MODULE"] = "queueproject.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def new_queue(label: str) -> Collection:
    from groupqueues import services
    from principals.models import Group

    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "bench"})
    name = f"{label}-{uuid.uuid4().hex[:8]}"
    return services.collection_create(group=group, name=name, visibility_timeout=300)


def fill(queue: Collection, count: int) -> None:
    from groupqueues import services

    for start in range(0, count, 500):
        batch = [
            services.NewMessage(payload={"i": i}) for i in range(start, min(count, start + 500))
        ]
        services.message_enqueue_batch(collection=queue, messages=batch, enqueued_by="bench")


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>10,.0f} msg/s  ({count:,} in {seconds:.2f} s)"


def bench_enqueue_single(count: int) -> tuple[int, float]:
    from groupqueues import services

    queue = new_queue("single")
    start = time.perf_counter()
    for i in range(count):
        services.message_enqueue(collection=queue, payload={"i": i}, enqueued_by="bench")
    return count, time.perf_counter() - start


def bench_enqueue_batch(count: int) -> tuple[int, float]:
    queue = new_queue("batch")
    start = time.perf_counter()
    fill(queue, count)
    return count, time.perf_counter() - start


def drain(collection_id: int, batch: int, limit: int | None = None) -> int:
    """Claim and ack until the queue is empty (or ``limit`` messages)."""
    from groupqueues import services
    from groupqueues.models import Collection

    queue = Collection.objects.get(pk=collection_id)
    worker = f"bench-{os.getpid()}"
    done = 0
    while limit is None or done < limit:
        messages = services.message_claim(collection=queue, worker_id=worker, n=batch)
        if not messages:
            break
        if batch == 1:
            m = messages[0]
            services.message_ack(collection=queue, id=m.id, claim_token=m.claim_token)
        else:
            services.message_ack_batch(
                collection=queue, acks=[(m.id, m.claim_token) for m in messages]
            )
        done += len(messages)
    return done


def drain_combined(collection_id: int, batch: int) -> int:
    """The way a consumer that acks each batch before the next should work:
    each ack carries the next claim (``message_ack_and_claim`` at batch 1,
    ``message_ack_batch_and_claim`` above)."""
    from groupqueues import services
    from groupqueues.models import Collection

    queue = Collection.objects.get(pk=collection_id)
    worker = f"bench-{os.getpid()}"
    held = services.message_claim(collection=queue, worker_id=worker, n=batch)
    done = 0
    while held:
        done += len(held)
        if batch == 1:
            (m,) = held
            held = services.message_ack_and_claim(
                collection=queue, id=m.id, claim_token=m.claim_token, worker_id=worker
            ).messages
        else:
            held = services.message_ack_batch_and_claim(
                collection=queue, acks=[(m.id, m.claim_token) for m in held],
                worker_id=worker, n=batch,
            ).messages  # fmt: skip
    return done


def bench_ack_and_claim(count: int, batch: int = 1) -> tuple[int, float]:
    queue = new_queue(f"combined{batch}")
    fill(queue, count)
    start = time.perf_counter()
    done = drain_combined(queue.pk, batch)
    return done, time.perf_counter() - start


def _process_main(
    database_url: str | None, collection_id: int, batch: int, ready: Event, go: Event
) -> int:
    setup_django(database_url)
    from django.db import connection

    connection.ensure_connection()
    ready.wait()
    go.wait()
    return drain(collection_id, batch)


def bench_claim_ack(
    count: int, batch: int, processes: int, database_url: str | None
) -> tuple[int, float]:
    queue = new_queue(f"claim{batch}x{processes}")
    fill(queue, count)
    if processes == 1:
        start = time.perf_counter()
        done = drain(queue.pk, batch)
        return done, time.perf_counter() - start
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        ready, go = manager.Barrier(processes + 1), manager.Event()
        with ctx.Pool(processes) as pool:
            results = [
                pool.apply_async(_process_main, (database_url, queue.pk, batch, ready, go))
                for _ in range(processes)
            ]
            ready.wait()
            start = time.perf_counter()
            go.set()
            done = sum(r.get() for r in results)
            return done, time.perf_counter() - start


def add_dead_rows(count: int) -> None:
    """Bulk-insert ``count`` dead rows into a separate collection (raw SQL)."""
    from django.db import connection

    queue = new_queue("graveyard")
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(
                """
                INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority,
                    enqueued_at, deliver_after, state, claimed_by, attempt, max_attempts,
                    last_error, dead_reason, died_at, enqueued_by)
                SELECT gen_random_uuid(), %(group)s, %(collection)s, '{"dead": true}'::jsonb, 0,
                    now(), now(), 'dead', '', 3, 3, 'boom', 'exhausted', now(), 'bench'
                FROM generate_series(1, %(count)s)
                """,
                {"group": queue.group_id, "collection": queue.pk, "count": count},
            )
        else:
            cur.execute(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s)
                INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority,
                    enqueued_at, deliver_after, state, claimed_by, attempt, max_attempts,
                    last_error, dead_reason, died_at, enqueued_by)
                SELECT lower(hex(randomblob(16))), %s, %s, '{"dead": true}', 0,
                    datetime('now'), datetime('now'), 'dead', '', 3, 3, 'boom', 'exhausted',
                    datetime('now'), 'bench'
                FROM n
                """,
                [count, queue.group_id.hex, queue.pk],
            )
    settle()


def settle() -> None:
    """Steady state before measuring: statistics and the visibility map as
    autovacuum would leave them, and (PostgreSQL) the bulk insert's WAL
    checkpointed so its fsyncs do not land inside the next measurement."""
    from django.db import connection

    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("VACUUM ANALYZE groupqueues_message")
            cur.execute("CHECKPOINT")
        else:
            cur.execute("ANALYZE")


PGBENCH_ENQUEUE = """
INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority, enqueued_at,
    deliver_after, state, claimed_by, attempt, max_attempts, enqueued_by)
VALUES (gen_random_uuid(), {gid}::uuid, :cid, '{"i": 1}', 0, now(), now(), 'ready', '', 0, 3,
    'bench');
"""

# 500 rows per statement, generated by the server: the database's own cost of
# a batch enqueue. Ids rise like the services' UUIDv7 ones (a sequence).
PGBENCH_ENQUEUE_BATCH = """
INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority, enqueued_at,
    deliver_after, state, claimed_by, attempt, max_attempts, enqueued_by)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(nextval('bench_ids')), 12, '0'))::uuid,
    {gid}::uuid, :cid, jsonb_build_object('i', g), 0, now(), now(), 'ready', '', 0, 3, 'bench'
FROM generate_series(1, 500) AS g;
"""

# pgbench keeps one row of a result (\gset): the batch-100 ack deletes what
# this client holds instead of naming the 100 pairs.
PGBENCH_ACK_HELD = """
DELETE FROM groupqueues_message WHERE collection_id = :cid AND claimed_by = 'pgbench'
  AND state = 'claimed';
"""


def pgbench_baseline(database_url: str, count: int) -> None:
    """The same statements through pgbench's C client (no Python at all), under
    the machine's current load: single-row enqueue, a 500-row enqueue, claim
    (sql.CLAIM_POSTGRES with n=1) + ack (sql.ACK_POSTGRES), and claim with n=100
    + a delete of the 100 held rows; each in pgbench's simple (parsed and
    planned every time) and prepared query modes. Our rates divided by these
    are the share of the database's own speed that the services keep."""
    import re
    import shutil
    import subprocess

    from django.db import connection

    from groupqueues import sql

    if shutil.which("pgbench") is None:
        print("(pgbench not found: no raw baseline)")
        return
    queue = new_queue("pgbench")
    values = {"collection_id": ":cid", "now": "now()", "n": "1", "worker_id": "'pgbench'",
              "lease_expires_at": "now() + interval '300 s'", "id": "{id}",
              "token": "{token}", "async_commit": "false"}  # fmt: skip

    def inline(query: str, **over: str) -> str:
        return re.sub(r"%\((\w+)\)s", lambda m: {**values, **over}[m[1]], query).strip()

    claim, claim100 = inline(sql.CLAIM_POSTGRES), inline(sql.CLAIM_POSTGRES, n="100")
    scripts = {  # label: (script, messages per transaction)
        "enqueue one by one": (PGBENCH_ENQUEUE.strip(), 1),
        "enqueue batches of 500": (PGBENCH_ENQUEUE_BATCH.strip(), 500),
        "claim+ack batch   1": (f"{claim} \\gset\n{inline(sql.ACK_POSTGRES)};", 1),
        "claim+ack batch 100": (f"{claim100};\n{PGBENCH_ACK_HELD.strip()}", 100),
    }
    with connection.cursor() as cur:
        cur.execute("CREATE SEQUENCE IF NOT EXISTS bench_ids")
    for label, (script, per) in scripts.items():
        for mode in ("simple", "prepared"):
            fill(queue, count + 100 if per == 1 else count * 20 + 100)
            settle()
            # a \gset variable is pasted as text in simple mode, bound in prepared
            quote = "'" if mode == "simple" else ""
            text = script
            for name, value in (("{gid}", f"{quote}:gid{quote}"),
                                ("{id}", f"{quote}:id{quote}::uuid"),
                                ("{token}", f"{quote}:claim_token{quote}::uuid")):  # fmt: skip
                text = text.replace(name, value)
            with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
                f.write(text + "\n")
            out = subprocess.run(
                ["pgbench", "-n", "-c", "1", "-t", str(count if per == 1 else count // 25),
                 "-M", mode, "-f", f.name,
                 "-D", f"cid={queue.pk}", "-D", f"gid={queue.group_id}", database_url],
                capture_output=True, text=True,
            )  # fmt: skip
            tps = re.search(r"tps = ([\d.]+)", out.stdout)
            name = f"pgbench {label} ({mode})"
            if tps is None:
                print(f"{name}: failed: {out.stderr.strip()[:300]}")
            else:
                print(f"{name:<42} {float(tps[1]) * per:>10,.0f} msg/s  (raw SQL, C client)")


# --- ordering keys and fairness against the plain path (issue 18) ---------

FEATURE_KEYS = 10_000
FEATURE_TENANTS = 10


def fill_featured(queue: Collection, count: int, mode: str) -> None:
    """``count`` messages for ``mode``: "plain" (as ``fill``), "keys" (ordering
    keys round-robin over FEATURE_KEYS distinct keys) or "fair" (fairness by
    enqueuer, FEATURE_TENANTS enqueuers each enqueuing a share in turn)."""
    from groupqueues import services

    if mode == "fair":
        services.collection_update(collection=queue, fairness="enqueuer")
    for start in range(0, count, 500):
        stop = min(count, start + 500)
        key = (lambda i: f"k{i % FEATURE_KEYS}") if mode == "keys" else (lambda i: None)
        batch = [services.NewMessage(payload={"i": i}, ordering_key=key(i))
                 for i in range(start, stop)]  # fmt: skip
        by = f"tenant{(start // 500) % FEATURE_TENANTS}" if mode == "fair" else "bench"
        services.message_enqueue_batch(collection=queue, messages=batch, enqueued_by=by)


def bench_feature(count: int, batch: int, mode: str) -> tuple[int, Cost]:
    """claim+ack at ``batch`` in one process over a queue filled for ``mode``:
    (messages, what the drain cost)."""
    from cpu_cost import measured

    queue = new_queue(mode)
    fill_featured(queue, count, mode)
    settle()
    return measured(lambda: drain(queue.pk, batch))


def features(count: int, repeat: int) -> None:
    """Plain, keys and fairness interleaved (plain first in every round), and
    each one's median rate as a share of the plain path's, by wall clock and by
    CPU (client + server) per message: on a busy machine the wall-clock rates
    of one mode vary several-fold between rounds, its CPU far less."""
    rates: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeat):
        for batch in (1, 100):
            for mode in ("plain", "keys", "fair"):
                done, cost = bench_feature(count if batch == 100 else count // 10, batch, mode)
                rates.setdefault((mode, batch), []).append(done / cost.wall)
                cpus.setdefault((mode, batch), []).append(cost.cpu / done * 1e6)
    for batch in (1, 100):
        plain_rate = statistics.median(rates["plain", batch])
        plain_cpu = statistics.median(cpus["plain", batch])
        for mode in ("plain", "keys", "fair"):
            r, c = statistics.median(rates[mode, batch]), statistics.median(cpus[mode, batch])
            print(
                f"claim+ack batch {batch:>3}, {mode:<5} {r:>10,.0f} msg/s {r / plain_rate:>6.0%}"
                f" of plain; CPU {c:>6.0f} us/msg, plain/this {plain_cpu / c:>5.0%}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    parser.add_argument("--dead", type=int, default=1_000_000, help="dead rows to add")
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario; best shown")
    parser.add_argument("--pgbench", action="store_true", help="also run the raw pgbench baseline")
    parser.add_argument(
        "--features", action="store_true", help="only: claim+ack with keys / fairness vs plain"
    )
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL")
    tmp = None
    if not database_url:
        tmp = tempfile.mkdtemp(prefix="gq-bench-")
        database_url = f"sqlite:///{tmp}/bench.sqlite3"
    setup_django(database_url)
    migrate()
    from django.db import connection

    load = os.getloadavg()[0]
    print(f"database: {connection.vendor}  (scale {args.scale}, load average {load:.2f})")
    n = lambda base: max(100, int(base * args.scale))  # noqa: E731

    def run(label: str, fn: Callable[..., tuple[int, float]], *fnargs: Any) -> None:
        runs = []
        for _ in range(args.repeat):
            settle()
            runs.append(fn(*fnargs))
        done, seconds = max(runs, key=lambda r: r[0] / r[1])
        print(f"{label:<42} {rate(done, seconds)}", flush=True)

    if args.features:
        features(n(20_000), args.repeat)
        return
    if args.pgbench and connection.vendor == "postgresql":
        pgbench_baseline(database_url, n(5_000))
    run("enqueue one by one", bench_enqueue_single, n(5_000))
    run("enqueue batches of 500", bench_enqueue_batch, n(100_000))
    for batch, base in ((1, 5_000), (100, 100_000)):
        for processes in (1, 4):
            run(
                f"claim+ack batch {batch:>3}, {processes} process(es)",
                bench_claim_ack, n(base), batch, processes, database_url,
            )  # fmt: skip
        run(f"ack+claim next, batch {batch:>3}, 1 process", bench_ack_and_claim, n(base), batch)
    if args.dead:
        start = time.perf_counter()
        add_dead_rows(args.dead)
        print(f"(inserted {args.dead:,} dead rows in {time.perf_counter() - start:.1f} s)")
        for batch, base in ((1, 5_000), (100, 100_000)):
            run(
                f"claim+ack batch {batch:>3}, 1 process, dead rows",
                bench_claim_ack, n(base), batch, 1, database_url,
            )  # fmt: skip
        for batch, base in ((1, 5_000), (100, 100_000)):
            run(f"ack+claim next, batch {batch:>3}, dead rows", bench_ack_and_claim, n(base), batch)


if __name__ == "__main__":
    main()
    print(f"(load average at the end {os.getloadavg()[0]:.2f})")
