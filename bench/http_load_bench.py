"""The REST API under concurrent clients (a script, not a test; issue 21).

    .venv/bin/python bench/http_load_bench.py [--seconds 10] [--clients 1,8,64]
        [--scenarios enqueue1,enqueue100,claim10_ack10,stats] [--soak 60]
        [--workers 1] [--server auto|uvicorn|runserver] [--throttle-rate 1000000/min]

One database per run (a fresh PostgreSQL database ``<DATABASE_URL's name>_loadbench``
when ``DATABASE_URL`` names a server, else a temporary SQLite file) and one
server process with the production settings (DEBUG off, a random SECRET_KEY):
on PostgreSQL the production server as ``scripts/serve.sh`` starts it
(``uvicorn queueproject.asgi:application --workers N --proxy-headers
--no-server-header``), on SQLite the default server as ``scripts/run.sh``
starts it (``manage.py runserver``), DEBUG off for both. ``--server`` picks
another.

Clients are asyncio tasks of one load-generator process, each with its own
``httpx.AsyncClient`` (one keep-alive connection), its own app token and no
pause between requests (closed loop). Scenarios, each on a queue of its own:

- ``enqueue1``: ``POST …/messages/`` with one small JSON payload;
- ``enqueue100``: ``POST …/messages/`` with a batch of 100;
- ``claim10_ack10``: ``POST …/claim/`` for 10 (no wait), then ``POST …/ack/``
  of what it got, on a queue filled beforehand (a message counts when acked);
- ``stats``: ``GET …/stats/`` of a queue holding 1,000 messages;
- ``--soak S``: all four mixed (each client cycles through them) at the
  largest client count for S seconds: the 5xx count is what matters.

Printed per scenario and client count: requests/s, messages/s, p50 and p99
latency of a request, the status counts other than 2xx and transport errors,
and the most database connections the server held at once (PostgreSQL:
``pg_stat_activity`` rows with the server's ``application_name``). First, the
services' own one-by-one enqueue rate (``message_enqueue`` in a loop, one
thread, a ``manage.py shell`` process on the same database): the reference of
the "REST single enqueue ≥ 50 %" target.

Throttling stays on (its cost is part of every request) at a rate no client
reaches (``--throttle-rate``): the bench measures the server, not the limit.
``--profile FILE`` records the server with py-spy (``pip install py-spy``) during
the first scenario at the largest client count (FILE.svg: a flame graph;
FILE.txt: collapsed stacks), sampling only threads that hold the GIL: where
the server's Python spends CPU, not where its threads wait.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.blackbox.server import (  # noqa: E402
    AsgiServer,
    Server,
    postgres_create,
    postgres_drop,
    postgres_url,
    production_env,
    with_database,
)

APPLICATION_NAME = "dq-http-load-bench"
GROUP = "bench"
HEADER = (
    "| scenario | clients | requests/s | messages/s | p50 ms | p99 ms | errors | max DB conns "
    "| server CPU ms/request |\n|---|---|---|---|---|---|---|---|---|"
)
SCENARIOS = ("enqueue1", "enqueue100", "claim10_ack10", "stats")
PAYLOAD = {"order": 1042, "customer": "c-77", "lines": [{"sku": "A-1", "qty": 2}]}

SETUP = """
import json, sys
from principals import services as p
from groupqueues import services as g
group = p.group_create(slug="bench")
app = p.app_create(slug="web", group=group)
for name in sys.argv[1].split(","):
    g.collection_create(group=group, name=name)
secrets = [p.token_create(name=f"c{i}", app=app, scopes=["queue:read", "queue:write",
           "queue:consume"])[1] for i in range(int(sys.argv[2]))]
print(json.dumps(secrets))
"""

SERVICES_RATE = """
import sys, time
from groupqueues import services
from groupqueues.models import Collection
collection = Collection.objects.get(group__slug="bench", name="services")
payload = {"order": 1042, "customer": "c-77", "lines": [{"sku": "A-1", "qty": 2}]}
for _ in range(50):  # warm up: connection, prepared statements
    services.message_enqueue(collection=collection, payload=payload, enqueued_by="app:web")
seconds, n = float(sys.argv[1]), 0
start, cpu = time.perf_counter(), time.process_time()
while time.perf_counter() - start < seconds:
    services.message_enqueue(collection=collection, payload=payload, enqueued_by="app:web")
    n += 1
print(n / (time.perf_counter() - start), (time.process_time() - cpu) * 1000 / n)
"""


class ProductionAsgiServer(AsgiServer):
    """uvicorn as ``scripts/serve.sh`` starts it (``--workers`` processes)."""

    workers: int = 1

    def command(self) -> list[str]:
        return [sys.executable, "-m", "uvicorn", "queueproject.asgi:application",
                "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers),
                "--proxy-headers", "--no-server-header", "--no-access-log"]  # fmt: skip


# ------------------------------------------------------------------ measuring


@dataclass
class Cell:
    """What one scenario at one client count measured."""

    scenario: str
    clients: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    messages: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: int = 0
    max_connections: int | None = None
    empty_claims: int = 0
    cpu_seconds: float = 0.0  # the server's processes, user + system

    def row(self) -> str:
        ok = sorted(self.latencies)
        p50 = statistics.median(ok) * 1000 if ok else float("nan")
        p99 = ok[min(len(ok) - 1, int(len(ok) * 0.99))] * 1000 if ok else float("nan")
        requests = sum(self.statuses.values())
        bad = {s: n for s, n in sorted(self.statuses.items()) if not 200 <= s < 300}
        errors = ", ".join(f"{n} x {s}" for s, n in bad.items()) or "0"
        if self.transport_errors:
            errors += f", {self.transport_errors} x transport"
        conns = "" if self.max_connections is None else str(self.max_connections)
        note = f" (claims empty: {self.empty_claims})" if self.empty_claims else ""
        cpu = self.cpu_seconds * 1000 / requests if requests else float("nan")
        return (f"| {self.scenario} | {self.clients} | {requests / self.seconds:,.0f} | "
                f"{self.messages / self.seconds:,.0f} | {p50:.1f} | {p99:.1f} | {errors}{note} "
                f"| {conns} | {cpu:.2f} |")  # fmt: skip


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants (uvicorn's
    worker processes): on a shared machine the CPU a request costs moves much
    less with the load than requests/s do."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, todo = set(), [pid]
    while todo:
        p = todo.pop()
        tree.add(p)
        todo.extend(c for c, parent in parents.items() if parent == p and c not in tree)
    return sum(times.get(p, 0.0) for p in tree)


class ConnectionSampler:
    """The most PostgreSQL connections with ``application_name`` seen at once
    (sampled every 0.1 s on a connection of its own). Above ``cap`` it kills
    the server: the PostgreSQL server is shared, and a build that leaks
    connections (the one before issue 21) must not take all of them."""

    cap = 40
    server: Server | None = None

    def __init__(self, url: str | None) -> None:
        self.url, self.most, self._stop = url, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConnectionSampler:
        if self.url:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.url:
            self._thread.join()

    def _run(self) -> None:
        import psycopg

        assert self.url is not None
        with psycopg.connect(self.url.split("?")[0], autocommit=True) as conn:
            while not self._stop.wait(0.1):
                (n,) = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    [APPLICATION_NAME],
                ).fetchone()  # type: ignore[misc]
                self.most = max(self.most, n)
                if n > self.cap and self.server is not None and self.server.process is not None:
                    print(f"!! {n} connections (cap {self.cap}): the server is killed", flush=True)
                    self.server.process.kill()
                    return


Step = Callable[[httpx.AsyncClient, Cell], Awaitable[None]]


async def timed(cell: Cell, call: Awaitable[httpx.Response]) -> httpx.Response | None:
    start = time.perf_counter()
    try:
        response = await call
    except httpx.TransportError:
        cell.transport_errors += 1
        return None
    cell.latencies.append(time.perf_counter() - start)
    cell.statuses[response.status_code] += 1
    return response


def q(name: str, rest: str) -> str:
    return f"/api/groups/{GROUP}/queues/{name}/{rest}"


def enqueue1(queue: str) -> Step:
    async def step(http: httpx.AsyncClient, cell: Cell) -> None:
        r = await timed(cell, http.post(q(queue, "messages/"), json={"payload": PAYLOAD}))
        cell.messages += r is not None and r.status_code == 201

    return step


def enqueue100(queue: str) -> Step:
    body = {"messages": [{"payload": PAYLOAD} for _ in range(100)]}

    async def step(http: httpx.AsyncClient, cell: Cell) -> None:
        r = await timed(cell, http.post(q(queue, "messages/"), json=body))
        cell.messages += 100 if r is not None and r.status_code == 201 else 0

    return step


def claim10_ack10(queue: str) -> Step:
    claim = {"worker_id": "bench", "max_messages": 10}

    async def step(http: httpx.AsyncClient, cell: Cell) -> None:
        r = await timed(cell, http.post(q(queue, "claim/"), json=claim))
        if r is None or r.status_code != 200:
            return
        held = [{"id": m["id"], "claim_token": m["claim_token"]} for m in r.json()["messages"]]
        if not held:
            cell.empty_claims += 1
            return
        r = await timed(cell, http.post(q(queue, "ack/"), json={"acks": held}))
        if r is not None and r.status_code == 200:
            cell.messages += r.json()["acked"]

    return step


def stats(queue: str) -> Step:
    async def step(http: httpx.AsyncClient, cell: Cell) -> None:
        await timed(cell, http.get(q(queue, "stats/")))

    return step


def mixed(steps: list[Step]) -> Step:
    turn = {"i": 0}

    async def step(http: httpx.AsyncClient, cell: Cell) -> None:
        turn["i"] += 1
        await steps[turn["i"] % len(steps)](http, cell)

    return step


async def run_cell(url: str, tokens: list[str], cell: Cell, step: Step, seconds: float) -> None:
    clients = [
        httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {t}"}, timeout=60)
        for t in tokens[: cell.clients]
    ]
    for http in clients:  # open the connections before the clock starts
        await http.get("/healthz")
    deadline = time.perf_counter() + seconds

    async def loop(http: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline:
            await step(http, cell)

    start = time.perf_counter()
    await asyncio.gather(*(loop(http) for http in clients))
    cell.seconds = time.perf_counter() - start
    for http in clients:
        await http.aclose()


async def fill(url: str, token: str, queue: str, messages: int) -> None:
    """Put ``messages`` messages into ``queue`` (batches of 500, 4 at a time)."""
    body = {"messages": [{"payload": PAYLOAD} for _ in range(500)]}
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120
    ) as http:
        sem = asyncio.Semaphore(4)

        async def one() -> None:
            async with sem:
                r = await http.post(q(queue, "messages/"), json=body)
                assert r.status_code == 201, r.text

        await asyncio.gather(*(one() for _ in range(max(1, messages // 500))))


# -------------------------------------------------------------------- the run


def services_rate(server: Server, seconds: float) -> tuple[float, float]:
    """Messages/s of ``message_enqueue`` one by one, and its CPU ms per message."""
    out = server.manage("shell", "-c", SERVICES_RATE.replace("sys.argv[1]", repr(str(seconds))))
    rate, cpu = out.strip().splitlines()[-1].split()
    return float(rate), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", default="1,8,64")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--soak", type=float, default=0.0, help="mixed load for S seconds")
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--server", choices=("auto", "uvicorn", "runserver"), default="auto")
    parser.add_argument("--throttle-rate", default="1000000/min")
    parser.add_argument("--profile", default="", help="py-spy output file (svg)")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    parser.add_argument("--conn-cap", type=int, default=40, help="kill the server above")
    args = parser.parse_args()
    ConnectionSampler.cap = args.conn_cap
    levels = [int(c) for c in args.clients.split(",")]
    scenarios = [s for s in args.scenarios.split(",") if s]
    pg = postgres_url()
    tmp = Path(tempfile.mkdtemp(prefix="http-load-bench-"))
    name = f"{urlsplit(pg).path.lstrip('/') or 'postgres'}_loadbench" if pg else ""
    url = (
        postgres_create(pg, name) + f"?application_name={APPLICATION_NAME}"
        if pg
        else f"sqlite:///{tmp / 'db.sqlite3'}"
    )
    kind = args.server if args.server != "auto" else ("uvicorn" if pg else "runserver")
    env = production_env(url)
    env["API_THROTTLE_RATE"] = args.throttle_rate
    env.update(kv.split("=", 1) for kv in args.env)
    server: Server
    if kind == "uvicorn":
        server = ProductionAsgiServer(env=env, log_path=tmp / "server.log")
        server.workers = args.workers
    else:
        server = Server(env=env, log_path=tmp / "server.log")
    queues = [*SCENARIOS, "services", "mixed_enqueue", "mixed_claim"]
    try:
        server.manage("migrate", "--noinput", "-v", "0")
        setup = SETUP.replace("sys.argv[1]", repr(",".join(queues)))
        made = server.manage("shell", "-c", setup.replace("sys.argv[2]", repr(str(max(levels)))))
        tokens = json.loads(made.strip().splitlines()[-1])
        rate, services_cpu = services_rate(server, min(args.seconds, 10.0))
        server.start()
        ConnectionSampler.server = server
        sample_url = with_database(pg, name) if pg else None
        print(f"# {'PostgreSQL' if pg else 'SQLite'} behind {kind}"
              f"{f' --workers {args.workers}' if kind == 'uvicorn' else ''}; "
              f"load average before: {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"services, one by one (message_enqueue, 1 thread): {rate:,.0f} messages/s, "
              f"{services_cpu:.2f} CPU ms per message\n")  # fmt: skip
        print(HEADER)
        asyncio.run(run_all(server, tokens, scenarios, levels, args, sample_url, rate))
        print(f"\nload average after: {os.getloadavg()[0]:.1f}")
    finally:
        if server.process is not None:
            server.stop()
        if pg:
            postgres_drop(pg, name)


async def run_all(
    server: Server,
    tokens: list[str],
    scenarios: list[str],
    levels: list[int],
    args: argparse.Namespace,
    sample_url: str | None,
    rate: float,
) -> None:
    await fill(server.url, tokens[0], "stats", 1000)
    steps = {"enqueue1": enqueue1, "enqueue100": enqueue100,
             "claim10_ack10": claim10_ack10, "stats": stats}  # fmt: skip
    for scenario in scenarios:
        for clients in levels:
            if scenario == "claim10_ack10":
                await fill(server.url, tokens[0], scenario, int(4000 * args.seconds))
            cell = Cell(scenario, clients)
            profiler = None
            if args.profile and scenario == scenarios[0] and clients == max(levels):
                assert server.process is not None
                profiler = subprocess.Popen(
                    [str(Path(sys.executable).parent / "py-spy"), "record", "-o", args.profile,
                     "--pid", str(server.process.pid), "--subprocesses", "--gil",
                     "--duration", str(int(args.seconds)),
                     "--format", "raw" if args.profile.endswith(".txt") else "flamegraph"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
            assert server.process is not None
            cpu_before = cpu_seconds(server.process.pid)
            with ConnectionSampler(sample_url) as sampler:
                await run_cell(server.url, tokens, cell, steps[scenario](scenario), args.seconds)
            cell.cpu_seconds = cpu_seconds(server.process.pid) - cpu_before
            if profiler is not None:
                profiler.wait()
            cell.max_connections = sampler.most if sample_url else None
            print(cell.row(), flush=True)
            if scenario == "enqueue1" and clients == 8:
                share = cell.messages / cell.seconds / rate
                print(f"|  | REST single enqueue at 8 clients / services one by one: {share:.0%} "
                      "| | | | | | | |", flush=True)  # fmt: skip
            if scenario == "claim10_ack10":
                await drain(server.url, tokens[0], scenario)
    if args.soak:
        await fill(server.url, tokens[0], "mixed_claim", int(500 * args.soak))
        cell = Cell("mixed (soak)", max(levels))
        step = mixed([enqueue1("mixed_enqueue"), claim10_ack10("mixed_claim"),
                      stats("stats"), enqueue100("mixed_enqueue")])  # fmt: skip
        assert server.process is not None
        cpu_before = cpu_seconds(server.process.pid)
        with ConnectionSampler(sample_url) as sampler:
            await run_cell(server.url, tokens, cell, step, args.soak)
        cell.cpu_seconds = cpu_seconds(server.process.pid) - cpu_before
        cell.max_connections = sampler.most if sample_url else None
        print(cell.row(), flush=True)


async def drain(url: str, token: str, queue: str) -> None:
    """Claim and ack what a claim scenario left, so the next level starts alike."""
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120
    ) as http:
        while True:
            r = await http.post(q(queue, "claim/"), json={"worker_id": "d", "max_messages": 100})
            held = [{"id": m["id"], "claim_token": m["claim_token"]} for m in r.json()["messages"]]
            if not held:
                return
            await http.post(q(queue, "ack/"), json={"acks": held})


if __name__ == "__main__":
    main()
