"""The lease heartbeat: extension of the leases of the messages the slots
hold (run on the acker thread, ``Heartbeat.tick`` each round), and
``InFlight``, the slots' record of what they hold that it reads."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from groupqueues import services
from groupqueues.exceptions import LeaseLost
from groupqueues.services import ClaimedMessage
from groupqueues.worker.lanes import Lane
from queueproject.runner import drop_connections

logger = logging.getLogger("groupqueues.worker")

HEARTBEAT_TICK = 0.2  # seconds: how often the heartbeat looks for leases to extend


@dataclass(eq=False)
class Batch:
    """The claimed messages a slot holds (for the heartbeat): ``held`` are
    those not yet acked, nacked, failed or released."""

    lane: Lane
    held: dict[Any, ClaimedMessage]
    extended_at: float = field(default_factory=time.monotonic)


class InFlight:
    """What the slots are at, shared with the heartbeat (thread-safe): how
    many slots are busy (claiming or holding messages) and the batches they
    hold."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = 0
        self._batches: set[Batch] = set()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Count the calling slot as busy for the block."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1

    def idle(self) -> bool:
        """True when no slot is claiming or holding messages."""
        with self._lock:
            return self._busy == 0

    @contextlib.contextmanager
    def holding(self, batch: Batch) -> Iterator[Batch]:
        """Show ``batch`` to the heartbeat for the block."""
        with self._lock:
            self._batches.add(batch)
        try:
            yield batch
        finally:
            with self._lock:
                self._batches.discard(batch)

    def due(self, now: float) -> list[Batch]:
        """The batches last extended a third of their visibility timeout ago."""
        with self._lock:
            return [b for b in self._batches
                    if now - b.extended_at >= b.lane.visibility_timeout / 3]  # fmt: skip


class Heartbeat:
    """Extends held leases every third of their visibility timeout. ``tick``
    is called by the thread that runs it (the acker's, each round: no thread
    or connection of its own) and looks at most every HEARTBEAT_TICK. A lost
    connection is dropped and the extension retried at the next look."""

    def __init__(self, *, in_flight: InFlight) -> None:
        self.in_flight = in_flight
        self._looked_at = 0.0

    def tick(self) -> None:
        now = time.monotonic()
        if now - self._looked_at < HEARTBEAT_TICK:
            return
        self._looked_at = now
        for batch in self.in_flight.due(now):
            batch.extended_at = now
            try:
                self._extend(batch)
            except DatabaseError as exc:  # retried at the next look
                logger.warning("heartbeat: database unavailable (%s); retrying", exc)
                drop_connections()
            except Exception:  # never let the heartbeat die
                logger.exception("heartbeat failed")

    def _extend(self, batch: Batch) -> None:
        for message in list(batch.held.values()):
            try:
                services.message_extend(
                    collection=batch.lane.collection, id=message.id,
                    claim_token=message.claim_token,
                    visibility_timeout=batch.lane.visibility_timeout,
                )  # fmt: skip
            except LeaseLost:
                if batch.held.pop(message.id, None) is not None:  # not just settled
                    logger.warning("heartbeat: lease of %s lost", message.id)
