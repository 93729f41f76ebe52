"""The hot path at a paced rate (issue 19 point 6; a script, not a test):
does enqueue + claim + ack keep up at a given rate, and at what CPU?

    .venv/bin/python bench/per_core_rate_sim.py [--rate 1160] [--seconds 30]
        [--producers 2] [--enqueue-batch 1] [--concurrency 2] [--batch 10]

PostgreSQL only: ``BENCH_DATABASE_URL`` (default
postgresql://postgres@127.0.0.1:5432/worker_sim; created if missing, migrated
and emptied here).

``--producers`` threads of this process enqueue ``--rate`` messages/s between
them (one ``message_enqueue`` per message, or ``--enqueue-batch`` per call:
producers as deployed, one request one message), paced on a fixed schedule
(a producer that falls behind does not sleep until it caught up); one
``queue_worker --handler noop`` process drains them. Every second the script
samples the depth (ready + claimed). At the end it reports:

- the enqueue rate achieved and the drain rate (acked over the run), the
  depth at the end and its largest value (it keeps up when both stay small:
  below a few claim batches per slot);
- CPU, as cores (CPU seconds / wall seconds): this process (the producers),
  the worker, and the PostgreSQL backends serving both (``/proc/<pid>/stat``
  of the backends of this database; the server's WAL writer, checkpointer
  and autovacuum are not counted); and CPU per message in microseconds;
- WAL bytes per message (the server's, so an upper bound on a shared server).

10^8 messages a day are 1,157/s on average and ~11,600/s at a tenfold peak;
``docs/scale-plan.md`` divides the peak by the cores of a deployment and runs
this script at that per-core share.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/worker_sim")
PY = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")


def log(*parts: Any) -> None:
    print(time.strftime("%H:%M:%S", time.gmtime()), *parts, flush=True)


def ensure_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def env_for(url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="queueproject.settings_test",
               PYTHONPATH=str(ROOT), QUEUE_WORKER_REGISTRY="1")  # fmt: skip
    env.update(extra)
    return env


def setup_django(url: str) -> None:
    os.environ.update(env_for(url))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_ready(worker_id: str, timeout: float = 120.0) -> None:
    """Until the worker's registry row names its queue (it serves it)."""
    from queueproject.models import WorkerProcess

    deadline = time.monotonic() + timeout
    while not WorkerProcess.objects.filter(id=worker_id).exclude(queues=[]).exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the worker did not start")
        time.sleep(0.2)
    time.sleep(1.0)  # its first claims and LISTEN


def wal_lsn() -> int:
    """The server's current WAL position, in bytes."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        return int(cursor.fetchone()[0])


class Backends:
    """CPU of this database's PostgreSQL backends, including those that come
    and go (each seen backend's last reading is kept)."""

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def sample(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            for (pid,) in cursor.fetchall():
                now = cpu_seconds(pid)
                self.first.setdefault(pid, now)
                if now:
                    self.last[pid] = now

    def used(self) -> float:
        return sum(self.last.get(pid, v) - v for pid, v in self.first.items())


def producer(queue: Any, rate: float, seconds: float, batch: int, out: list[int]) -> None:
    """Enqueue ``rate`` messages/s for ``seconds`` on a fixed schedule."""
    from django.db import connection

    from groupqueues import services

    interval = batch / rate
    started = time.monotonic()
    sent = 0
    try:
        while time.monotonic() - started < seconds:
            due = started + (sent / batch) * interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if batch == 1:
                services.message_enqueue(collection=queue, payload={"n": sent}, enqueued_by="sim")
            else:
                news = [services.NewMessage(payload={"n": sent + i}) for i in range(batch)]
                services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="sim")
            sent += batch
    finally:
        out.append(sent)
        connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1160.0, help="messages/s")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--enqueue-batch", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--batch", type=int, default=10)
    a = parser.parse_args()
    ensure_database(PG_URL)
    setup_django(PG_URL)
    from groupqueues import services
    from groupqueues.models import Collection, Message
    from principals.models import Group

    group, _ = Group.objects.get_or_create(slug="sim", defaults={"name": "sim"})
    Message.objects.filter(collection__group=group).delete()
    Collection.objects.filter(group=group).delete()
    queue = services.collection_create(group=group, name="hot")
    worker = subprocess.Popen(
        [PY, "manage.py", "queue_worker", "--queue", "sim/hot", "--handler", "noop",
         "--concurrency", str(a.concurrency), "--batch", str(a.batch), "--worker-id", "sim"],
        cwd=ROOT, env=env_for(PG_URL), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_ready("sim")  # the worker's start-up is not part of the hot path
    load = os.getloadavg()[0]
    wal0 = wal_lsn()
    backends = Backends()
    backends.sample()
    me0, worker0 = cpu_seconds(os.getpid()), cpu_seconds(worker.pid)
    sent: list[int] = []
    threads = [threading.Thread(target=producer, args=(queue, a.rate / a.producers, a.seconds,
                                                       a.enqueue_batch, sent))
               for _ in range(a.producers)]  # fmt: skip
    started = time.monotonic()
    for t in threads:
        t.start()
    depths = []
    while any(t.is_alive() for t in threads):
        time.sleep(1.0)
        depths.append(Message.objects.filter(collection=queue).count())
        backends.sample()
    wall = time.monotonic() - started
    backends.sample()
    me, work, db = (
        cpu_seconds(os.getpid()) - me0,
        cpu_seconds(worker.pid) - worker0,
        backends.used(),
    )
    wal = wal_lsn() - wal0
    end_depth = depths[-1] if depths else 0
    total = sum(sent)
    acked = total - end_depth
    worker.terminate()
    worker.wait(30)
    cores = {"producers": me / wall, "worker": work / wall, "postgres": db / wall}
    log(f"target {a.rate:,.0f} msg/s for {a.seconds:.0f}s ({a.producers} producer(s), enqueue "
        f"batch {a.enqueue_batch}; worker {a.concurrency} slot(s), batch {a.batch}); load "
        f"average {load:.1f} at start")  # fmt: skip
    log(f"enqueued {total:,} = {total / wall:,.0f}/s; acked {acked:,} = {acked / wall:,.0f}/s; "
        f"depth at the end {end_depth}, largest {max(depths, default=0)}")  # fmt: skip
    log("cores: " + ", ".join(f"{k} {v:.2f}" for k, v in cores.items())
        + f"; total {sum(cores.values()):.2f}; CPU per message "
        f"{(me + work + db) / max(total, 1) * 1e6:,.0f} µs "
        f"(producers {me / max(total, 1) * 1e6:,.0f}, worker {work / max(total, 1) * 1e6:,.0f}, "
        f"postgres {db / max(total, 1) * 1e6:,.0f})")  # fmt: skip
    log(
        f"WAL {wal / max(total, 1):,.0f} bytes per message (the whole server's WAL over the "
        f"run: an upper bound when other databases are busy)"
    )
    keeps_up = total >= 0.97 * a.rate * a.seconds and end_depth <= 4 * a.batch * a.concurrency
    log("keeps up" if keeps_up else "DOES NOT keep up")


if __name__ == "__main__":
    main()
