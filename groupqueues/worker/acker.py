"""The acker thread: batched completion of what the slots could not ack
with their next claim, and the counting and logging of what they did. The
lease heartbeat rides on it (``each_round``)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import DatabaseError, connections

from groupqueues import services
from groupqueues.services import AckBatchResult, ClaimedMessage
from groupqueues.worker.lanes import Lane
from groupqueues.worker.outcomes import Outcomes
from queueproject.runner import drop_connections

logger = logging.getLogger("groupqueues.worker")

# A success waiting for its ack: (lane, message, handler duration in ms).
Ack = tuple[Lane, ClaimedMessage, float]


@dataclass(frozen=True)
class Settled:
    """Acks a slot already made (with its next claim), for the acker to count
    and log off the slot's critical path."""

    lane: Lane
    acks: list[tuple[ClaimedMessage, float]]  # (message, handler duration in ms)
    result: AckBatchResult


class Acker:
    """Acks on its own thread what slots hand over (slow handlers, a stop, the
    end of the budget, a lost connection): whatever has queued up since the
    last round (up to 500 per collection) goes in one ``message_ack_batch``.
    Until acked, a message stays claimed; a crash leaves it to its lease. It
    also counts and logs the acks the slots made themselves (``Settled``), so
    a slot's next batch does not wait for a hundred log lines.
    ``each_round`` is called after every round (at least every IDLE seconds):
    the worker's lease heartbeat, so that it needs no thread and no database
    connection of its own."""

    ROUND = 500
    IDLE = 0.05  # seconds

    def __init__(self, outcomes: Outcomes, *, each_round: Callable[[], None] | None = None) -> None:
        self.outcomes = outcomes
        self.each_round = each_round
        self.pending: queue.SimpleQueue[list[Ack] | Settled | None] = queue.SimpleQueue()
        self.done = threading.Event()

    def put(self, acks: list[Ack] | Settled) -> None:
        self.pending.put(acks)

    def finish(self, timeout: float) -> None:
        """Ack what is queued, then stop the thread."""
        self.pending.put(None)
        self.done.wait(timeout)

    def run(self) -> None:
        backlog: list[Ack] = []
        closing = False
        try:
            while not (closing and not backlog):
                closing = self._collect(backlog) or closing
                backlog = self._flush(backlog)
                if self.each_round is not None:
                    self.each_round()
        finally:
            connections.close_all()
            self.done.set()

    def _collect(self, backlog: list[Ack]) -> bool:
        """Move queued acks into ``backlog`` and record settled ones (waiting a
        moment when there are none); True once the closing sentinel was seen."""
        try:
            items = [self.pending.get(timeout=self.IDLE)] if not backlog else []
        except queue.Empty:
            return False
        while len(backlog) < self.ROUND * 4:
            try:
                items.append(self.pending.get_nowait())
            except queue.Empty:
                break
        for item in items:
            if isinstance(item, Settled):
                self.outcomes.record_acks(item.lane, item.acks, item.result)
            elif item is not None:
                backlog.extend(item)
        return None in items

    def _flush(self, backlog: list[Ack]) -> list[Ack]:
        """Ack the backlog per collection; what could not be sent (database
        unavailable) is returned to retry."""
        by_lane: dict[Lane, list[tuple[ClaimedMessage, float]]] = {}
        for lane, message, duration in backlog:
            by_lane.setdefault(lane, []).append((message, duration))
        left: list[Ack] = []
        for lane, items in by_lane.items():
            for i in range(0, len(items), self.ROUND):
                chunk = items[i : i + self.ROUND]
                try:
                    self._ack(lane, chunk)
                except DatabaseError as exc:  # OperationalError, InterfaceError included
                    logger.warning("acker: database unavailable (%s); retrying", exc)
                    drop_connections()
                    time.sleep(0.2)
                    left += [(lane, m, d) for m, d in chunk]
                except Exception:  # never let the thread die: those leases just lapse
                    logger.exception("acker: acking %d messages failed", len(chunk))
        return left

    def _ack(self, lane: Lane, acks: list[tuple[ClaimedMessage, float]]) -> None:
        result = services.message_ack_batch(
            collection=lane.collection, acks=[(m.id, m.claim_token) for m, _ in acks]
        )
        self.outcomes.record_acks(lane, acks, result)
