"""Throughput of the group queue engine (not a test; see bench/README.md).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python bench/engine_bench.py
    .venv/bin/python bench/engine_bench.py                  # SQLite (a temporary file)

Measures, through the services (the code path the API and workers use):
enqueue one by one and in batches of 500; claim+ack at batch sizes 1 and 100
with 1 and 4 processes; the same with 1,000,000 dead rows in the table.
Prints messages/second. Each scenario runs in its own fresh collection.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

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


def new_queue(label: str):  # type: ignore[no-untyped-def]
    from groupqueues import services
    from principals.models import Group

    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "bench"})
    name = f"{label}-{uuid.uuid4().hex[:8]}"
    return services.collection_create(group=group, name=name, visibility_timeout=300)


def fill(queue, count: int) -> None:  # type: ignore[no-untyped-def]
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


def _process_main(database_url: str | None, collection_id: int, batch: int, ready, go) -> int:  # type: ignore[no-untyped-def]
    setup_django(database_url)
    from django.db import connection

    connection.ensure_connection()
    ready.wait()
    go.wait()
    return drain(collection_id, batch)


def bench_claim_ack(count: int, batch: int, processes: int, database_url: str | None):
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
            cur.execute("ANALYZE groupqueues_message")
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
            cur.execute("ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    parser.add_argument("--dead", type=int, default=1_000_000, help="dead rows to add")
    parser.add_argument("--only", default="", help="comma list of scenarios to run")
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL")
    tmp = None
    if not database_url:
        tmp = tempfile.mkdtemp(prefix="gq-bench-")
        database_url = f"sqlite:///{tmp}/bench.sqlite3"
    setup_django(database_url)
    migrate()
    from django.db import connection

    print(f"database: {connection.vendor}  (scale {args.scale})")
    n = lambda base: max(100, int(base * args.scale))  # noqa: E731
    only = set(filter(None, args.only.split(",")))

    def run(label: str, fn, *fnargs) -> None:  # type: ignore[no-untyped-def]
        if only and label.split()[0] not in only:
            return
        done, seconds = fn(*fnargs)
        print(f"{label:<42} {rate(done, seconds)}", flush=True)

    run("enqueue one by one", bench_enqueue_single, n(5_000))
    run("enqueue batches of 500", bench_enqueue_batch, n(100_000))
    for batch, base in ((1, 5_000), (100, 100_000)):
        for processes in (1, 4):
            run(
                f"claim+ack batch {batch:>3}, {processes} process(es)",
                bench_claim_ack, n(base), batch, processes, database_url,
            )  # fmt: skip
    if args.dead and (not only or "dead" in only):
        start = time.perf_counter()
        add_dead_rows(args.dead)
        print(f"(inserted {args.dead:,} dead rows in {time.perf_counter() - start:.1f} s)")
        only.discard("dead")
        for batch, base in ((1, 5_000), (100, 100_000)):
            run(
                f"claim+ack batch {batch:>3}, 1 process, dead rows",
                bench_claim_ack, n(base), batch, 1, database_url,
            )  # fmt: skip


if __name__ == "__main__":
    main()
