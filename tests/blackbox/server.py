"""A real server for black-box tests: its own database, ``manage.py migrate``
and ``manage.py runserver`` in subprocesses with the production settings
(DEBUG off, a random SECRET_KEY), and helpers that set up principals through
the management commands a deployer would run.

Nothing here imports the project: the server is reached over HTTP only and
its database through ``manage.py`` subprocesses.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 90.0  # seconds; the machine is shared and may be slow


# ------------------------------------------------------------------ database


def postgres_url() -> str | None:
    """The PostgreSQL URL of this test run, or None when it runs on SQLite."""
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else None


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def bb_database_name(url: str) -> str:
    """``<run's database>_bb`` (``_<xdist worker>`` appended under xdist), so
    black-box databases never collide with another run's."""
    name = urlsplit(url).path.lstrip("/") or "postgres"
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"{name}_bb_{worker}" if worker else f"{name}_bb"


def _admin(url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(statement)


def postgres_create(url: str, name: str) -> str:
    """A fresh database ``name`` (dropped first if a crashed run left it)."""
    postgres_drop(url, name)
    _admin(url, f'CREATE DATABASE "{name}"')
    return with_database(url, name)


def postgres_drop(url: str, name: str) -> None:
    _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def production_env(database_url: str) -> dict[str, str]:
    """The environment of a production deployment on ``database_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#%^&*(-_=+)"
    env.update(
        DJANGO_SETTINGS_MODULE="queueproject.settings",
        DEBUG="false",
        SECRET_KEY="".join(secrets.choice(alphabet) for _ in range(50)),
        ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=database_url,
        PYTHONUNBUFFERED="1",
    )
    return env


@dataclass
class Server:
    """A running ``manage.py runserver`` and the commands against its database."""

    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str) -> str:
        """Run ``manage.py <args>`` against the server's database; its stdout
        (raises AssertionError with stderr when it fails)."""
        done = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *args],
            env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stderr}"
        return done.stdout

    def command(self) -> list[str]:
        """``manage.py runserver`` (WSGI, a thread per request)."""
        return [sys.executable, str(ROOT / "manage.py"), "runserver",
                f"127.0.0.1:{self.port}", "--noreload"]  # fmt: skip

    def start(self) -> None:
        """Start the server and wait until it serves ``/api/schema/``."""
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            self.command(), env=self.env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited at start:\n{self.output()}")
            try:
                if httpx.get(f"{self.url}/api/schema/", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server did not answer within {START_TIMEOUT} s:\n{self.output()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def output(self, tail: int = 20_000) -> str:
        """What the server wrote (stdout and stderr), the last ``tail`` characters."""
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-tail:]

    # ------------------------------------------------ set-up through commands

    def create_group(self, slug: str, *, parent: str | None = None) -> None:
        self.manage("create_group", slug, *(["--parent", parent] if parent else []))

    def create_app(self, slug: str, *, group: str) -> None:
        self.manage("create_app", slug, "--group", group)

    def create_user(self, username: str, *, password: str, staff: bool = False) -> None:
        code = (
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_user({username!r}, password={password!r}, "
            f"is_staff={staff!r})"
        )
        self.manage("shell", "-c", code)

    def grant_role(self, username: str, group: str, role: str) -> None:
        self.manage("grant_role", username, group, role)

    def create_token(self, *, scopes: str, app: str | None = None, user: str | None = None) -> str:
        """A new token's secret (the command prints it alone on its last line)."""
        owner = ["--app", app] if app else ["--user", str(user)]
        return self.manage("create_token", *owner, "--scopes", scopes).strip().splitlines()[-1]

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        """An HTTP client for the server (``Authorization: Bearer`` with ``token``)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)


class AsgiServer(Server):
    """The production command: ``uvicorn queueproject.asgi:application`` (one
    process, asyncio; the waiting endpoints are async views)."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "uvicorn", "queueproject.asgi:application",
                "--host", "127.0.0.1", "--port", str(self.port), "--no-access-log"]  # fmt: skip
