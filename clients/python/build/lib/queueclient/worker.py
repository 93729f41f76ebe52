"""``RemoteWorker``: ``queue_worker``'s semantics over HTTP, for hosts that
cannot reach the database.

    worker = RemoteWorker(client, "acme/jobs", handle, concurrency=4, batch=10)
    worker.run()          # until SIGTERM / SIGINT (or stop())

It long-polls ``claim`` (batches of ``batch``, only while it has room:
``concurrency`` handler threads and at most ``batch`` claimed messages waiting
for one), runs ``handler(message)`` on each, extends the leases of what it
holds while handlers run, acks the handled ones in batches, and nacks a
message whose handler raised (with the exception as the error; the
collection's backoff decides when it comes back). On SIGTERM/SIGINT or
``stop()``: no new claims; claimed messages not yet started are released at
once; running handlers finish and are acked; then ``run`` returns. A second
signal stops waiting for running handlers (their leases lapse and the server
hands them out again).

Delivery is at least once: a worker that dies loses nothing (its leases lapse),
and a handler may see a message again after a crash or a lost lease.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue as queue_module
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from queueclient.client import Client, Queue
from queueclient.errors import LeaseLost, NotFound, QueueClientError
from queueclient.models import ClaimedMessage

log = logging.getLogger("queueclient.worker")
Handler = Callable[[ClaimedMessage], Any]


class RemoteWorker:
    """See the module docstring. ``visibility_timeout``: the lease asked for at
    each claim (None: the collection's); ``wait_seconds``: the long poll of one
    claim (short, so that a stop is seen within it); ``ack_interval``: how long
    handled messages may wait to be acked together."""

    def __init__(
        self,
        client: Client,
        queue: str | Queue,
        handler: Handler,
        *,
        concurrency: int = 1,
        batch: int = 10,
        worker_id: str | None = None,
        visibility_timeout: int | None = None,
        wait_seconds: float = 5.0,
        ack_interval: float = 0.2,
    ) -> None:
        if not 1 <= concurrency <= 256 or not 1 <= batch <= 100:
            raise ValueError("concurrency must be 1..256 and batch 1..100")
        self.queue = client.queue(queue) if isinstance(queue, str) else queue
        self.handler, self.concurrency, self.batch = handler, concurrency, batch
        self.worker_id = worker_id or f"remote:{socket.gethostname()}:{os.getpid()}"
        self.visibility_timeout, self.wait_seconds = visibility_timeout, wait_seconds
        self.ack_interval = ack_interval
        self.handled = self.failed = 0
        self._waiting: queue_module.Queue[ClaimedMessage | None] = queue_module.Queue()
        self._held: dict[str, ClaimedMessage] = {}  # id → message, claimed and not yet settled
        self._lease_seconds: dict[str, float] = {}
        self._to_ack: list[ClaimedMessage] = []
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._hurry = threading.Event()

    # ------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        """Stop claiming and finish (the first SIGTERM/SIGINT does this)."""
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()
        with self._room:
            self._room.notify_all()

    def run(
        self,
        *,
        max_messages: int | None = None,
        until_empty: bool = False,
        install_signals: bool = True,
    ) -> int:
        """Work until stopped, until ``max_messages`` were handled, or (with
        ``until_empty``) until a claim finds nothing and nothing is held.
        Returns how many messages were handled (acked or nacked)."""
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        threads = [threading.Thread(target=self._handle_loop, daemon=True, name=f"handler-{i}")
                   for i in range(self.concurrency)]  # fmt: skip
        threads.append(threading.Thread(target=self._ack_loop, daemon=True, name="acker"))
        threads.append(threading.Thread(target=self._lease_loop, daemon=True, name="leases"))
        for thread in threads:
            thread.start()
        try:
            self._claim_loop(max_messages, until_empty)
        finally:
            self.stop()
            self._release_waiting()
            self._drain(threads[: self.concurrency])
            self._flush_acks()
        return self.handled + self.failed

    # ---------------------------------------------------------------- claim

    def _claim_loop(self, max_messages: int | None, until_empty: bool) -> None:
        claimed_total = 0
        while not self._stopping.is_set():
            with self._room:
                while self._waiting.qsize() >= self.batch and not self._stopping.is_set():
                    self._room.wait(0.5)
                held = len(self._held)
            n = (
                self.batch
                if max_messages is None
                else min(self.batch, max_messages - claimed_total)
            )
            if n <= 0:
                return
            wait = 0 if until_empty and held == 0 else self.wait_seconds
            try:
                messages = self.queue.claim(worker_id=self.worker_id, max_messages=n,
                                            visibility_timeout=self.visibility_timeout,
                                            wait_seconds=wait)  # fmt: skip
            except QueueClientError as exc:
                log.warning("claim failed (%s); retrying in 1 s", exc)
                self._stopping.wait(1.0)
                continue
            if not messages and until_empty:
                if held == 0:
                    return
                self._stopping.wait(0.05)
            claimed_total += len(messages)
            now = time.time()
            with self._lock:
                for message in messages:
                    self._held[message.id] = message
                    self._lease_seconds[message.id] = max(
                        1.0, message.lease_expires_at.timestamp() - now
                    )
            for message in messages:
                self._waiting.put(message)

    # -------------------------------------------------------------- handlers

    def _handle_loop(self) -> None:
        while True:
            message = self._waiting.get()
            if message is None:
                return
            with self._room:
                self._room.notify_all()
            if self._stopping.is_set() and not self._is_held(message):
                continue
            try:
                self.handler(message)
            except Exception as exc:
                self._nack(message, exc)
            else:
                with self._lock:
                    if message.id in self._held:
                        self._to_ack.append(message)

    def _nack(self, message: ClaimedMessage, exc: Exception) -> None:
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:2000]
        with self._lock:
            if self._held.pop(message.id, None) is None:
                return  # the lease was lost meanwhile
            self._lease_seconds.pop(message.id, None)
        try:
            self.queue.nack(message, error=error)
        except (LeaseLost, NotFound):
            log.warning("nack of %s: the lease was lost", message.id)
        except QueueClientError as exc2:
            log.warning("nack of %s failed: %s (its lease will lapse)", message.id, exc2)
        self.failed += 1

    def _is_held(self, message: ClaimedMessage) -> bool:
        with self._lock:
            return message.id in self._held

    # ------------------------------------------------------------------ acks

    def _ack_loop(self) -> None:
        while not self._hurry.is_set():
            time.sleep(self.ack_interval)
            self._flush_acks()
            if self._stopping.is_set() and not self._held:
                return

    def _flush_acks(self) -> None:
        with self._lock:
            batch, self._to_ack = self._to_ack[:100], self._to_ack[100:]
        if not batch:
            return
        try:
            result = self.queue.ack_many(batch)
        except QueueClientError as exc:
            log.warning("ack of %d failed (%s); retrying", len(batch), exc)
            with self._lock:
                self._to_ack[:0] = batch
            return
        lost = [r.id for r in result.results if not r.acked]
        if lost:
            log.warning("%d handled message(s) were not acked (lease lost): %s", len(lost), lost)
        with self._lock:
            for message in batch:
                self._held.pop(message.id, None)
                self._lease_seconds.pop(message.id, None)
        self.handled += len(batch)

    # ---------------------------------------------------------------- leases

    def _lease_loop(self) -> None:
        """Extend what is held once a third of its lease is left to run."""
        while not self._hurry.is_set():
            time.sleep(0.2)
            now = datetime.now(UTC)
            with self._lock:
                due = [(m, self._lease_seconds.get(m.id, 30.0)) for m in self._held.values()
                       if (m.lease_expires_at - now).total_seconds()
                       < self._lease_seconds.get(m.id, 30.0) * 2 / 3]  # fmt: skip
            for message, seconds in due:
                self._extend(message, seconds)
            if self._stopping.is_set() and not self._held:
                return

    def _extend(self, message: ClaimedMessage, seconds: float) -> None:
        try:
            extended = self.queue.extend(message, visibility_timeout=max(1, round(seconds)))
        except (LeaseLost, NotFound):
            log.warning("lease of %s lost; it will not be acked", message.id)
            with self._lock:
                self._held.pop(message.id, None)
            return
        except QueueClientError as exc:
            log.warning("extend of %s failed: %s", message.id, exc)
            return
        if extended.lease_expires_at is None:
            return
        renewed = dataclasses.replace(message, lease_expires_at=extended.lease_expires_at)
        with self._lock:
            if message.id in self._held:
                self._held[message.id] = renewed

    # ----------------------------------------------------------------- stop

    def _release_waiting(self) -> None:
        """Claimed but not started: give them back at once."""
        while True:
            try:
                message = self._waiting.get_nowait()
            except queue_module.Empty:
                break
            if message is None:
                continue
            with self._lock:
                held = self._held.pop(message.id, None) is not None
            if held:
                try:
                    self.queue.release(message)
                except QueueClientError as exc:
                    log.warning("release of %s failed: %s", message.id, exc)

    def _drain(self, handlers: list[threading.Thread]) -> None:
        for _ in handlers:
            self._waiting.put(None)
        for thread in handlers:
            while thread.is_alive() and not self._hurry.is_set():
                thread.join(0.2)
