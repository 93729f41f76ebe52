"""CPU seconds of a bench step, client and server: what a busy shared machine
changes least (a wall-clock rate there varies several-fold between rounds;
the CPU a step burns varies far less). Used by ``engine_bench.py --features``
and ``plain_before_after.py``.

The server's share is read from ``/proc/<pid>/stat`` of this connection's
PostgreSQL backend, so it needs the server on this machine (0 otherwise, and
on SQLite, whose work is the client's)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def backend_cpu_seconds() -> float:
    """User + system CPU seconds of this connection's PostgreSQL backend so
    far (0.0 on SQLite or when its /proc entry cannot be read)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return 0.0
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        (pid,) = cur.fetchone()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@dataclass(frozen=True)
class Cost:
    wall: float  # seconds
    client: float  # CPU seconds of this process
    server: float  # CPU seconds of its PostgreSQL backend

    @property
    def cpu(self) -> float:
        return self.client + self.server


def measured(fn: Callable[[], Any]) -> tuple[Any, Cost]:
    """``fn()``'s result and what it cost (the backend's CPU read before and
    after: two short queries outside the measured span)."""
    server = backend_cpu_seconds()
    client, wall = time.process_time(), time.perf_counter()
    result = fn()
    wall, client = time.perf_counter() - wall, time.process_time() - client
    return result, Cost(wall, client, backend_cpu_seconds() - server)
