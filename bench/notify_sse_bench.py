"""Notify channels over SSE under the production command: N concurrent
listeners on one channel, M notifications, delivery latency and server memory.

A script, not a test. It migrates a fresh database (a temp SQLite file, or
``<DATABASE_URL's name>_ssebench`` on PostgreSQL, dropped at the end), makes a
group, an admin and a token through the management commands, starts
``uvicorn queueproject.asgi:application`` (one process) and then, from one
asyncio client process over raw sockets:

1. opens ``--listeners`` SSE connections to the channel's ``events/`` and
   waits until every one has its first frame (``retry:``: the listener is
   attached: LISTEN active, head read);
2. publishes ``--notifications`` over ``POST …/messages/``, ``--interval``
   seconds apart, each payload carrying its send time;
3. waits until every listener has every notification (or ``--timeout``).

Reported: delivery latency (publish request sent → event parsed by a
listener, over all listener-notification pairs) p50/p90/p99/max, events
missing, the server's RSS and thread count idle, with all listeners attached,
and at the end.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/h_notify \\
        .venv/bin/python bench/notify_sse_bench.py --listeners 1000 --notifications 100
    .venv/bin/python bench/notify_sse_bench.py --listeners 200   # SQLite (polls)

Absolute numbers depend on the machine's load: compare runs made together.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

ROOT = Path(__file__).resolve().parents[1]
GROUP, CHANNEL = "bench", "fanout"


# ------------------------------------------------------------------ set-up


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="queueproject.settings", DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=database_url, PYTHONUNBUFFERED="1",
        API_THROTTLE_RATE="1000000/min",
    )  # fmt: skip
    return env


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def pg_admin(url: str, statement: str) -> None:
    import psycopg

    parts = urlsplit(url)
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(statement)


def prepare(env: dict[str, str]) -> str:
    """Migrate, make the group, admin user and token; the token's secret."""
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "create_group", GROUP)
    code = (
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.create_user('bench', password='x', is_staff=True)"
    )
    manage(env, "shell", "-c", code)
    manage(env, "grant_role", "bench", GROUP, "admin")
    out = manage(
        env, "create_token", "--user", "bench", "--scopes", "queue:read,queue:write,queue:admin"
    )
    return out.strip().splitlines()[-1]


def proc_status(pid: int) -> tuple[float, int]:
    """(RSS in MiB, threads) of ``pid``."""
    rss, threads = 0.0, 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


# ------------------------------------------------------------------ listeners


@dataclass
class Listener:
    received: dict[int, float] = field(default_factory=dict)  # notification n -> latency
    attached: asyncio.Event = field(default_factory=asyncio.Event)
    error: str | None = None


async def listen(port: int, token: str, path: str, listener: Listener, total: int,
                 done: asyncio.Event) -> None:  # fmt: skip
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        listener.error = str(exc)
        listener.attached.set()
        return
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/event-stream\r\nConnection: close\r\n\r\n".encode()
    )
    await writer.drain()
    try:
        status = await reader.readline()
        if b" 200 " not in status:
            listener.error = status.decode(errors="replace").strip()
            return
        while await reader.readline() not in (b"\r\n", b""):
            pass  # headers
        while len(listener.received) < total and not done.is_set():
            line = await reader.readline()
            if not line:
                break
            if line.startswith(b"retry:"):
                listener.attached.set()
            elif line.startswith(b"data: "):
                now = time.time()
                body = json.loads(line[6:])
                listener.received[body["payload"]["n"]] = now - body["payload"]["t"]
    except (OSError, ValueError) as exc:
        listener.error = str(exc)
    finally:
        listener.attached.set()
        writer.close()


# ------------------------------------------------------------------ the run


async def run(args: argparse.Namespace, port: int, token: str, pid: int) -> dict[str, object]:
    path = f"/api/groups/{GROUP}/channels/{CHANNEL}/"
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers,
                                 timeout=60) as http:  # fmt: skip
        created = await http.post(f"/api/groups/{GROUP}/channels/", json={"name": CHANNEL})
        assert created.status_code == 201, created.text
        idle = proc_status(pid)
        done = asyncio.Event()
        listeners = [Listener() for _ in range(args.listeners)]
        started = time.monotonic()
        tasks = []
        for i, listener in enumerate(listeners):
            job = listen(port, token, path + "events/", listener, args.notifications, done)
            tasks.append(asyncio.create_task(job))
            if i % 50 == 49:
                await asyncio.sleep(0.05)  # do not flood the accept backlog
        await asyncio.wait_for(asyncio.gather(*(lst.attached.wait() for lst in listeners)),
                               args.timeout)  # fmt: skip
        attach_seconds = time.monotonic() - started
        errors = [lst.error for lst in listeners if lst.error]
        attached = proc_status(pid)
        for n in range(args.notifications):
            response = await http.post(path + "messages/",
                                       json={"payload": {"n": n, "t": time.time()}})  # fmt: skip
            assert response.status_code == 201, response.text
            await asyncio.sleep(args.interval)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            if all(len(lst.received) >= args.notifications or lst.error for lst in listeners):
                break
            await asyncio.sleep(0.1)
        end = proc_status(pid)
        done.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    latencies = sorted(lat for lst in listeners for lat in lst.received.values())
    expected = args.listeners * args.notifications
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "listeners": args.listeners, "notifications": args.notifications,
        "database": "postgresql" if args.pg else "sqlite",
        "attach_seconds": round(attach_seconds, 2),
        "listener_errors": len(errors), "first_error": errors[0] if errors else None,
        "delivered": len(latencies), "missing": expected - len(latencies),
        "latency_ms": {
            "p50": round(quantiles[49] * 1000, 1), "p90": round(quantiles[89] * 1000, 1),
            "p99": round(quantiles[98] * 1000, 1),
            "max": round(latencies[-1] * 1000, 1) if latencies else None,
        },
        "server_rss_mib": {"idle": round(idle[0], 1), "attached": round(attached[0], 1),
                           "end": round(end[0], 1)},
        "server_threads": {"idle": idle[1], "attached": attached[1], "end": end[1]},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listeners", type=int, default=1000)
    parser.add_argument("--notifications", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between publishes")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    base = os.environ.get("DATABASE_URL", "")
    args.pg = base.startswith(("postgres://", "postgresql://"))
    tmp = tempfile.TemporaryDirectory()
    name = ""
    if args.pg:
        name = (urlsplit(base).path.lstrip("/") or "postgres") + "_ssebench"
        pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        pg_admin(base, f'CREATE DATABASE "{name}"')
        url = urlunsplit(urlsplit(base)._replace(path=f"/{name}"))
    else:
        url = f"sqlite:///{tmp.name}/bench.sqlite3"
    env = server_env(url)
    port = free_port()
    server: subprocess.Popen[bytes] | None = None
    try:
        token = prepare(env)
        log = open(Path(tmp.name) / "uvicorn.log", "wb")  # noqa: SIM115
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "queueproject.asgi:application", "--host",
             "127.0.0.1", "--port", str(port), "--no-access-log", "--backlog", "4096"],
            env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/schema/", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        report = asyncio.run(run(args, port, token, server.pid))
        print(json.dumps(report, indent=2))
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
        if args.pg:
            pg_admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        tmp.cleanup()


if __name__ == "__main__":
    main()
