"""The worker registry: every ``queue_worker`` and ``session_dispatch``
process keeps one ``WorkerProcess`` row alive (SPEC-free operations view;
issue 16 point 3).

A ``Registration`` runs in a daemon thread of the process (``start``/``stop``),
or as a loop another thread ticks (``runner.Interleaved``: the queue worker's
main thread, to spend no thread and connection on it): it writes the row
at start, heartbeats it every ``QUEUE_WORKER_HEARTBEAT_SECONDS`` with the
process's current counts (a callable the process hands in), deletes rows of
any process not seen for ``QUEUE_WORKER_EXPIRE_SECONDS`` (a crashed process
leaves its row; the survivors remove it), and deletes its own row when the
process stops. Each write is one short autocommit statement; a lost database
connection is survived (``Resilient``) and the next heartbeat tries again.

Reads: ``workers_live`` (the admin page, ``manage.py queue_workers`` and the
``/metrics`` worker families).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from queueproject import clock
from queueproject.conf import product_settings
from queueproject.models import WorkerProcess
from queueproject.runner import Resilient, call_resilient

logger = logging.getLogger("queueproject.workers")

DEREGISTER_ATTEMPTS = 2


def product_version() -> str:
    """The installed distribution's version, or the source tree's."""
    try:
        return importlib.metadata.version("durable-queues")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0"


def worker_heartbeat(
    *,
    id: str,
    kind: str,
    queues: list[str],
    counts: dict[str, Any],
    started_at: datetime,
) -> WorkerProcess:
    """Create or refresh the row of worker ``id`` (last seen: now). Autocommit;
    one UPDATE, or an INSERT the first time (or after the row was expired)."""
    now = clock.now()
    fields = {"last_seen_at": now, "counts": counts, "queues": queues}
    if WorkerProcess.objects.filter(id=id).update(**fields):
        return WorkerProcess(id=id, kind=kind, **fields)
    row, _ = WorkerProcess.objects.update_or_create(
        id=id,
        defaults={
            **fields,
            "kind": kind,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": product_version(),
            "started_at": started_at,
        },
    )
    return row


def worker_deregister(*, id: str) -> bool:
    """Delete the row of worker ``id`` (a clean exit). False when it was gone."""
    deleted, _ = WorkerProcess.objects.filter(id=id).delete()
    return bool(deleted)


def workers_expire(*, older_than: float | None = None) -> int:
    """Delete the rows not seen for ``older_than`` seconds (default
    ``QUEUE_WORKER_EXPIRE_SECONDS``); how many. Served by qp_worker_last_seen."""
    age = older_than if older_than is not None else product_settings().worker_expire_seconds
    cutoff = clock.now() - timedelta(seconds=age)
    deleted, _ = WorkerProcess.objects.filter(last_seen_at__lt=cutoff).delete()
    return deleted


def workers_live() -> list[WorkerProcess]:
    """The workers seen within the expiry time, by kind and id."""
    cutoff = clock.now() - timedelta(seconds=product_settings().worker_expire_seconds)
    return list(WorkerProcess.objects.filter(last_seen_at__gte=cutoff))


class Registration:
    """Keeps the row of one process: ``start()`` starts the heartbeat thread,
    ``stop()`` ends it and deletes the row. ``counts()`` is called on the
    heartbeat thread and must be thread-safe. Does nothing when
    ``QUEUE_WORKER_REGISTRY`` is off."""

    def __init__(
        self,
        *,
        worker_id: str,
        kind: str,
        queues: Callable[[], list[str]],
        counts: Callable[[], dict[str, Any]],
        interval: float | None = None,
    ) -> None:
        conf = product_settings()
        self.enabled = conf.worker_registry
        self.worker_id, self.kind = worker_id, kind
        self.queues, self.counts = queues, counts
        self.interval = interval if interval is not None else conf.worker_heartbeat_seconds
        self.started_at = clock.now()
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.enabled:
            return
        self._thread = threading.Thread(target=self._run, name="worker-registry", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        """One heartbeat (and the expiry of stale rows)."""
        worker_heartbeat(
            id=self.worker_id,
            kind=self.kind,
            queues=self.queues(),
            counts=self.counts(),
            started_at=self.started_at,
        )
        expired = workers_expire()
        if expired:
            logger.info("expired %d stale worker row(s)", expired)

    # --- as a loop of runner.Interleaved (the queue worker's main thread) -------------
    @property
    def idle_timeout(self) -> float:
        return self.interval

    def prepare(self) -> None:
        """Nothing to prepare (the first tick writes the row)."""

    def tick(self) -> bool:
        if self.enabled:
            self.beat()
        return False

    def request_stop(self) -> None:
        self.stopping.set()

    def on_stop(self) -> None:
        """Delete the row (a few quick tries), when the loop's ticks wrote it."""
        if self.enabled and self._thread is None:
            call_resilient(
                lambda: worker_deregister(id=self.worker_id),
                label="worker deregister",
                attempts=DEREGISTER_ATTEMPTS,
            )

    def _run(self) -> None:
        guard = Resilient(self.stopping, "worker registry")
        try:
            while not self.stopping.is_set():
                guard.turn(self.beat)
                self.stopping.wait(self.interval)
        finally:
            connections.close_all()

    def stop(self, timeout: float = 2.0) -> None:
        """End the heartbeat and delete the row (a few quick tries)."""
        if self._thread is None:
            return
        self.stopping.set()
        self._thread.join(timeout)
        call_resilient(
            lambda: worker_deregister(id=self.worker_id),
            label="worker deregister",
            attempts=DEREGISTER_ATTEMPTS,
        )
