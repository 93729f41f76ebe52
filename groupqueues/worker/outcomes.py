"""Outcomes: what became of each message a worker claimed, counted
(``Tally``) and logged as structured lines (``Outcomes``): at INFO one line
per acked batch naming every message in it (``"event": "messages"``) and one
line per any other outcome (``"event": "message"``); at DEBUG also one line
per acked message. Failures are nacked (backoff) or failed here, and
unstarted claims released."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from groupqueues import services
from groupqueues.exceptions import LeaseLost
from groupqueues.handlers import PermanentFailure
from groupqueues.services import AckBatchResult, ClaimedMessage
from groupqueues.worker.lanes import Lane
from queueproject.metrics import DurationHistogram

logger = logging.getLogger("groupqueues.worker")

ERROR_TEXT_MAX = 2000


class Tally:
    """Outcome counters shared by the slots (thread-safe), with the claims
    made and the handler durations: what the worker's registry row carries to
    ``/metrics`` (``as_counts``)."""

    OUTCOMES = ("acked", "retried", "dead", "released", "lease_lost")

    def __init__(self, *, durations: bool = True) -> None:
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(self.OUTCOMES, 0)
        self.claimed = 0
        # Without the registry nobody reads the histogram: it is not kept.
        self.durations = DurationHistogram() if durations else None

    def add(self, outcome: str, n: int = 1) -> None:
        with self._lock:
            self.counts[outcome] += n

    def add_claimed(self, n: int) -> None:
        if n:
            with self._lock:
                self.claimed += n

    def as_counts(self) -> dict[str, Any]:
        """The counters as the registry row stores them (docs/observability.md)."""
        with self._lock:
            counts: dict[str, Any] = {**self.counts, "claimed": self.claimed}
        if self.durations is not None:
            counts["duration"] = self.durations.as_counts()
        return counts

    def observe(self, duration_ms: float) -> None:
        """One handler run of ``duration_ms`` into the histogram (if kept)."""
        if self.durations is not None:
            self.durations.observe(duration_ms / 1000)

    def observe_many(self, durations_ms: list[float]) -> None:
        """Handler runs into the histogram (if kept), under one lock."""
        if self.durations is not None:
            self.durations.observe_many([d / 1000 for d in durations_ms])

    @property
    def processed(self) -> int:
        """Messages whose handler ran to an outcome (released ones did not run)."""
        c = self.counts
        return c["acked"] + c["retried"] + c["dead"] + c["lease_lost"]

    def summary(self, elapsed: float) -> str:
        """The counts and rate over ``elapsed`` seconds, as one line."""
        c = self.counts
        rate = self.processed / elapsed if elapsed > 0 else 0.0
        return (
            f"processed={self.processed} acked={c['acked']} retried={c['retried']} "
            f"dead={c['dead']} released={c['released']} lease_lost={c['lease_lost']} "
            f"seconds={elapsed:.2f} rate={rate:.0f}/s"
        )


class Outcomes:
    """Settles what is not an ack and records every outcome: ``tally`` counts
    it and the ``groupqueues.worker`` logger gets a JSON record of it: at INFO
    one line per acked batch (``"event": "messages"``: the ids, attempts and
    handler durations of all its messages, in parallel lists) and one line per
    message for every other outcome (``"event": "message"``); at DEBUG also
    one line per acked message. Thread-safe; ``worker_id`` goes into every
    line. (One line per acked message cost a write and a log record each, and
    the acker thread that wrote them fought the slot for the GIL at every
    write: bench/README.md, "Speed as deployed".)"""

    def __init__(self, *, worker_id: str, tally: Tally) -> None:
        self.tally = tally
        self._worker_json = json.dumps(worker_id)

    def fail(self, lane: Lane, message: ClaimedMessage, exc: Exception, duration: float) -> None:
        """Nack (backoff; dead once out of attempts) the message whose handler
        raised ``exc``, or fail it at once on ``PermanentFailure``."""
        error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_MAX]
        collection, message_id, token = lane.collection, message.id, message.claim_token
        try:
            if isinstance(exc, PermanentFailure):
                services.message_fail(
                    collection=collection, id=message_id, claim_token=token, error=error
                )
                outcome = "dead"
            else:
                state = services.message_nack(
                    collection=collection, id=message_id, claim_token=token, error=error
                ).state
                outcome = "dead" if state == "dead" else "retried"
        except LeaseLost:
            outcome = "lease_lost"
        self.record(lane, message, outcome, duration, error=error)

    def release(self, lane: Lane, messages: list[ClaimedMessage]) -> None:
        """Give back claims not started (graceful stop): attempt not spent."""
        for message in messages:
            try:
                services.message_release(
                    collection=lane.collection, id=message.id, claim_token=message.claim_token
                )
                outcome = "released"
            except LeaseLost:
                outcome = "lease_lost"
            self.record(lane, message, outcome, 0.0)

    def record_acks(
        self, lane: Lane, acks: list[tuple[ClaimedMessage, float]], result: AckBatchResult
    ) -> None:
        """Count and log the outcome of acking ``acks`` (message, duration):
        one INFO line for those acked, one per lease lost."""
        self.tally.add("acked", result.acked)
        self.tally.add("lease_lost", len(acks) - result.acked)
        self.tally.observe_many([duration for _, duration in acks])
        if not logger.isEnabledFor(logging.INFO):
            return
        acked = acks
        if result.acked != len(acks):
            landed = {r.id for r in result.results if r.acked}
            acked = [a for a in acks if a[0].id in landed]
            for message, duration in acks:
                if message.id not in landed:
                    self._log(lane, message, "lease_lost", duration)
        if acked:
            self._log_acked(lane, acked)
        if logger.isEnabledFor(logging.DEBUG):
            for message, duration in acked:
                self._log(lane, message, "acked", duration, level=logging.DEBUG)

    def record(
        self,
        lane: Lane,
        message: ClaimedMessage,
        outcome: str,
        duration: float,
        error: str | None = None,
    ) -> None:
        """Count one outcome and log its line."""
        self.tally.add(outcome)
        if outcome != "released":  # a released message's handler did not run
            self.tally.observe(duration)
        self._log(lane, message, outcome, duration, error)

    def _log(
        self,
        lane: Lane,
        message: ClaimedMessage,
        outcome: str,
        duration: float,
        error: str | None = None,
        level: int = logging.INFO,
    ) -> None:
        """One structured (JSON) line for one message's outcome. Built by hand:
        at full rate ``json.dumps`` of a dict is a visible cost (bench/README.md,
        "Measurements moved out of code comments (worker)"); only free text
        (worker id, error) needs escaping."""
        if logger.isEnabledFor(level):
            tail = f', "error": {json.dumps(error)}}}' if error is not None else "}"
            # The consuming app (a shared trigger's consumer); a slug needs no escaping.
            app = f'"app": "{lane.app_slug}", ' if lane.app_slug is not None else ""
            self._emit(level, (
                f'{{"event": "message", "outcome": "{outcome}", "id": "{message.id}", '
                f'"queue": "{lane.queue}", "handler": {json.dumps(lane.handler_name)}, {app}'
                f'"attempt": {message.attempt}, "duration_ms": {duration:.3f}, '
                f'"worker": {self._worker_json}{tail}'
            ))  # fmt: skip

    def _log_acked(self, lane: Lane, acks: list[tuple[ClaimedMessage, float]]) -> None:
        """One structured (JSON) line for a batch of acked messages: their
        ids, attempts and handler durations as parallel lists."""
        ids = ", ".join([f'"{m.id}"' for m, _ in acks])
        attempts = ", ".join([str(m.attempt) for m, _ in acks])
        durations = ", ".join([f"{d:.3f}" for _, d in acks])
        app = f'"app": "{lane.app_slug}", ' if lane.app_slug is not None else ""
        self._emit(logging.INFO, (
            f'{{"event": "messages", "outcome": "acked", "count": {len(acks)}, '
            f'"queue": "{lane.queue}", "handler": {json.dumps(lane.handler_name)}, {app}'
            f'"ids": [{ids}], "attempts": [{attempts}], "duration_ms": [{durations}], '
            f'"worker": {self._worker_json}}}'
        ))  # fmt: skip

    @staticmethod
    def _emit(level: int, line: str) -> None:
        # logger.log(level, line) without its search of the stack for the
        # caller's file and line (a large share of its cost, measured in
        # bench/README.md; the caller is always this module).
        logger.handle(logger.makeRecord(logger.name, level, __file__, 0, line, (), None,
                                        "_log"))  # fmt: skip
