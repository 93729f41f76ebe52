"""Fair share measured: a quiet tenant behind a noisy one (issue 18).

Tenant A enqueues 50,000 messages, then tenant B enqueues 100; one consumer
claims batches of ``--batch`` (default 100) and acks each batch before the
next claim. The script reports in which claim round (counted from B's
enqueue) B's last message was handled, once with ``fairness=none`` and once
with ``fairness=enqueuer``, each in a fresh collection.

    # SQLite (a temporary file)
    .venv/bin/python bench/fairness_bench.py
    # PostgreSQL (a database of your own: the script migrates it and leaves its rows)
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python bench/fairness_bench.py

``--a`` / ``--b`` change the two tenants' counts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_bench import migrate, setup_django


def enqueue_tenant(queue: object, tenant: str, count: int) -> None:
    from groupqueues import services

    for start in range(0, count, 500):
        batch = [services.NewMessage(payload={"t": tenant, "i": i})
                 for i in range(start, min(count, start + 500))]  # fmt: skip
        services.message_enqueue_batch(collection=queue, messages=batch, enqueued_by=tenant)  # type: ignore[arg-type]


def run(fairness: str, a: int, b: int, batch: int) -> tuple[int, int, float]:
    """(the round B's last message was handled in, rounds in all, seconds)."""
    from groupqueues import services
    from principals.models import Group

    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "bench"})
    queue = services.collection_create(
        group=group, name=f"fair-{uuid.uuid4().hex[:8]}", visibility_timeout=300
    )
    services.collection_update(collection=queue, fairness=fairness)
    enqueue_tenant(queue, "app:a", a)
    enqueue_tenant(queue, "app:b", b)
    start = time.perf_counter()
    b_left, last_b_round, rounds = b, 0, 0
    while True:
        messages = services.message_claim(collection=queue, worker_id="bench", n=batch)
        if not messages:
            break
        rounds += 1
        got_b = sum(1 for m in messages if m.payload["t"] == "app:b")
        if got_b:
            b_left -= got_b
            if b_left == 0:
                last_b_round = rounds
        services.message_ack_batch(collection=queue, acks=[(m.id, m.claim_token) for m in messages])
    return last_b_round, rounds, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=int, default=50_000, help="tenant A's messages")
    parser.add_argument("--b", type=int, default=100, help="tenant B's messages (after A's)")
    parser.add_argument("--batch", type=int, default=100, help="claim batch size")
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        database_url = f"sqlite:///{tempfile.mkdtemp(prefix='gq-fair-')}/bench.sqlite3"
    setup_django(database_url)
    migrate()
    from django.db import connection

    print(f"database: {connection.vendor}  A={args.a:,} then B={args.b:,}, batch {args.batch}")
    for fairness in ("none", "enqueuer"):
        last_b, rounds, seconds = run(fairness, args.a, args.b, args.batch)
        print(f"fairness={fairness:<9} B's last message handled in claim round {last_b:>5,} "
              f"of {rounds:,} ({seconds:.1f} s to drain)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
