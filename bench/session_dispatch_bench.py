"""Session dispatch throughput and fairness: ``session_dispatch --concurrency``
against a slow webhook (a script, not a test).

Usage (from the project root):

    .venv/bin/python bench/session_dispatch_bench.py                   # SQLite (a temp file)
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench_sd \\
        .venv/bin/python bench/session_dispatch_bench.py              # PostgreSQL (scratch db)

    options: --sessions 1000 --entries 2 --webhook-ms 50 --runs 1x16,2x16 --repeat 1

The database is migrated first; on PostgreSQL it must exist and be disposable
(every session-queue row in it is deleted before each run). A local HTTP
server in this process is the apps' webhook: it answers ``{"ready": true}``
after ``--webhook-ms`` and records when it answered each prompt.

Each run (``PxC``: P dispatcher processes of concurrency C, as real
``manage.py session_dispatch`` processes with production settings, DEBUG off,
the default log level) starts with ``--sessions`` sessions of ``--entries``
prompts each and every agent busy; once every dispatcher has written its
worker-registry row (so it is in its loop), one statement marks every agent
ready and wakes them (t0). The run ends when the webhook has answered every
prompt; the dispatchers are then stopped with SIGTERM.

Printed per run: deliveries/s (prompts answered / (last answer - t0)), the
per-session head latency (t0 → the session's first prompt answered) p50 and
p99, the last head, whether any session ever had two prompts in flight at
the webhook (it must not), and the CPU time per prompt of the dispatcher
processes (their start-up included) and of the webhook server. Runs rotate
with ``--repeat`` so machine drift
lands on all alike.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queueproject.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
os.environ["DEBUG"] = "0"
if "DATABASE_URL" not in os.environ:
    os.environ["DATABASE_URL"] = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from principals.models import App, Group  # noqa: E402
from queueproject import clock, notify  # noqa: E402
from queueproject.models import WorkerProcess  # noqa: E402
from sessionqueues.models import ANY_SESSION_CHANNEL, QueuedMessage, Session, Task  # noqa: E402

START_TIMEOUT = 120.0
RUN_TIMEOUT = 900.0


class Hook:
    """The webhook: answers ready after ``delay`` seconds; records the answer
    time of every prompt and how many prompts of a session were in flight."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.answered: list[tuple[str, float]] = []  # (session id, monotonic time)
        self.in_flight: Counter[str] = Counter()
        self.overlaps = 0
        self.done = threading.Event()
        self.expected = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the dispatchers' clients reuse connections
            disable_nagle_algorithm = True  # headers and body go out as two writes

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sid = body["session_id"]
                with hook.lock:
                    hook.in_flight[sid] += 1
                    hook.overlaps += hook.in_flight[sid] > 1
                time.sleep(hook.delay)
                answer = b'{"ready": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                self.wfile.flush()
                with hook.lock:
                    hook.in_flight[sid] -= 1
                    hook.answered.append((sid, time.monotonic()))
                    if len(hook.answered) >= hook.expected:
                        hook.done.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.request_queue_size = 256
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self, expected: int) -> None:
        with self.lock:
            self.answered, self.in_flight, self.overlaps = [], Counter(), 0
            self.expected = expected
            self.done.clear()


def prepare(app: App, sessions: int, entries: int) -> None:
    """``sessions`` sessions of ``entries`` prompts each, every agent busy."""
    Task.objects.all().delete()  # cascades to sessions and entries
    task = Task.objects.create(app=app, title="bench")
    made = Session.objects.bulk_create(
        [Session(task=task, auto_merge=False, agent_ready=False) for _ in range(sessions)]
    )
    now = clock.now()
    fields = {"task": task, "queued_by": "user:1", "queued_at": now}
    rows = [
        QueuedMessage(session=s, position=n + 1, content=f"prompt {n}", **fields)
        for s in made
        for n in range(entries)
    ]
    QueuedMessage.objects.bulk_create(rows, batch_size=2000)


def start_dispatchers(processes: int, concurrency: int, logs: Path) -> list[subprocess.Popen]:
    WorkerProcess.objects.all().delete()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = []
    for n in range(processes):
        command = [sys.executable, str(ROOT / "manage.py"), "session_dispatch",
                   "--concurrency", str(concurrency), "--worker-id", f"bench-{n}"]  # fmt: skip
        err = open(logs / f"dispatch-{n}.err", "w")  # noqa: SIM115 - lives as long as the process
        started.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err))
    deadline = time.monotonic() + START_TIMEOUT
    while WorkerProcess.objects.filter(kind="session_dispatch").count() < processes:
        if time.monotonic() > deadline or any(p.poll() is not None for p in started):
            raise SystemExit(f"dispatchers did not start; see {logs}")
        time.sleep(0.1)
    time.sleep(0.5)  # past the first (empty) pass, idle on LISTEN or polling
    return started


def stop(started: list[subprocess.Popen]) -> None:
    for p in started:
        p.send_signal(signal.SIGTERM)
    for p in started:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(hook: Hook, app: App, spec: str, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    processes, concurrency = (int(x) for x in spec.split("x"))
    total = args.sessions * args.entries
    prepare(app, args.sessions, args.entries)
    hook.reset(total)
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = start_dispatchers(processes, concurrency, logs)
    hook_cpu = time.process_time()
    try:
        t0 = time.monotonic()
        Session.objects.update(agent_ready=True)
        notify.notify(ANY_SESSION_CHANNEL)  # autocommit: sent now (PostgreSQL; SQLite polls)
        if not hook.done.wait(RUN_TIMEOUT):
            raise SystemExit(f"{spec}: only {len(hook.answered)}/{total} answered; see {logs}")
        hook_cpu = time.process_time() - hook_cpu
    finally:
        stop(started)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(getattr(cpu_after, f) - getattr(cpu_before, f) for f in ("ru_utime", "ru_stime"))
    with hook.lock:
        answered = list(hook.answered)
        overlaps = hook.overlaps
    first: dict[str, float] = {}
    per_session: dict[str, int] = defaultdict(int)
    for sid, at in answered:
        first.setdefault(sid, at - t0)
        per_session[sid] += 1
    last = max(at for _, at in answered) - t0
    heads = list(first.values())
    return {
        "run": spec,
        "deliveries_per_s": len(answered) / last,
        "head_p50": percentile(heads, 0.50),
        "head_p99": percentile(heads, 0.99),
        "head_max": max(heads),
        "seconds": last,
        "overlaps": overlaps,
        # CPU of the dispatcher processes (start-up included) and of this
        # process (the webhook server) per prompt.
        "dispatch_cpu_ms": 1000 * cpu / len(answered),
        "hook_cpu_ms": 1000 * hook_cpu / len(answered),
        "complete": len(first) == args.sessions and set(per_session.values()) == {args.entries},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--entries", type=int, default=2)
    parser.add_argument("--webhook-ms", type=float, default=50.0)
    parser.add_argument("--runs", default="1x16,2x16", help="PxC[,PxC…]: processes x concurrency")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    hook = Hook(args.webhook_ms / 1000)
    group, _ = Group.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    app, _ = App.objects.update_or_create(
        slug="bench",
        defaults={"name": "Bench", "group": group, "webhook_url": hook.url,
                  "webhook_secret": "bench"},
    )  # fmt: skip
    specs = args.runs.split(",")
    logs = Path(tempfile.mkdtemp(prefix="session-dispatch-bench-"))
    print(f"{connection.vendor}: {args.sessions} sessions x {args.entries} prompts, "
          f"webhook {args.webhook_ms:g} ms; logs in {logs}")  # fmt: skip
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for turn in range(args.repeat):
        order = specs[turn % len(specs) :] + specs[: turn % len(specs)]
        for spec in order:
            result = run(hook, app, spec, args, logs)
            results[spec].append(result)
            print(f"  {spec:>6}: {result['deliveries_per_s']:7.1f} deliveries/s   head latency "
                  f"p50 {result['head_p50']:6.2f} s  p99 {result['head_p99']:6.2f} s  "
                  f"max {result['head_max']:6.2f} s   all done {result['seconds']:6.2f} s   "
                  f"overlaps {result['overlaps']}   complete {result['complete']}   "
                  f"CPU/prompt: dispatchers {result['dispatch_cpu_ms']:.1f} ms, "
                  f"webhook {result['hook_cpu_ms']:.1f} ms")  # fmt: skip
    if args.repeat > 1:
        print("medians:")
        for spec in specs:
            rates = [r["deliveries_per_s"] for r in results[spec]]
            p99s = [r["head_p99"] for r in results[spec]]
            print(f"  {spec:>6}: {statistics.median(rates):7.1f} deliveries/s   "
                  f"head p99 {statistics.median(p99s):6.2f} s")  # fmt: skip
    Task.objects.all().delete()


if __name__ == "__main__":
    main()
