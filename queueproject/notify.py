"""Wake-ups: PostgreSQL LISTEN/NOTIFY with a polling fallback.

Writers call :func:`notify` inside their transaction (PostgreSQL delivers the
notification at commit; it is a no-op on SQLite). Waiters (long-poll claims,
workers, dispatchers) :func:`subscribe` to a channel and call
``Subscription.wait(timeout)``; they must re-check the database after every
wake-up, because a wake-up only says "look now" (it may be spurious) and a
notification may be lost (a dropped connection): ``wait`` therefore never
sleeps longer than ``max_sleep`` (the poll interval on SQLite, or when
LISTEN is disabled for poolers such as PgBouncer in transaction mode).

One listener thread and one extra connection per process serve every
subscription, so many concurrent long-polls cost one connection.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db import connections

from queueproject import rawsql
from queueproject.conf import product_settings

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

logger = logging.getLogger(__name__)

SAFETY_SLEEP = 5.0  # on PostgreSQL, re-check at least this often even without a notification


def channel(kind: str, ident: object) -> str:
    """A channel name (PostgreSQL identifiers are at most 63 bytes)."""
    return f"dq_{kind}_{str(ident).replace('-', '')}"[:63]


def listen_available(alias: str = "default") -> bool:
    return connections[alias].vendor == "postgresql" and product_settings().listen_notify_enabled


def notify(name: str, payload: str = "", *, using: str = "default") -> None:
    """Send a wake-up on channel ``name`` (delivered when the current transaction
    commits; immediately in autocommit). No-op where LISTEN is unavailable."""
    notify_many([name], payload, using=using)


def notify_many(names: Sequence[str], payload: str = "", *, using: str = "default") -> None:
    """Like :func:`notify` for several channels, in one round trip."""
    if names and listen_available(using):
        calls = ", ".join(["pg_notify(%s, %s)"] * len(names))
        args = [arg for name in names for arg in (name, payload)]
        rawsql.execute(f"SELECT {calls}", args, using=using)


@dataclass(eq=False)
class Subscription:
    channel: str
    max_sleep: float
    event: threading.Event = field(default_factory=threading.Event)

    def wait(self, timeout: float) -> bool:
        """Sleep until notified or ``min(timeout, max_sleep)`` passes. True if notified."""
        woke = self.event.wait(max(0.0, min(timeout, self.max_sleep)))
        self.event.clear()
        return woke

    def close(self) -> None:
        hub = _Hub.current_if_running()
        if hub is not None:
            hub.remove(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shutdown() -> None:
    """Stop this process's listener thread and close its connection (tests, exit)."""
    with _Hub._guard:
        hub, _Hub._instance = _Hub._instance, None
    if hub is not None and hub.pid == os.getpid():
        hub.stop()


def subscribe(
    name: str, *, using: str = "default", event: threading.Event | None = None
) -> Subscription:
    """A subscription to ``name``; LISTEN is active when this returns (PostgreSQL).
    ``event`` replaces the subscription's own Event (``queueproject.sse`` passes
    one that also wakes an asyncio loop)."""
    wake = event if event is not None else threading.Event()
    if not listen_available(using):
        return Subscription(name, max_sleep=product_settings().worker_poll_interval, event=wake)
    sub = Subscription(name, max_sleep=SAFETY_SLEEP, event=wake)
    _Hub.get(using).add(sub)
    return sub


class _Hub:
    """The process's listener thread: one autocommit psycopg connection that
    LISTENs to every subscribed channel and sets the subscribers' events."""

    _instance: _Hub | None = None
    _guard = threading.Lock()

    def __init__(self, using: str):
        self.using = using
        self.pid = os.getpid()
        self.subs: dict[str, set[Subscription]] = {}
        self.listening: set[str] = set()
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="dq-listen", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls, using: str) -> _Hub:
        with cls._guard:
            if cls._instance is None or cls._instance.pid != os.getpid():
                cls._instance = cls(using)
            return cls._instance

    @classmethod
    def current_if_running(cls) -> _Hub | None:
        hub = cls._instance
        return hub if hub is not None and hub.pid == os.getpid() else None

    def add(self, sub: Subscription) -> None:
        with self.lock:
            self.subs.setdefault(sub.channel, set()).add(sub)
            deadline = time.monotonic() + 2.0
            while sub.channel not in self.listening and time.monotonic() < deadline:
                self.changed.wait(0.05)

    def remove(self, sub: Subscription) -> None:
        with self.lock:
            subs = self.subs.get(sub.channel)
            if subs is not None:
                subs.discard(sub)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)

    def _connect(self) -> psycopg.Connection[TupleRow]:
        import psycopg

        params = connections[self.using].get_connection_params()
        wanted = ("dbname", "user", "password", "host", "port", "sslmode", "options")
        keep = {k: v for k, v in params.items() if k in wanted}
        return psycopg.connect(autocommit=True, connect_timeout=5, **keep)

    def _sync_listens(self, conn: psycopg.Connection[TupleRow]) -> None:
        with self.lock:
            wanted = {name for name, subs in self.subs.items() if subs}
            new = wanted - self.listening
        for name in new:
            conn.execute(f'LISTEN "{name}"')
        with self.lock:
            self.listening |= new
            self.changed.notify_all()

    def _wake(self, name: str | None) -> None:
        with self.lock:
            targets = [s for n, subs in self.subs.items() if name in (None, n) for s in subs]
        for sub in targets:
            sub.event.set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                conn = self._connect()
            except Exception as exc:  # the database may be restarting: retry
                logger.warning("listen connection failed: %s", exc)
                time.sleep(1.0)
                continue
            try:
                with self.lock:
                    self.listening = set()
                while not self.stopping.is_set():
                    self._sync_listens(conn)
                    for note in conn.notifies(timeout=0.1):
                        self._wake(note.channel)
            except Exception as exc:
                logger.warning("listen connection lost: %s", exc)
                self._wake(None)  # everybody re-checks the database
                time.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()
