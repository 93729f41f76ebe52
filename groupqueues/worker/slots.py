"""The slot loop: what each of a worker's ``concurrency`` slot threads runs.

A slot takes a due rotation (the consumers of a collection that claim alike)
from the lane pool (``pool``), claims up to ``batch`` messages in one
statement, runs the handler on each as the rotation's next consumer in turn
(``lanes.Rotation``), nacks (backoff) or fails each failure at once, and acks
the successes together with its next claim (one statement,
``message_ack_batch_and_claim``), whose messages go to the next consumer in
turn. Successes it cannot ack that way (slow handlers, a stop, the end of
``--max-messages``, a lost connection, another rotation's turn) go to the
acker. When stopping a slot releases the messages it has not started
(attempt not spent). Idle slots wait in the pool (LISTEN/NOTIFY or polling).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator

from django.db import DatabaseError, connections

from groupqueues import services
from groupqueues.handlers import Delivery, Handler
from groupqueues.services import ClaimedMessage
from groupqueues.worker.acker import Ack, Acker, Settled
from groupqueues.worker.heartbeat import Batch, InFlight
from groupqueues.worker.lanes import Lane
from groupqueues.worker.outcomes import Outcomes
from groupqueues.worker.pool import LanePool, Turn
from queueproject.runner import Resilient

ACK_FLUSH_EVERY = 0.1  # seconds: successes wait at most this long for the batch to end


class Budget:
    """What is left of ``--max-messages`` (None: unlimited), reserved per claim."""

    def __init__(self, limit: int | None) -> None:
        self._left = limit
        self._lock = threading.Lock()

    def take(self, wanted: int) -> int:
        with self._lock:
            if self._left is None:
                return wanted
            got = min(wanted, self._left)
            self._left -= got
            return got

    def give_back(self, n: int) -> None:
        with self._lock:
            if self._left is not None:
                self._left += n


class SlotLoop:
    """Runs slots (``run`` is a slot thread's target) for one worker, whose
    parts it shares: ``stopping`` ends every slot, ``request_stop`` is called
    when the budget is spent or, with ``until_empty``, nothing is left;
    ``pool`` says which collection to claim from next. ``handlers`` maps the
    handler names of the lanes run to their handlers (the supervisor fills it
    before it gives the pool their lanes)."""

    def __init__(
        self,
        *,
        worker_id: str,
        until_empty: bool,
        stopping: threading.Event,
        request_stop: Callable[[], None],
        budget: Budget,
        in_flight: InFlight,
        acker: Acker,
        outcomes: Outcomes,
        pool: LanePool,
    ) -> None:
        self.worker_id, self.until_empty = worker_id, until_empty
        self.stopping, self.request_stop = stopping, request_stop
        self.budget, self.in_flight, self.acker, self.outcomes = budget, in_flight, acker, outcomes
        self.pool = pool
        self.handlers: dict[str, Handler] = {}

    def run(self) -> None:
        """Claim and handle, a due collection at a time, until stopped;
        survive a lost database connection."""
        guard = Resilient(self.stopping, f"slot {threading.current_thread().name}",
                          survive_all=True)  # fmt: skip
        try:
            while (turn := self.pool.take(self.stopping)) is not None:
                worked = guard.turn(functools.partial(self._turn, turn))
                self.pool.done(turn, worked=worked is not False)
                if worked is False:
                    self._idle()
        finally:
            connections.close_all()  # this thread's connections

    def _idle(self) -> None:
        """Nothing was claimable: with --until-empty, end once every
        collection came back empty and no slot holds work."""
        if self.until_empty and self.in_flight.idle() and self.pool.all_empty():
            self.request_stop()

    def _turn(self, turn: Turn) -> bool:
        """Claim one batch for the rotation and handle it as its next
        consumer in turn (and the chain after it). False when nothing was
        claimed."""
        rotation = turn.rotation
        wanted = self.budget.take(rotation.batch)
        if not wanted:  # --max-messages reached: stop once the last claims are handled
            if self.in_flight.idle():
                self.request_stop()
            return False
        with self.in_flight.busy():
            claimed = services.message_claim(
                collection=rotation.collection, worker_id=self.worker_id, n=wanted,
                visibility_timeout=rotation.visibility_timeout,
            )  # fmt: skip
            self.outcomes.tally.add_claimed(len(claimed))
            self.budget.give_back(wanted - len(claimed))
            if claimed:
                self._handle_chain(turn, rotation.next(), claimed)
            return bool(claimed)

    @contextlib.contextmanager
    def _holding(self, lane: Lane, messages: list[ClaimedMessage]) -> Iterator[Batch]:
        """Hold claimed messages for the heartbeat while a slot works on them;
        at the end, release those still held (not started: attempt not spent)."""
        batch = Batch(lane, {m.id: m for m in messages})
        try:
            with self.in_flight.holding(batch):
                yield batch
        finally:
            self.outcomes.release(lane, list(batch.held.values()))

    def _handle_chain(self, turn: Turn, lane: Lane, claimed: list[ClaimedMessage]) -> None:
        """Handle a batch as ``lane``, then ack its successes together with
        the next claim (``message_ack_batch_and_claim``: one statement and one
        commit per batch instead of a claim and an ack), whose messages go to
        the rotation's next consumer in turn, and so on while claims come
        back. A batch without successes, a short batch (the queue ran dry:
        chaining gains nothing, and the slot's next claim, when a message
        arrives, should not wait for this ack's commit), the budget, a stop
        and another rotation's turn (``pool.should_yield``) end the chain (the
        successes go to the acker then)."""
        while claimed:
            with self._holding(lane, claimed) as batch:
                acks = self._handle_batch(lane, claimed, batch)
                if not acks:
                    return
                short = len(claimed) < lane.batch
                ending = short or self.stopping.is_set() or self.pool.should_yield(turn)
                wanted = 0 if ending else self.budget.take(lane.batch)
                if not wanted:
                    self._hand_over(batch, acks)
                    return
                claimed = self._ack_and_claim(lane, batch, acks, wanted)
            if claimed:  # the lanes of a rotation claim alike: only the name changes
                lane = turn.rotation.next()

    def _ack_and_claim(
        self, lane: Lane, batch: Batch, acks: list[Ack], wanted: int
    ) -> list[ClaimedMessage]:
        """Ack ``acks`` and claim up to ``wanted`` more in one statement; the
        acks are counted and logged on the acker thread. On a database error
        the acker retries the acks and the error goes on to the slot's guard."""
        # No longer held while being acked, as with _hand_over: a heartbeat
        # extend racing the ack would report a lost lease.
        for _, message, _ in acks:
            batch.held.pop(message.id, None)
        pairs = [(m.id, m.claim_token) for _, m, _ in acks]
        try:
            result = services.message_ack_batch_and_claim(
                collection=lane.collection, acks=pairs, worker_id=self.worker_id,
                n=wanted, visibility_timeout=lane.visibility_timeout,
            )  # fmt: skip
        except DatabaseError:
            self.budget.give_back(wanted)
            self.acker.put(acks)
            raise
        self.acker.put(Settled(lane, [(m, d) for _, m, d in acks], result.acks))
        self.outcomes.tally.add_claimed(len(result.messages))
        self.budget.give_back(wanted - len(result.messages))
        return result.messages

    def _handle_batch(self, lane: Lane, claimed: list[ClaimedMessage], batch: Batch) -> list[Ack]:
        """Run the handler on each claimed message in turn (failures are nacked
        or failed at once); the successes, to be acked. With slow handlers the
        successes go to the acker every ACK_FLUSH_EVERY instead of waiting for
        the end of the batch, and whatever an error interrupts goes there too."""
        acks: list[Ack] = []
        first_success = 0.0
        try:
            for message in claimed:
                if self.stopping.is_set():
                    break
                ok, duration = self._run_handler(lane, message)
                if not ok:
                    batch.held.pop(message.id, None)
                    continue
                acks.append((lane, message, duration))
                first_success = first_success or time.monotonic()
                if time.monotonic() - first_success > ACK_FLUSH_EVERY:  # slow handlers
                    self._hand_over(batch, acks)
                    acks, first_success = [], 0.0
        except BaseException:
            self._hand_over(batch, acks)
            raise
        return acks

    def _hand_over(self, batch: Batch, acks: list[Ack]) -> None:
        """Pass successes to the acker (the heartbeat no longer extends them)."""
        if acks:
            self.acker.put(acks)
            for _, message, _ in acks:
                batch.held.pop(message.id, None)

    def _run_handler(self, lane: Lane, message: ClaimedMessage) -> tuple[bool, float]:
        """Run the handler; on failure nack (backoff) or fail at once. Returns
        (succeeded, duration in ms); successes are acked by the caller."""
        delivery = Delivery(
            id=message.id, payload=message.payload, attempt=message.attempt,
            max_attempts=message.max_attempts, priority=message.priority,
            enqueued_at=message.enqueued_at, enqueued_by=message.enqueued_by, queue=lane.queue,
            app_slug=lane.app_slug, worker_id=self.worker_id, last_error=message.last_error,
        )  # fmt: skip
        start = time.perf_counter()
        try:
            self.handlers[lane.handler_name](delivery)
        except Exception as exc:
            duration = (time.perf_counter() - start) * 1000
            self.outcomes.fail(lane, message, exc, duration)
            return False, duration
        return True, (time.perf_counter() - start) * 1000
