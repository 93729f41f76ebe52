"""Drain through ``manage.py queue_worker`` as deployed, code trees interleaved
(issue 13; not a test).

    .venv/bin/python bench/drain_profile.py --project . --project /tmp/perf-base \
        [--n 100000] [--workers 1] [--rounds 2] [--peers /tmp/perf-peers/peers] \
        [--pyspy DIR] [--strace DIR] [--log-level INFO]

Each ``--project`` is a checkout of this project (e.g. a worktree of main for
"before"); they run alternately, round by round, each against a database of
its own (``perf_drain_<i>``, migrated once, dropped at the end). A run empties
the queue, enqueues ``--n`` messages in batches of 500 through the services,
VACUUM ANALYZEs and CHECKPOINTs, then starts ``--workers`` processes of
``queue_worker --queue bench/q --handler H --batch 100`` with the production
settings (maintenance on, the registry on, LISTEN/NOTIFY, INFO logging to a
file) and measures as the side-by-side harness does (/work/shared/peers):
first handler start -> every message acknowledged in the database. With
``--peers`` (the harness's ``peers/`` directory) the workers use its settings
module and its recording handler ``rec``, exactly as ``run_project.py``;
without, the project's ``noop`` handler and a first-start time read from the
database.

Also printed per run: the workers' CPU and their database backends' CPU per
message (from /proc), and the number of statements (``xact_commit`` of the
database, i.e. commits). ``--pyspy DIR`` attaches ``py-spy record --threads
--format raw`` (``--idle``: waiting threads too) to the first worker once it
handles messages;
``--strace DIR`` attaches ``strace -c -f`` instead (not both at once: they
slow the worker). Raw py-spy output is summarised with ``--summarise FILE``.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

PG = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
# py-spy: $PYSPY, else beside this interpreter (``pip install py-spy`` into .venv)
PYSPY = os.environ.get("PYSPY", str(Path(sys.executable).parent / "py-spy"))
LINE = 36  # the harness's rec.py writes fixed 36-byte lines

SETUP = """
import django, os, sys
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from groupqueues import services
from principals.models import Group
g = Group.objects.filter(slug="bench").first()
if g is None:
    from principals.services import group_create
    g = group_create(slug="bench", name="bench")
try:
    services.collection_get(group=g, name="q")
except Exception:
    services.collection_create(group=g, name="q")
"""

FILL = """
import django, sys, time
django.setup()
from django.db import connection
from groupqueues import services
from groupqueues.models import Message
from principals.models import Group
q = services.collection_get(group=Group.objects.get(slug="bench"), name="q")
Message.objects.filter(collection=q).delete()
n = int(sys.argv[1])
for i in range(0, n, 500):
    k = min(500, n - i)
    services.message_enqueue_batch(collection=q, enqueued_by="user:bench", messages=[
        services.NewMessage({"t": time.time(), "pad": "x" * 64}) for _ in range(k)])
with connection.cursor() as c:
    c.execute("VACUUM ANALYZE groupqueues_message")
    c.execute("CHECKPOINT")
"""


def sql(db: str, query: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(f"{PG}/{db}", autocommit=True) as c:
        cur = c.execute(query, params)
        return cur.fetchall() if cur.description else []


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Tree:
    """One checkout under test, with its database."""

    def __init__(self, spec: str, index: int, args: argparse.Namespace) -> None:
        path, _, level = spec.partition("@")  # "DIR@WARNING": that tree at another log level
        self.path = Path(path).resolve()
        self.label = spec
        self.py = str(self.path / ".venv" / "bin" / "python")
        if not Path(self.py).exists():
            self.py = sys.executable
        self.db = f"perf_drain_{index}"
        self.env = dict(os.environ, DATABASE_URL=f"{PG}/{self.db}", DEBUG="false",
                        SECRET_KEY="bench-not-secret-" + "x" * 40, ALLOWED_HOSTS="127.0.0.1",
                        LOG_LEVEL=level or args.log_level)  # fmt: skip
        if args.peers:
            self.env.update(DJANGO_SETTINGS_MODULE="djq.settings",
                            PYTHONPATH=f"{args.peers}{os.pathsep}{self.path}")  # fmt: skip
            self.handler = "rec"
        else:
            self.env.update(DJANGO_SETTINGS_MODULE="queueproject.settings",
                            PYTHONPATH=str(self.path))  # fmt: skip
            self.handler = "noop"

    def run_py(self, code: str, *argv: str) -> None:
        subprocess.run([self.py, "-c", code, *argv], cwd=self.path, env=self.env, check=True)

    def setup(self) -> None:
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
            c.execute(f'CREATE DATABASE "{self.db}"')
        self.run_py(SETUP)

    def drop(self) -> None:
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')


def rec_count(d: Path) -> int:
    return sum(p.stat().st_size // LINE for p in d.glob("rec.*"))


def first_start(d: Path) -> float:
    return min(
        float(line.split()[0]) for p in d.glob("rec.*") for line in p.read_text().splitlines()
    )


def pending(db: str) -> int:
    return int(sql(db, "SELECT count(*) FROM groupqueues_message WHERE state <> 'dead'")[0][0])


def drain(tree: Tree, args: argparse.Namespace, label: str) -> dict[str, float]:
    tree.run_py(FILL, str(args.n))
    assert pending(tree.db) == args.n
    commits0 = sql(tree.db, "SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                   (tree.db,))[0][0]  # fmt: skip
    rec_dir = Path(tempfile.mkdtemp(prefix="perf-rec-"))
    env = dict(tree.env, BENCH_REC_DIR=str(rec_dir))
    argv = [tree.py, "manage.py", "queue_worker", "--queue", "bench/q", "--handler", tree.handler,
            "--batch", "100", "--concurrency", "1"]  # fmt: skip
    logs = [open(rec_dir / f"worker{i}.log", "w") for i in range(args.workers)]  # noqa: SIM115
    procs = [subprocess.Popen(argv, cwd=tree.path, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True) for log in logs]  # fmt: skip
    tool = None
    t_spawn = t_first_noop = time.time()
    deadline = t_spawn + args.timeout
    try:
        if tree.handler == "rec":
            while rec_count(rec_dir) == 0:
                assert time.time() < deadline and procs[0].poll() is None, "worker did not start"
                time.sleep(0.005)
        else:
            while pending(tree.db) == args.n:
                assert time.time() < deadline and procs[0].poll() is None, "worker did not start"
                time.sleep(0.005)
            t_first_noop = time.time()
        backends = [r[0] for r in sql(tree.db, "SELECT pid FROM pg_stat_activity WHERE "
                                               "datname = %s AND pid <> pg_backend_pid()",
                                      (tree.db,))]  # fmt: skip
        cpu0 = sum(cpu_seconds(p.pid) for p in procs)
        db_cpu0 = {b: cpu_seconds(b) for b in backends}
        if args.pyspy:
            out = Path(args.pyspy) / f"{label}.txt"
            idle = ["--idle"] if args.idle else []
            tool = subprocess.Popen([PYSPY, "record", *idle, "--threads", "--format", "raw",
                                     "--rate", "250", "-o", str(out), "--pid",
                                     str(procs[0].pid)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)  # fmt: skip
        elif args.strace:
            out = Path(args.strace) / f"{label}.txt"
            tool = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p",
                                     str(procs[0].pid)], stderr=subprocess.DEVNULL)  # fmt: skip
        if tree.handler == "rec":
            while rec_count(rec_dir) < args.n:
                assert time.time() < deadline and all(p.poll() is None for p in procs), "stuck"
                time.sleep(0.02)
        while pending(tree.db):
            assert time.time() < deadline, "messages left"
            time.sleep(0.02)
        t_acked = time.time()
        cpu = sum(cpu_seconds(p.pid) for p in procs) - cpu0
        db_cpu = sum(cpu_seconds(b) - c for b, c in db_cpu0.items())
    finally:
        if tool is not None:
            tool.send_signal(signal.SIGINT)
            tool.wait(timeout=60)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
        for log in logs:
            log.close()
    t_first = first_start(rec_dir) if tree.handler == "rec" else t_first_noop
    commits = sql(tree.db, "SELECT xact_commit FROM pg_stat_database WHERE datname = %s",
                  (tree.db,))[0][0] - commits0  # fmt: skip
    elapsed = t_acked - t_first
    return {"msg_per_s": args.n / elapsed, "elapsed_s": elapsed, "startup_s": t_first - t_spawn,
            "worker_cpu_us": cpu / args.n * 1e6, "db_cpu_us": db_cpu / args.n * 1e6,
            "commits": commits}  # fmt: skip


def summarise(path: str, top: int = 45) -> None:
    """Self and inclusive sample counts per function (and per thread) of a
    py-spy raw (collapsed) file."""
    self_c: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = stack.split(";")
        total += n
        threads[frames[0]] += n
        self_c[frames[-1]] += n
        for f in set(frames[1:]):
            incl[f] += n
    print(f"{total} samples")
    for name, n in threads.most_common():
        print(f"  thread {name}: {n / total:.1%}")
    print("-- inclusive")
    for name, n in incl.most_common(top):
        print(f"{n / total:6.1%}  {name}")
    print("-- self")
    for name, n in self_c.most_common(top):
        print(f"{n / total:6.1%}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--project",
        action="append",
        default=[],
        help="a checkout (repeatable); DIR@LEVEL runs it at another log level",
    )
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--peers", default=None, help="the harness's peers/ directory (handler rec)")
    ap.add_argument("--pyspy", default=None, help="directory for py-spy raw profiles")
    ap.add_argument("--idle", action="store_true", help="py-spy: sample waiting threads too")
    ap.add_argument("--strace", default=None, help="directory for strace -c summaries")
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--summarise", default=None, help="summarise a py-spy raw file and exit")
    args = ap.parse_args()
    if args.summarise:
        summarise(args.summarise)
        return
    trees = [Tree(p, i, args) for i, p in enumerate(args.project or ["."])]
    for tree in trees:
        tree.setup()
    results: dict[int, list[dict[str, float]]] = collections.defaultdict(list)
    try:
        for r in range(args.rounds):
            for i, tree in enumerate(trees):
                load = os.getloadavg()[0]
                res = drain(tree, args, f"t{i}-r{r}-w{args.workers}")
                results[i].append(res)
                print(f"round {r + 1} {tree.label} x{args.workers}: {res['msg_per_s']:,.0f} msg/s "
                      f"({res['elapsed_s']:.2f} s; worker CPU {res['worker_cpu_us']:.0f} µs/msg, "
                      f"db CPU {res['db_cpu_us']:.0f} µs/msg, {res['commits']} commits; "
                      f"load {load:.1f})", flush=True)  # fmt: skip
    finally:
        for tree in trees:
            tree.drop()
    for i, tree in enumerate(trees):
        rates = [r["msg_per_s"] for r in results[i]]
        print(
            f"{tree.path}: median {statistics.median(rates):,.0f} msg/s  runs "
            f"{[round(x) for x in rates]}"
        )
    if len(trees) > 1 and all(results.values()):
        base = statistics.median(r["msg_per_s"] for r in results[len(trees) - 1])
        for i in range(len(trees) - 1):
            med = statistics.median(r["msg_per_s"] for r in results[i])
            print(f"ratio {trees[i].label} / {trees[-1].label}: {med / base:.2f}")


if __name__ == "__main__":
    main()
