"""Worker benchmarks (a script, not a test): drain throughput and wake-up latency.

    .venv/bin/python bench/worker_bench.py [--db postgres|sqlite|both] [--messages 10000]
                                           [--latency-messages 500] [--skip-latency]

PostgreSQL: ``BENCH_DATABASE_URL`` (default
postgresql://postgres@127.0.0.1:5432/bench; the database must exist and
is migrated and emptied here). SQLite: a scratch file in /tmp.

(a) drain: N messages are enqueued, then one (and then two) ``manage.py
    queue_worker --handler noop --batch 100 --until-empty`` processes drain
    them. Reported: wall time from process start to exit (includes ~0.5 s of
    Python/Django start-up) and the worker's own rate (first claim to exit).
(b) latency: an idle worker (``--batch 1``) runs a handler that prints when it
    starts; the bench enqueues messages one at a time with random gaps and
    reports enqueue-committed → handler-start, p50/p99.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the bench imports Django code only after django.setup()
    from groupqueues.models import Collection

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/bench")
SQLITE_URL = "sqlite:////tmp/bench.sqlite3"
PY = sys.executable


def env_for(url: str) -> dict[str, str]:
    env = dict(os.environ, DATABASE_URL=url, DJANGO_SETTINGS_MODULE="queueproject.settings_test")
    env["PYTHONPATH"] = str(ROOT)
    return env


def setup_django(url: str) -> None:
    os.environ.update(env_for(url))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def fresh_queue() -> Collection:
    from groupqueues import services
    from groupqueues.models import Collection, Message
    from principals.models import Group

    Message.objects.all().delete()
    Collection.objects.filter(group__slug="bench").delete()
    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "bench"})
    return services.collection_create(group=group, name="drain")


def enqueue_n(queue: Collection, n: int) -> None:
    from groupqueues import services

    for start in range(0, n, services.MAX_BATCH):
        news = [services.NewMessage(payload={"n": i}) for i in range(start, min(n, start + 500))]
        services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="bench")


WORKER = ["manage.py", "queue_worker", "--queue", "bench/drain", "--handler", "noop",
          "--batch", "100", "--until-empty", "--no-maintenance"]  # fmt: skip


def drain(url: str, processes: int, concurrency: int) -> tuple[float, float, list[str]]:
    """Run the worker processes to the end: (wall seconds, CPU seconds, stdouts)."""
    env = env_for(url)
    env["LOG_LEVEL"] = os.environ.get("BENCH_LOG_LEVEL", "INFO")
    started = time.perf_counter()
    procs = [
        subprocess.Popen([PY, *WORKER, "--concurrency", str(concurrency)], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for _ in range(processes)
    ]  # fmt: skip
    outs, cpu = [], 0.0
    for proc in procs:
        assert proc.stdout is not None  # stdout=PIPE
        outs.append(proc.stdout.read().strip())
        _, _, usage = os.wait4(proc.pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
    return time.perf_counter() - started, cpu, outs


def _seconds_reported(out: str) -> float:
    """The ``seconds=`` figure of a worker's closing log line."""
    found = re.search(r"seconds=([\d.]+)", out)
    assert found is not None, f"no seconds= in the worker's output: {out!r}"
    return float(found.group(1))


def bench_drain(url: str, n: int, repeat: int) -> None:
    from groupqueues.models import Message

    fresh_queue()
    _, idle_cpu, _ = drain(url, 1, 1)
    print(f"  start-up and exit of an idle worker: {idle_cpu:.2f}s CPU")
    for processes, concurrency in ((1, 1), (1, 2), (2, 1)):
        runs = []
        for _ in range(repeat):
            queue = fresh_queue()
            enqueue_n(queue, n)
            wall, cpu, outs = drain(url, processes, concurrency)
            assert Message.objects.count() == 0, "messages left behind"
            inner = max(_seconds_reported(o) for o in outs)
            runs.append((inner, wall, cpu))
        inner, wall, cpu = min(runs)
        print(f"  drain {n} msgs, {processes} process(es) x {concurrency} thread(s), best of "
              f"{repeat}: in-worker {inner:.2f}s = {n / inner:,.0f} msg/s; wall with start-up "
              f"{wall:.2f}s = {n / wall:,.0f} msg/s; worker CPU {cpu:.2f}s, net of start-up "
              f"{(cpu - processes * idle_cpu) / n * 1e6:.0f} µs/msg")  # fmt: skip


# --- latency ------------------------------------------------------------------------

LATENCY_WORKER = """
import sys, time
sys.path.insert(0, {root!r})
import django
django.setup()
from groupqueues.handlers import handlers

@handlers.register("bench_mark")
def bench_mark(delivery):
    print("START", delivery.payload["i"], repr(time.time()), flush=True)

from django.core.management import call_command
call_command("queue_worker", "--queue", "bench/drain", "--handler", "bench_mark",
             "--batch", "1", "--no-maintenance")
"""


def bench_latency(url: str, count: int) -> None:
    from groupqueues import services

    queue = fresh_queue()
    env = env_for(url)
    env["LOG_LEVEL"] = "WARNING"
    code = LATENCY_WORKER.format(root=str(ROOT))
    proc = subprocess.Popen([PY, "-c", code], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)  # fmt: skip
    time.sleep(3.0)  # start-up and LISTEN
    committed, durations = {}, []
    for i in range(count):
        time.sleep(random.uniform(0.005, 0.02))
        before = time.time()
        services.message_enqueue(collection=queue, payload={"i": i}, enqueued_by="bench")
        committed[i] = time.time()
        durations.append(committed[i] - before)
    time.sleep(2.0)
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    starts = {int(i): float(t) for _, i, t in (line.split() for line in out.splitlines()
                                              if line.startswith("START"))}  # fmt: skip
    lat = sorted((starts[i] - committed[i]) * 1000 for i in starts)
    missing = count - len(lat)
    p50, p99 = statistics.median(lat), lat[max(0, int(len(lat) * 0.99) - 1)]
    enq = statistics.median(durations) * 1000
    print(f"  wake-up latency over {len(lat)} msgs (enqueue committed → handler start): "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {lat[-1]:.2f} ms; "
          f"enqueue call p50 {enq:.2f} ms; missing {missing}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=["postgres", "sqlite", "both"], default="both")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--latency-messages", type=int, default=500)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-drain", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="drain runs per setting (best)")
    args = parser.parse_args()
    if args.db == "both":  # one Django per process: run each database in a child
        for db in ("postgres", "sqlite"):
            subprocess.run([PY, __file__, *sys.argv[1:], "--db", db], check=True)
        return
    url = PG_URL if args.db == "postgres" else SQLITE_URL
    setup_django(url)
    print(f"== {args.db}")
    if not args.skip_drain:
        bench_drain(url, args.messages, args.repeat)
    if not args.skip_latency:
        bench_latency(url, args.latency_messages)


if __name__ == "__main__":
    main()
