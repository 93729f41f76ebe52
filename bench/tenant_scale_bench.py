"""Many tenants on one queue (issue 19 point 5; a script, not a test).

    .venv/bin/python bench/tenant_scale_bench.py [--apps 1000] [--messages 100000]
        [--workers 2] [--concurrency 2] [--batch 100] [--runs 2]
        [--ceiling-messages 60000] [--skip-scale] [--skip-ceiling]

PostgreSQL only: ``BENCH_DATABASE_URL`` (default
postgresql://postgres@127.0.0.1:5432/worker_scale; created if missing, migrated
and emptied here). The pgbench ceiling runs ``pgbench_ceiling.py`` of a copy of
``/work/shared/peers`` (``--peers``, default /tmp/worker-peers, copied there
when missing) in the database ``worker_pgbench``.

(a) scale: a group with ``--apps`` apps and one queue; ``--messages`` noop
    messages drained by ``--workers`` ``queue_worker --until-empty``
    processes (``--concurrency`` slots each, the trigger's batch
    ``--batch``), once under one shared trigger (a consumer per app) and once
    under a plain trigger (one consumer), interleaved ``--runs`` times (the
    order alternates from run to run).
    Reported per scenario: the drain rate (messages / the slowest worker's
    own ``seconds``), the shared/plain ratio, the most connections each
    worker had open (``pg_stat_activity`` by its application name, sampled
    every 50 ms), the most threads (``/proc/<pid>/task``), and the p50/p99 of
    ``GET /api/groups/scale/queues/jobs/stats/`` sent back to back by one
    client to a uvicorn process meanwhile (and with nothing running, and with
    the messages waiting but no worker).
(b) ceiling: for 1, 2 and 4 clients, pgbench's ``claim100_ack_delete``
    (claim 100 rows in one statement, delete them in another: 2 commits per
    100 messages) over ``--ceiling-messages``, and then as many ``queue_worker
    --handler noop --batch 100 --concurrency 1`` processes draining as many
    messages: the workers' rate as a share of pgbench's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:  # Django code is imported only after django.setup()
    from groupqueues.models import Collection

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/worker_scale")
PEERS = Path("/work/shared/peers")
PY = sys.executable
GROUP = "scale"
SAMPLE_EVERY = 0.05  # seconds


def log(*parts: Any) -> None:
    print(time.strftime("%H:%M:%S", time.gmtime()), *parts, flush=True)


# --- set-up -------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def ensure_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
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
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per stats request


def tenants(apps: int) -> None:
    """The group and its apps (kept between runs)."""
    from principals.models import App, Group

    group, _ = Group.objects.get_or_create(slug=GROUP, defaults={"name": GROUP})
    have = App.objects.filter(group=group).count()
    if have != apps:
        App.objects.filter(group=group).delete()
        App.objects.bulk_create(
            [App(slug=f"tenant-{i:04d}", name=f"Tenant {i}", group=group) for i in range(apps)]
        )


def fresh_queue(*, shared: bool, batch: int, concurrency: int, name: str = "jobs") -> Collection:
    """An empty queue ``name`` with one trigger (shared: a consumer per app)."""
    from groupqueues import services, trigger_services
    from groupqueues.models import Collection, Message, Trigger
    from principals.models import Group

    group = Group.objects.get(slug=GROUP)
    Trigger.objects.filter(group=group).delete()
    Message.objects.filter(collection__group=group).delete()
    Collection.objects.filter(group=group).delete()
    queue = services.collection_create(group=group, name=name)
    trigger_services.trigger_create(
        group=group, collection_name=name, handler="noop", shared=shared, batch_size=batch,
        concurrency=concurrency,
    )  # fmt: skip
    return queue


def enqueue_n(queue: Collection, n: int) -> None:
    from groupqueues import services

    for start in range(0, n, services.MAX_BATCH):
        news = [services.NewMessage(payload={"n": i})
                for i in range(start, min(n, start + services.MAX_BATCH))]  # fmt: skip
        services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="bench")
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE groupqueues_message")


def viewer_token() -> str:
    """A token that may read the group's queues."""
    from principals import services as p
    from principals.models import Group

    name = f"bench-viewer-{secrets.token_hex(3)}"
    user = p.user_create(username=name, password=secrets.token_urlsafe(16))
    p.membership_grant(user=user, group=Group.objects.get(slug=GROUP), role=p.role_parse("viewer"))
    _, secret = p.token_create(user=user, name=name, scopes=["queue:read"])
    return str(secret)


# --- the web process and its stats latency -------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Web:
    url: str
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, db_url: str) -> Web:
        import httpx

        port = free_port()
        env = env_for(db_url, DJANGO_SETTINGS_MODULE="queueproject.settings", DEBUG="0",
                      SECRET_KEY=secrets.token_urlsafe(50))  # fmt: skip
        process = subprocess.Popen(
            [PY, "-m", "uvicorn", "queueproject.asgi:application", "--host", "127.0.0.1",
             "--port", str(port), "--no-access-log"], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        web = cls(f"http://127.0.0.1:{port}", process)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{web.url}/healthz", timeout=2).status_code == 200:
                    return web
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the web process did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@dataclass
class StatsProbe:
    """GET …/stats/ back to back on one thread until stopped: latencies in ms."""

    url: str
    token: str
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        import httpx

        path = f"{self.url}/api/groups/{GROUP}/queues/jobs/stats/"
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(headers=headers, timeout=30) as client:
            while not self.stopping.is_set():
                started = time.perf_counter()
                response = client.get(path)
                if response.status_code != 200:
                    self.errors += 1
                self.latencies.append((time.perf_counter() - started) * 1000)

    def summary(self) -> str:
        xs = sorted(self.latencies)
        if not xs:
            return "no requests"
        p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
        return (f"{len(xs)} requests, p50 {statistics.median(xs):.1f} ms, p99 {p99:.1f} ms"
                + (f", {self.errors} errors" if self.errors else ""))  # fmt: skip


def probe_for(seconds: float, web: Web, token: str) -> StatsProbe:
    probe = StatsProbe(web.url, token)
    thread = threading.Thread(target=probe.run)
    thread.start()
    time.sleep(seconds)
    probe.stopping.set()
    thread.join()
    return probe


# --- workers and what they hold ------------------------------------------------------


@dataclass
class Drain:
    messages: int
    seconds: float  # the slowest worker's own figure
    connections: list[int]  # the most each worker had open
    threads: list[int]  # the most each worker ran
    cpu: float  # user + system seconds of all workers

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def sample(pids: dict[int, str], stop: threading.Event, out: dict[str, list[int]]) -> None:
    """Every SAMPLE_EVERY: each worker's connections and threads, the most seen."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        while not stop.is_set():
            query = (
                "SELECT application_name, count(*) FROM pg_stat_activity "
                "WHERE application_name LIKE 'queue_worker %%' GROUP BY 1"
            )
            rows: dict[str, int] = dict(conn.execute(query).fetchall())  # fmt: skip
            for pid, name in pids.items():
                conns, threads = out.setdefault(name, [0, 0])
                with contextlib.suppress(OSError):  # it exited
                    threads = max(threads, len(os.listdir(f"/proc/{pid}/task")))
                out[name] = [max(conns, int(rows.get(f"queue_worker {name}", 0))), threads]
            stop.wait(SAMPLE_EVERY)


def drain(n: int, processes: int, args: list[str]) -> Drain:
    """Run ``processes`` workers (``queue_worker --until-empty`` + ``args``) to the end."""
    env = env_for(PG_URL, LOG_LEVEL=os.environ.get("BENCH_LOG_LEVEL", "INFO"))
    names = [f"bench-{i}-{secrets.token_hex(2)}" for i in range(processes)]
    procs = [
        subprocess.Popen([PY, "manage.py", "queue_worker", "--until-empty", "--worker-id", name,
                          *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
        for name in names
    ]  # fmt: skip
    held: dict[str, list[int]] = {}
    stop = threading.Event()
    sampler = threading.Thread(
        target=sample, args=({p.pid: nm for p, nm in zip(procs, names, strict=True)}, stop, held)
    )
    sampler.start()
    seconds, cpu = [], 0.0
    for proc in procs:
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        found = re.search(r"seconds=([\d.]+)", out)
        if status != 0 or found is None:
            raise RuntimeError(f"worker failed ({status}): {out}")
        seconds.append(float(found.group(1)))
    stop.set()
    sampler.join()
    from groupqueues.models import Message

    left = Message.objects.filter(collection__group__slug=GROUP).count()
    if left:
        raise RuntimeError(f"{left} messages left behind")
    return Drain(n, max(seconds), [held.get(nm, [0, 0])[0] for nm in names],
                 [held.get(nm, [0, 0])[1] for nm in names], cpu)  # fmt: skip


# --- (a) many tenants ------------------------------------------------------------------


def bench_scale(a: argparse.Namespace) -> dict[str, Any]:
    tenants(a.apps)
    web = Web.start(PG_URL)
    token = viewer_token()
    result: dict[str, Any] = {"runs": []}
    try:
        fresh_queue(shared=False, batch=a.batch, concurrency=a.concurrency)
        idle = probe_for(5, web, token)
        log(f"stats with nothing running: {idle.summary()}")
        result["stats_idle"] = idle.summary()
        args = ["--concurrency", str(a.concurrency)]
        for run in range(a.runs):
            order = ("plain", "shared") if run % 2 == 0 else ("shared", "plain")
            for scenario in order:
                queue = fresh_queue(shared=scenario == "shared", batch=a.batch,
                                    concurrency=a.concurrency)  # fmt: skip
                enqueue_n(queue, a.messages)
                if run == 0 and scenario == "plain":
                    waiting = probe_for(5, web, token)
                    log(f"stats with {a.messages:,} waiting, no worker: {waiting.summary()}")
                    result["stats_waiting"] = waiting.summary()
                probe = StatsProbe(web.url, token)
                prober = threading.Thread(target=probe.run)
                prober.start()
                try:
                    d = drain(a.messages, a.workers, args)
                finally:
                    probe.stopping.set()
                    prober.join()
                line = (f"run {run + 1} {scenario:6}: {d.rate:,.0f} msg/s "
                        f"({d.messages:,} in {d.seconds:.2f}s, CPU {d.cpu:.1f}s); connections "
                        f"per worker {d.connections}, threads {d.threads} (bound "
                        f"{a.concurrency + 3}); stats meanwhile: {probe.summary()}")  # fmt: skip
                log(line)
                result["runs"].append({"run": run + 1, "scenario": scenario, "rate": d.rate,
                                       "seconds": d.seconds, "cpu": d.cpu,
                                       "connections": d.connections, "threads": d.threads,
                                       "stats": probe.summary()})  # fmt: skip
        for run in range(a.runs):
            rates = {r["scenario"]: r["rate"] for r in result["runs"] if r["run"] == run + 1}
            log(f"run {run + 1}: shared / plain = {rates['shared'] / rates['plain']:.2f}")
    finally:
        web.stop()
    return result


# --- (b) against the pgbench ceiling ---------------------------------------------------


def pgbench_ceiling(peers: Path, clients: int, total: int) -> float:
    """pgbench's claim100_ack_delete messages/s at ``clients`` clients, over
    ``total`` messages from a freshly filled, vacuumed and checkpointed table
    (``pgbench_ceiling.py``'s own ``fill`` and ``pgbench``; its database
    ``worker_pgbench``)."""
    os.environ["BENCH_DB"] = "worker_pgbench"
    sys.path.insert(0, str(peers / "peers"))
    import pgbench_ceiling as ceiling  # type: ignore[import-not-found]  # the shared harness

    subprocess.run(["psql", *ceiling.CONN, "-X", "-q", "-d", "postgres", "-c",
                    "CREATE DATABASE worker_pgbench"], stderr=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    ceiling.fill(total + 50_000)
    run = ceiling.pgbench("claim100_ack_delete.sql", clients, t=max(1, total // 100 // clients),
                          timeout=3600)  # fmt: skip
    return float(run["tps"]) * 100


def bench_ceiling(a: argparse.Namespace) -> dict[str, Any]:
    peers = Path(a.peers)
    if not (peers / "peers" / "pgbench_ceiling.py").exists():
        shutil.copytree(PEERS, peers, dirs_exist_ok=True)
    tenants(a.apps)
    out: dict[str, Any] = {}
    for clients in (1, 2, 4):
        ceiling = pgbench_ceiling(peers, clients, a.ceiling_messages)
        queue = fresh_queue(shared=False, batch=100, concurrency=1, name="plain")
        enqueue_n(queue, a.ceiling_messages)
        d = drain(a.ceiling_messages, clients, ["--queue", f"{GROUP}/plain", "--handler", "noop",
                                                "--batch", "100", "--concurrency", "1",
                                                "--no-maintenance"])  # fmt: skip
        log(f"{clients} worker process(es) x 1 slot: {d.rate:,.0f} msg/s; pgbench "
            f"claim100_ack_delete at {clients} client(s): {ceiling:,.0f} msg/s; "
            f"ratio {d.rate / ceiling:.2f} (worker CPU {d.cpu:.1f}s)")  # fmt: skip
        out[str(clients)] = {"workers": d.rate, "pgbench": ceiling, "ratio": d.rate / ceiling}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--ceiling-messages", type=int, default=60_000)
    parser.add_argument("--peers", default="/tmp/worker-peers")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-ceiling", action="store_true")
    a = parser.parse_args()
    ensure_database(PG_URL)
    setup_django(PG_URL)
    log(f"load average {os.getloadavg()[0]:.1f} at start")
    if not a.skip_scale:
        bench_scale(a)
    if not a.skip_ceiling:
        bench_ceiling(a)
    log(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
