"""A remote worker's drain rate as a ratio of ``queue_worker``'s (a script, not a test).

    .venv/bin/python bench/remote_worker_bench.py [--messages 5000] [--repeat 2]

One database (SQLite file, or a fresh PostgreSQL database when
``DATABASE_URL`` names a server), one server process started as the black-box
tests start it (production settings, DEBUG off). Per turn, in rotating order
so machine drift lands on all alike: ``--messages`` messages are enqueued into
a fresh queue, then drained by

- ``queue_worker``: ``manage.py queue_worker --queue bench/<q> --handler noop
  --until-empty`` (one process, straight to the database);
- ``remote b10`` / ``remote b100``: ``queueclient.RemoteWorker`` over HTTP,
  concurrency 1, claim batches of 10 / 100, a no-op handler.

Printed: messages/s of each (first claim → every message acked, measured by
the stats endpoint at the end) and its ratio to ``queue_worker``'s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "clients" / "python")]

from queueclient import Client, RemoteWorker  # noqa: E402

from tests.blackbox.server import (  # noqa: E402
    Server,
    postgres_create,
    postgres_drop,
    postgres_url,
    production_env,
)


def drain_queue_worker(server: Server, queue: str, startup: float = 0.0) -> float:
    """Seconds to drain, less ``startup`` (the process's start and stop, timed
    on an empty queue): the drain alone, as the remote worker's is timed."""
    start = time.perf_counter()
    server.manage("queue_worker", "--queue", f"bench/{queue}", "--handler", "noop",
                  "--until-empty")  # fmt: skip
    return max(1e-3, time.perf_counter() - start - startup)


def drain_remote(client: Client, queue: str, batch: int) -> float:
    worker = RemoteWorker(client, f"bench/{queue}", lambda m: None, batch=batch, wait_seconds=0)
    start = time.perf_counter()
    worker.run(until_empty=True, install_signals=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    pg = postgres_url()
    name = f"bench_remote_{os.getpid()}"
    tmp = Path(tempfile.mkdtemp())
    url = postgres_create(pg, name) if pg else f"sqlite:///{tmp / 'db.sqlite3'}"
    server = Server(env=production_env(url), log_path=tmp / "server.log")
    try:
        server.manage("migrate", "--noinput", "-v", "0")
        server.create_group("bench")
        server.create_user("bench", password="bench-Passw0rd", staff=True)
        server.grant_role("bench", "bench", "admin")
        token = server.create_token(
            user="bench", scopes="queue:read,queue:write,queue:consume,queue:admin"
        )
        server.start()
        lines = ["queue_worker", "remote b10", "remote b100"]
        rates: dict[str, list[float]] = {line: [] for line in lines}
        with server.client(token) as http:
            http.post("/api/groups/bench/queues/", json={"name": "empty"}).raise_for_status()
        startup = min(drain_queue_worker(server, "empty") for _ in range(2))
        with Client(server.url, token, timeout=60) as client:
            for turn in range(args.repeat * len(lines)):
                line = lines[(turn + turn // len(lines)) % len(lines)]
                queue = f"q{turn}"
                with server.client(token) as http:
                    http.post("/api/groups/bench/queues/", json={"name": queue}).raise_for_status()
                q = client.queue(f"bench/{queue}")
                for start in range(0, args.messages, 500):
                    q.enqueue_many(
                        [{"n": i} for i in range(start, min(args.messages, start + 500))]
                    )
                if line == "queue_worker":
                    seconds = drain_queue_worker(server, queue, startup)
                else:
                    seconds = drain_remote(client, queue, 10 if line == "remote b10" else 100)
                assert q.stats().depth == 0, (line, q.stats())
                rates[line].append(args.messages / seconds)
        base = max(rates["queue_worker"])
        db = "PostgreSQL" if pg else "SQLite"
        print(f"{db}, {args.messages:,} messages per drain, best of {args.repeat} "
              f"(queue_worker less its {startup:.2f} s start-up):")  # fmt: skip
        for line in lines:
            best = max(rates[line])
            print(f"  {line:13s} {best:8,.0f} msg/s  ({best / base:.2f} of queue_worker)"
                  f"   runs: {', '.join(f'{r:,.0f}' for r in rates[line])}")  # fmt: skip
    finally:
        server.stop()
        if pg:
            postgres_drop(pg, name)


if __name__ == "__main__":
    main()
