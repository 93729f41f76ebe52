"""Run-loop scaffolding shared by long-running commands (queue workers,
maintenance, the session dispatcher).

A ``Runner`` subclass implements ``tick()`` (do one unit of work; return True
if there may be more right away) and ``wait(timeout)``. The base class gives:

- graceful signals: the first SIGTERM/SIGINT sets ``stopping`` (the loop ends
  after the current tick; subclasses finish in-flight work), a second one exits
  the process at once;
- ``close_old_connections()`` every turn, and survival of a lost database
  connection: the error is logged, connections are closed and the loop retries
  with a capped backoff instead of dying.

``default_worker_id`` names a process for claims and leadership.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connections,
)

from queueproject.backoff import backoff_delay

logger = logging.getLogger(__name__)

RECONNECT_BACKOFF_BASE = 0.1
RECONNECT_BACKOFF_MAX = 5.0
T = TypeVar("T")


def default_worker_id() -> str:
    """``host-pid``: who claims (``claimed_by``) and who leads maintenance,
    unless a command is told otherwise; unique among live processes."""
    return f"{socket.gethostname()}-{os.getpid()}"


class Runner:
    idle_timeout: float = 1.0

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._signals = 0

    # --- signals --------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """First signal: stop gracefully. Second: exit at once (status 1)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            # Like Python itself: an inherited "ignore SIGINT" (a background job
            # of a script, which then forwards one SIGTERM) is kept.
            if sig == signal.SIGINT and signal.getsignal(sig) is signal.SIG_IGN:
                continue
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second signal: exiting at once")
            os._exit(1)
        logger.info("signal %s: stopping after in-flight work", signal.Signals(signum).name)
        self.request_stop()

    def request_stop(self) -> None:
        self.stopping.set()

    # --- the loop -------------------------------------------------------------
    def tick(self) -> bool:
        """One unit of work; True when more may be ready immediately."""
        raise NotImplementedError

    def wait(self, timeout: float) -> None:
        """Sleep until there may be work (subclasses wake on notifications)."""
        self.stopping.wait(timeout)

    def should_continue(self) -> bool:
        """False ends the loop (subclasses add --max-messages, --until-empty, ...)."""
        return not self.stopping.is_set()

    def prepare(self) -> None:
        """Called once before the first tick (subclasses: start-up work)."""

    def run(self) -> None:
        self.prepare()
        guard = Resilient(self.stopping, type(self).__name__)
        while self.should_continue():
            close_old_connections()
            busy = guard.turn(self.tick)
            if busy is FAILED:
                continue
            if not busy and self.should_continue():
                self.wait(self.idle_timeout)
        self.on_stop()

    def on_stop(self) -> None:
        """Called once when the loop ends (release resources, resign leadership)."""


FAILED = object()  # what Resilient.turn returns when the turn raised


class Loop(Protocol):
    """What ``Interleaved`` runs: a ``Runner``, or anything with its hooks."""

    @property
    def idle_timeout(self) -> float: ...
    def prepare(self) -> None: ...
    def tick(self) -> bool: ...
    def request_stop(self) -> None: ...
    def on_stop(self) -> None: ...


class Interleaved:
    """Several loops on one thread, each ticked when due: again at once while
    its ``tick`` returns True, else after its ``idle_timeout``. A worker's
    main thread runs maintenance, the scheduler, the outbox relay and the
    registry heartbeat this way: one thread and one database connection
    instead of four. Each loop's turns have their own ``Resilient`` guard (a
    lost connection is logged and backed off; the backoff sleeps the thread,
    so the other loops wait that long too, as they would for the database).
    A slow tick delays the others by as long: the loops put together must
    all be short (statements, in-database deliveries)."""

    def __init__(self, loops: list[Loop], stopping: threading.Event) -> None:
        self.loops = loops
        self._due = [0.0] * len(loops)
        self._guards = [Resilient(stopping, type(loop).__name__) for loop in loops]

    def prepare(self) -> None:
        for loop in self.loops:
            loop.prepare()

    def turn(self) -> float:
        """Tick every loop that is due; seconds until the next one is."""
        for i, loop in enumerate(self.loops):
            if self._due[i] <= time.monotonic():
                busy = self._guards[i].turn(loop.tick)
                self._due[i] = time.monotonic() + (0.0 if busy is True else loop.idle_timeout)
        return self.next_due()

    def next_due(self) -> float:
        """Seconds until the next loop is due (an hour without loops)."""
        return max(0.0, min(self._due, default=time.monotonic() + 3600.0) - time.monotonic())

    def stop(self) -> None:
        """``request_stop`` and ``on_stop`` each loop (resign, deregister)."""
        for loop in self.loops:
            loop.request_stop()
            try:
                loop.on_stop()
            except Exception:  # the others still stop
                logger.exception("stopping %s failed", type(loop).__name__)


def drop_connections() -> None:
    """Close this thread's database connections (a broken one is discarded)."""
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:  # a broken connection may fail to close; it is gone anyway
            logger.debug("closing a broken connection failed", exc_info=True)


class Resilient:
    """Runs the turns of a loop so that database trouble does not end it: a lost
    connection (or any database error; any error at all with ``survive_all``) is
    logged, this thread's connections are dropped and the next turn comes after
    a capped exponential backoff (``backoff_delay``: 0.1 s doubling to
    ``RECONNECT_BACKOFF_MAX``, jittered so that workers cut off together do
    not reconnect together). Used by ``Runner.run`` and by worker threads."""

    def __init__(self, stopping: threading.Event, label: str, *, survive_all: bool = False):
        self.stopping, self.label, self.survive_all = stopping, label, survive_all
        self.failures = 0  # consecutive failed turns

    def turn(self, fn: Callable[[], T]) -> T | object:
        """``fn()``'s result, or FAILED after logging and backing off."""
        survivable: tuple[type[BaseException], ...] = (
            (Exception,) if self.survive_all else (DatabaseError,)
        )
        try:
            result = fn()
        except (OperationalError, InterfaceError) as exc:
            delay = self._next_delay()
            logger.warning("%s: database unavailable (%s); retrying in %.1fs",
                           self.label, exc, delay)  # fmt: skip
        except survivable:
            delay = self._next_delay()
            logger.exception("%s: error; retrying in %.1fs", self.label, delay)
        else:
            self.failures = 0
            return result
        drop_connections()
        self.stopping.wait(delay)
        return FAILED

    def _next_delay(self) -> float:
        self.failures += 1
        return backoff_delay(self.failures, base=RECONNECT_BACKOFF_BASE, cap=RECONNECT_BACKOFF_MAX)


def call_resilient(fn: Callable[[], T], *, label: str, attempts: int) -> T | object:
    """``fn()`` tried up to ``attempts`` times the ``Resilient`` way (a lost
    connection is logged without a traceback, dropped, and the next try comes
    after the short backoff), for a last call at exit, when the loop's own
    ``stopping`` is already set and must not cut the backoff short. FAILED
    when every try failed."""
    guard = Resilient(threading.Event(), label)
    for _ in range(attempts):
        result = guard.turn(fn)
        if result is not FAILED:
            return result
    return FAILED


def sleep_until(deadline: float, stopping: threading.Event) -> None:
    """Sleep until ``deadline`` (time.monotonic) or until ``stopping`` is set."""
    stopping.wait(max(0.0, deadline - time.monotonic()))
