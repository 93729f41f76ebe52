"""The group queue worker behind ``manage.py queue_worker`` (SPEC §2, §5).

Threads and what they do:

- the main thread runs the ``Runner`` loop: it supervises the slot threads,
  reloads the consumers now and then, shows progress, and on the first
  SIGTERM/SIGINT stops claiming and waits for in-flight work up to the grace
  period (a second signal exits at once: the Runner base);
- ``concurrency`` slot threads per lane (a lane is one consumer: a collection
  and a handler). A slot claims up to ``batch`` messages in one statement,
  runs the handler on each in turn, nacks (backoff) or fails each failure at
  once, and acks the successes together with its next claim (one statement,
  ``message_ack_batch_and_claim``). Successes it cannot ack that way (slow
  handlers, a stop, the end of ``--max-messages``, a lost connection) go to
  the acker thread, which acks whatever has queued up in one
  ``message_ack_batch`` per collection. When stopping a slot releases the
  messages it has not started (attempt not spent).
  Idle slots sleep on the collection's LISTEN/NOTIFY channel (or poll);
- one heartbeat thread extends the leases of claimed messages every third of
  their visibility timeout while they wait or run;
- one maintenance thread (``groupqueues.maintenance``) that acts only while
  this process holds the maintenance lease.

A crash leaves the claims to expire; any worker claims them again afterwards.
Each thread survives a lost database connection: it drops the connection,
backs off and carries on. Only ``groupqueues.services`` touches messages.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from django.db import DatabaseError, connections

from groupqueues import services
from groupqueues.exceptions import CollectionNotFound, LeaseLost
from groupqueues.handlers import Delivery, Handler, PermanentFailure, handlers
from groupqueues.models import Collection, Consumer
from groupqueues.services import AckBatchResult, ClaimedMessage
from groupqueues.trigger_services import trigger_collection
from queueproject import notify
from queueproject.conf import product_settings
from queueproject.runner import Resilient, Runner, default_worker_id, drop_connections

logger = logging.getLogger("groupqueues.worker")

IDLE_RECHECK = 1.0  # seconds: an idle slot re-checks at least this often (delayed messages)
UNTIL_EMPTY_RECHECK = 0.05  # seconds: how often an idle slot re-checks with --until-empty
RELOAD_EVERY = 10.0  # seconds: how often the consumers are re-read
PROGRESS_EVERY = 0.5  # seconds
ACK_FLUSH_EVERY = 0.1  # seconds: successes wait at most this long for the batch to end
MAINTENANCE_RESIGN_WAIT = 2.0  # seconds to let the maintenance thread resign at exit
HEARTBEAT_TICK = 0.2  # seconds: how often the heartbeat looks for leases to extend
ERROR_TEXT_MAX = 2000


@dataclass(frozen=True)
class Lane:
    """One consumer as a worker runs it: a handler on a collection."""

    collection: Collection
    queue: str  # "GROUP/NAME"
    handler_name: str
    batch: int
    concurrency: int
    visibility_timeout: int
    app_slug: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.collection.pk, self.handler_name, self.app_slug, self.batch,
                self.concurrency, self.visibility_timeout)  # fmt: skip

    def __str__(self) -> str:
        who = f" as {self.app_slug}" if self.app_slug else ""
        return f"{self.queue} → {self.handler_name}{who}"


def lanes_of_consumers(
    consumers: Iterable[Consumer],
    *,
    queues: set[str] | None = None,
    batch: int | None = None,
    concurrency: int | None = None,
) -> list[Lane]:
    """Lanes for consumers of enabled triggers (those on ``queues`` only, when
    given); ``batch``/``concurrency`` override the triggers'. Consumers whose
    queue no longer resolves are skipped with a warning."""
    lanes = []
    for consumer in consumers:
        trigger = consumer.trigger
        try:
            collection = trigger_collection(trigger=trigger)
        except CollectionNotFound:
            logger.warning("trigger %s: no such queue; skipped", trigger)
            continue
        queue = f"{collection.group.slug}/{collection.name}"
        if queues is not None and queue not in queues:
            continue
        lanes.append(
            Lane(
                collection=collection, queue=queue, handler_name=trigger.handler,
                batch=batch or trigger.batch_size, concurrency=concurrency or trigger.concurrency,
                visibility_timeout=trigger.visibility_timeout or collection.visibility_timeout,
                app_slug=consumer.app.slug if consumer.app_id else None,  # type: ignore[union-attr]
            )
        )  # fmt: skip
    return lanes


def lanes_for_handler(
    collections: Iterable[Collection], handler_name: str, *, batch: int, concurrency: int
) -> list[Lane]:
    """Lanes running ``handler_name`` on the given queues without a trigger."""
    return [
        Lane(collection=c, queue=f"{c.group.slug}/{c.name}", handler_name=handler_name,
             batch=batch, concurrency=concurrency, visibility_timeout=c.visibility_timeout)
        for c in collections
    ]  # fmt: skip


# ---------------------------------------------------------------- bookkeeping


class Tally:
    """Outcome counters shared by the slots (thread-safe)."""

    OUTCOMES = ("acked", "retried", "dead", "released", "lease_lost")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(self.OUTCOMES, 0)

    def add(self, outcome: str, n: int = 1) -> None:
        with self._lock:
            self.counts[outcome] += n

    @property
    def processed(self) -> int:
        """Messages whose handler ran to an outcome (released ones did not run)."""
        c = self.counts
        return c["acked"] + c["retried"] + c["dead"] + c["lease_lost"]


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


@dataclass(eq=False)
class Batch:
    """The claimed messages a slot holds (for the heartbeat): ``held`` are
    those not yet acked, nacked, failed or released."""

    lane: Lane
    held: dict[Any, ClaimedMessage]
    extended_at: float = field(default_factory=time.monotonic)


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
    a slot's next batch does not wait for a hundred log lines."""

    ROUND = 500
    IDLE = 0.05  # seconds

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.pending: queue.SimpleQueue[
            list[tuple[Lane, ClaimedMessage, float]] | Settled | None
        ] = queue.SimpleQueue()
        self.done = threading.Event()

    def put(self, acks: list[tuple[Lane, ClaimedMessage, float]] | Settled) -> None:
        self.pending.put(acks)

    def finish(self, timeout: float) -> None:
        """Ack what is queued, then stop the thread."""
        self.pending.put(None)
        self.done.wait(timeout)

    def run(self) -> None:
        backlog: list[tuple[Lane, ClaimedMessage, float]] = []
        closing = False
        try:
            while not (closing and not backlog):
                closing = self._collect(backlog) or closing
                backlog = self._flush(backlog)
        finally:
            connections.close_all()
            self.done.set()

    def _collect(self, backlog: list[tuple[Lane, ClaimedMessage, float]]) -> bool:
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
                self.worker.record_acks(item.lane, item.acks, item.result)
            elif item is not None:
                backlog.extend(item)
        return None in items

    def _flush(
        self, backlog: list[tuple[Lane, ClaimedMessage, float]]
    ) -> list[tuple[Lane, ClaimedMessage, float]]:
        """Ack the backlog per collection; what could not be sent (database
        unavailable) is returned to retry."""
        by_lane: dict[Lane, list[tuple[ClaimedMessage, float]]] = {}
        for lane, message, duration in backlog:
            by_lane.setdefault(lane, []).append((message, duration))
        left: list[tuple[Lane, ClaimedMessage, float]] = []
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
        self.worker.record_acks(lane, acks, result)


# --------------------------------------------------------------------- worker


@dataclass
class WorkerOptions:
    worker_id: str = field(default_factory=default_worker_id)
    max_messages: int | None = None
    until_empty: bool = False
    grace: float = 30.0
    maintenance: bool = True
    reload: bool = True  # re-read consumers (off when lanes were given explicitly)
    progress: TextIO | None = None  # --until-empty progress display (stderr)


class Worker(Runner):
    """Runs lanes until stopped (signal, ``--max-messages``, ``--until-empty``)."""

    idle_timeout = PROGRESS_EVERY

    def __init__(self, lanes: list[Lane], options: WorkerOptions, *, lane_source: Any = None):
        super().__init__()
        self.options = options
        self.lane_source = lane_source  # callable returning fresh lanes (reload)
        self.tally = Tally()
        self.budget = Budget(options.max_messages)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._busy = 0  # slots holding or claiming messages
        self._batches: set[Batch] = set()
        self._subs: list[notify.Subscription] = []
        self._slots: dict[tuple[Any, ...], list[threading.Thread]] = {}
        self._lane_stops: dict[tuple[Any, ...], threading.Event] = {}
        self._handlers: dict[str, Handler] = {}
        self._last_reload = time.monotonic()
        self._last_progress = 0.0
        self.timed_out = False
        self.maintenance: Any = None
        self._worker_json = json.dumps(options.worker_id)
        self.acker = Acker(self)
        self._lanes = lanes

    def run(self) -> None:
        # The threads start here, not in __init__: the command installs the
        # signal handlers in between, so a SIGTERM that arrives once a message
        # is claimed always finds them (it used to kill the process outright).
        self._start_thread(self.acker.run, "gq-acker")
        self._start_lanes(self._lanes)
        self._start_thread(self._heartbeat, "gq-heartbeat")
        if self.options.maintenance:
            self._start_maintenance()
        super().run()

    # --- threads --------------------------------------------------------------
    def _start_thread(self, target: Any, name: str, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        return thread

    def _start_lanes(self, lanes: list[Lane]) -> None:
        for lane in lanes:
            if lane.key in self._slots:
                continue
            try:
                self._handlers[lane.handler_name] = handlers.get(lane.handler_name)
            except LookupError as exc:
                logger.error("lane %s skipped: %s", lane, exc)
                continue
            stop = self._lane_stops[lane.key] = threading.Event()
            self._slots[lane.key] = [
                self._start_thread(self._run_slot, f"gq-slot-{lane.queue}-{i}", lane, stop)
                for i in range(lane.concurrency)
            ]
            logger.info("running %s (concurrency %d, batch %d)", lane, lane.concurrency, lane.batch)

    def _start_maintenance(self) -> None:
        from groupqueues.maintenance import Maintenance

        self.maintenance = Maintenance(owner=self.options.worker_id)
        self._maintenance_thread = self._start_thread(
            self.maintenance.run_in_thread, "gq-maintenance"
        )

    def _reload(self) -> None:
        """Start lanes for new consumers and stop lanes whose consumer went away."""
        lanes = {lane.key: lane for lane in self.lane_source()}
        for key in [k for k in self._slots if k not in lanes]:
            self._lane_stops.pop(key).set()
            del self._slots[key]
        self._start_lanes(list(lanes.values()))

    # --- the main loop (Runner) -------------------------------------------------
    def tick(self) -> bool:
        now = time.monotonic()
        if self.lane_source and self.options.reload and now - self._last_reload > RELOAD_EVERY:
            self._last_reload = now
            self._reload()
        self._show_progress()
        if self.options.until_empty and not self._slots:
            self.request_stop()  # nothing to consume: empty by definition
        return False

    def wait(self, timeout: float) -> None:
        self.stopping.wait(timeout)

    def request_stop(self) -> None:
        super().request_stop()
        for sub in list(self._subs):
            sub.event.set()  # wake idle slots now

    def on_stop(self) -> None:
        """Wait for the slots (they finish their handler, release the rest and
        ack) within the grace period; then stop maintenance."""
        deadline = time.monotonic() + self.options.grace
        for thread in [t for slots in self._slots.values() for t in slots]:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                self.timed_out = True
        if self.timed_out:
            logger.warning("grace period of %.0fs over; handlers still running", self.options.grace)
        self.acker.finish(max(1.0, deadline - time.monotonic()))
        if self.maintenance is not None:
            self.maintenance.request_stop()
            self._maintenance_thread.join(MAINTENANCE_RESIGN_WAIT)  # hand leadership over

    # --- a slot -------------------------------------------------------------------
    def _run_slot(self, lane: Lane, lane_stop: threading.Event) -> None:
        """Claim and handle until stopped; survive a lost database connection."""
        sub = self._subscribe(lane)
        guard = Resilient(self.stopping, f"slot {lane}", survive_all=True)
        try:
            while not (self.stopping.is_set() or lane_stop.is_set()):
                worked = guard.turn(lambda: self._turn(lane))
                if worked is False:
                    self._idle(sub)
        finally:
            self._subs.remove(sub)
            sub.close()
            connections.close_all()  # this thread's connections

    def _subscribe(self, lane: Lane) -> notify.Subscription:
        sub = notify.subscribe(lane.collection.wake_channel)
        self._subs.append(sub)
        return sub

    def _idle(self, sub: notify.Subscription) -> None:
        """Nothing was claimable: end on --until-empty once no slot holds work,
        otherwise sleep until notified (or the re-check time)."""
        if self.options.until_empty:
            with self._lock:
                drained = self._busy == 0
            if drained:
                self.request_stop()
                return
            sub.wait(UNTIL_EMPTY_RECHECK)
            return
        sub.wait(IDLE_RECHECK)

    def _turn(self, lane: Lane) -> bool:
        """Claim one batch and handle it. False when nothing was claimed."""
        wanted = self.budget.take(lane.batch)
        if not wanted:  # --max-messages reached: stop once the last claims are handled
            with self._lock:
                if self._busy == 0:
                    self.request_stop()
            return False
        with self._lock:
            self._busy += 1
        try:
            claimed = services.message_claim(
                collection=lane.collection, worker_id=self.options.worker_id, n=wanted,
                visibility_timeout=lane.visibility_timeout,
            )  # fmt: skip
            self.budget.give_back(wanted - len(claimed))
            self._handle_chain(lane, claimed)
            return bool(claimed)
        finally:
            with self._lock:
                self._busy -= 1

    @contextlib.contextmanager
    def _holding(self, lane: Lane, messages: list[ClaimedMessage]) -> Iterator[Batch]:
        """Hold claimed messages for the heartbeat while a slot works on them;
        at the end, release those still held (not started: attempt not spent)."""
        batch = Batch(lane, {m.id: m for m in messages})
        with self._lock:
            self._batches.add(batch)
        try:
            yield batch
        finally:
            with self._lock:
                self._batches.discard(batch)
            self._release(lane, list(batch.held.values()))

    def _handle_chain(self, lane: Lane, claimed: list[ClaimedMessage]) -> None:
        """Handle a batch, then ack its successes together with the next claim
        (``message_ack_batch_and_claim``: one statement and one commit per
        batch instead of a claim and an ack), and so on while claims come
        back. A batch without successes, the budget and a stop end the chain
        (the successes go to the acker then)."""
        while claimed:
            with self._holding(lane, claimed) as batch:
                acks = self._handle_batch(lane, claimed, batch)
                if not acks:
                    return
                wanted = 0 if self.stopping.is_set() else self.budget.take(lane.batch)
                if not wanted:
                    self._hand_over(batch, acks)
                    return
                # No longer held while being acked, as with _hand_over: a
                # heartbeat extend racing the ack would report a lost lease.
                for _, message, _ in acks:
                    batch.held.pop(message.id, None)
                pairs = [(m.id, m.claim_token) for _, m, _ in acks]
                try:
                    result = services.message_ack_batch_and_claim(
                        collection=lane.collection, acks=pairs, worker_id=self.options.worker_id,
                        n=wanted, visibility_timeout=lane.visibility_timeout,
                    )  # fmt: skip
                except DatabaseError:
                    self.budget.give_back(wanted)
                    self.acker.put(acks)  # the acker retries them
                    raise
                self.acker.put(Settled(lane, [(m, d) for _, m, d in acks], result.acks))
                self.budget.give_back(wanted - len(result.messages))
                claimed = result.messages

    def _handle_batch(
        self, lane: Lane, claimed: list[ClaimedMessage], batch: Batch
    ) -> list[tuple[Lane, ClaimedMessage, float]]:
        """Run the handler on each claimed message in turn (failures are nacked
        or failed at once); the successes, to be acked. With slow handlers the
        successes go to the acker every ACK_FLUSH_EVERY instead of waiting for
        the end of the batch, and whatever an error interrupts goes there too."""
        acks: list[tuple[Lane, ClaimedMessage, float]] = []
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

    def record_acks(
        self, lane: Lane, acks: list[tuple[ClaimedMessage, float]], result: AckBatchResult
    ) -> None:
        """Count and log the outcome of acking ``acks`` (message, duration)."""
        self.tally.add("acked", result.acked)
        self.tally.add("lease_lost", len(acks) - result.acked)
        if logger.isEnabledFor(logging.INFO):
            landed = {r.id for r in result.results if r.acked}
            for message, duration in acks:
                outcome = "acked" if message.id in landed else "lease_lost"
                self._log(lane, message, outcome, duration)

    def _hand_over(self, batch: Batch, acks: list[tuple[Lane, ClaimedMessage, float]]) -> None:
        """Pass successes to the acker (the heartbeat no longer extends them)."""
        if acks:
            self.acker.put(acks)
            for _, message, _ in acks:
                batch.held.pop(message.id, None)

    # --- outcomes -------------------------------------------------------------------
    def _run_handler(self, lane: Lane, message: ClaimedMessage) -> tuple[bool, float]:
        """Run the handler; on failure nack (backoff) or fail at once. Returns
        (succeeded, duration in ms); successes are acked by the caller."""
        delivery = Delivery(
            id=message.id, payload=message.payload, attempt=message.attempt,
            max_attempts=message.max_attempts, priority=message.priority,
            enqueued_at=message.enqueued_at, enqueued_by=message.enqueued_by, queue=lane.queue,
            app_slug=lane.app_slug, worker_id=self.options.worker_id,
            last_error=message.last_error,
        )  # fmt: skip
        start = time.perf_counter()
        try:
            self._handlers[lane.handler_name](delivery)
        except Exception as exc:
            duration = (time.perf_counter() - start) * 1000
            self._settle_failure(lane, message, exc, duration)
            return False, duration
        return True, (time.perf_counter() - start) * 1000

    def _settle_failure(
        self, lane: Lane, message: ClaimedMessage, exc: Exception, duration: float
    ) -> None:
        error = f"{type(exc).__name__}: {exc}"[:ERROR_TEXT_MAX]
        common = {"collection": lane.collection, "id": message.id,
                  "claim_token": message.claim_token}  # fmt: skip
        try:
            if isinstance(exc, PermanentFailure):
                services.message_fail(**common, error=error)
                outcome = "dead"
            else:
                state = services.message_nack(**common, error=error).state
                outcome = "dead" if state == "dead" else "retried"
        except LeaseLost:
            outcome = "lease_lost"
        self.tally.add(outcome)
        self._log(lane, message, outcome, duration, error=error)

    def _release(self, lane: Lane, messages: list[ClaimedMessage]) -> None:
        """Give back claims not started (graceful stop): attempt not spent."""
        for message in messages:
            try:
                services.message_release(
                    collection=lane.collection, id=message.id, claim_token=message.claim_token
                )
                outcome = "released"
            except LeaseLost:
                outcome = "lease_lost"
            self.tally.add(outcome)
            self._log(lane, message, outcome, 0.0)

    def _log(
        self,
        lane: Lane,
        message: ClaimedMessage,
        outcome: str,
        duration: float,
        error: str | None = None,
    ) -> None:
        """One structured (JSON) line per message outcome. Built by hand: at
        10,000 messages a second ``json.dumps`` of a dict is a visible cost;
        only free text (worker id, error) needs escaping."""
        if logger.isEnabledFor(logging.INFO):
            tail = f', "error": {json.dumps(error)}}}' if error is not None else "}"
            line = (
                f'{{"event": "message", "outcome": "{outcome}", "id": "{message.id}", '
                f'"queue": "{lane.queue}", "handler": {json.dumps(lane.handler_name)}, '
                f'"attempt": {message.attempt}, "duration_ms": {duration:.3f}, '
                f'"worker": {self._worker_json}{tail}'
            )
            # logger.info(line) without its search of the stack for the
            # caller's file and line (a third of its cost; always this line).
            logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, line,
                                            None, None, "_log"))  # fmt: skip

    # --- heartbeat ------------------------------------------------------------------
    def _heartbeat(self) -> None:
        """Extend held leases every third of their visibility timeout."""
        while not (self.stopping.is_set() and not self._busy):
            time.sleep(HEARTBEAT_TICK)
            now = time.monotonic()
            with self._lock:
                due = [b for b in self._batches
                       if now - b.extended_at >= b.lane.visibility_timeout / 3]  # fmt: skip
            for batch in due:
                batch.extended_at = now
                try:
                    self._extend(batch)
                except DatabaseError as exc:  # retried at the next tick
                    logger.warning("heartbeat: database unavailable (%s); retrying", exc)
                    drop_connections()
                except Exception:  # never let the heartbeat die
                    logger.exception("heartbeat failed")
        connections.close_all()

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

    # --- progress -------------------------------------------------------------------
    def summary(self) -> str:
        elapsed = time.monotonic() - self.started
        c = self.tally.counts
        rate = self.tally.processed / elapsed if elapsed > 0 else 0.0
        return (
            f"processed={self.tally.processed} acked={c['acked']} retried={c['retried']} "
            f"dead={c['dead']} released={c['released']} lease_lost={c['lease_lost']} "
            f"seconds={elapsed:.2f} rate={rate:.0f}/s"
        )

    def _show_progress(self, final: bool = False) -> None:
        out = self.options.progress
        if out is None:
            return
        now = time.monotonic()
        if not final and now - self._last_progress < PROGRESS_EVERY:
            return
        self._last_progress = now
        end = "\n" if final or not out.isatty() else ""
        out.write(f"\r{self.summary()}{end}")
        out.flush()


def poll_mode() -> str:
    """How idle slots wake up, for the start-up log line."""
    if notify.listen_available():
        return "LISTEN/NOTIFY"
    return f"polling every {product_settings().worker_poll_interval:g}s"
