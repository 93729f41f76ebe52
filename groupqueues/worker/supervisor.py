"""The supervisor: ``Worker``, the main thread's ``Runner`` loop. It starts
a fixed number of slot threads (``concurrency``, whatever the number of
consumers it serves) and the acker thread, gives the lane pool the consumers
to serve (re-read every RELOAD_EVERY seconds: apps and triggers come and go),
shows progress, and runs the housekeeping loops itself, one after another
(``runner.Interleaved``): the registry heartbeat, maintenance, the scheduler
and the outbox relay. On the first SIGTERM/SIGINT it stops claiming and waits
for in-flight work up to the grace period (a second signal exits at once:
the Runner base).

Threads, each with at most one database connection (``connections_needed``):
the main thread, ``concurrency`` slots, the acker (which also extends the
leases) and, on PostgreSQL with LISTEN, the process's listener.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from groupqueues.handlers import handlers
from groupqueues.worker.acker import Acker
from groupqueues.worker.heartbeat import Heartbeat, InFlight
from groupqueues.worker.lanes import Lane
from groupqueues.worker.outcomes import Outcomes, Tally
from groupqueues.worker.pool import LanePool
from groupqueues.worker.slots import Budget, SlotLoop
from queueproject import notify
from queueproject.conf import product_settings
from queueproject.logging_json import set_process_fields
from queueproject.runner import Interleaved, Loop, Runner, default_worker_id
from queueproject.workers_registry import Registration

logger = logging.getLogger("groupqueues.worker")

RELOAD_EVERY = 10.0  # seconds: how often the consumers are re-read
PROGRESS_EVERY = 0.5  # seconds
# Connections besides the slots': the main thread's (consumer reloads, the
# registry, maintenance, the scheduler, the outbox relay: one at a time) and
# the acker's (batched acks, lease extension). LISTEN adds the listener's.
AUX_CONNECTIONS = 2


def connections_needed(*, concurrency: int, listen: bool) -> int:
    """The most database connections a worker with ``concurrency`` slots
    opens (README, "Database connections"): one per slot, AUX_CONNECTIONS,
    and the LISTEN connection when ``listen``."""
    return concurrency + AUX_CONNECTIONS + (1 if listen else 0)


@dataclass
class WorkerOptions:
    worker_id: str = field(default_factory=default_worker_id)
    concurrency: int | None = None  # slot threads (None: QUEUE_WORKER_CONCURRENCY)
    max_messages: int | None = None
    until_empty: bool = False
    grace: float = 30.0
    maintenance: bool = True
    reload: bool = True  # re-read consumers (off when lanes were given explicitly)
    progress: TextIO | None = None  # --until-empty progress display (stderr)


class Worker(Runner):
    """Runs lanes until stopped (signal, ``--max-messages``, ``--until-empty``).
    ``lane_source`` (a callable returning fresh lanes) is re-read every
    RELOAD_EVERY seconds when ``options.reload``."""

    idle_timeout = PROGRESS_EVERY

    def __init__(self, lanes: list[Lane], options: WorkerOptions, *, lane_source: Any = None):
        super().__init__()
        self.options = options
        self.lane_source = lane_source
        self.concurrency = options.concurrency or product_settings().worker_concurrency
        self.tally = Tally(durations=product_settings().worker_registry)
        self.started = time.monotonic()
        outcomes = Outcomes(worker_id=options.worker_id, tally=self.tally)
        in_flight = InFlight()
        self.heartbeat = Heartbeat(in_flight=in_flight)
        self.acker = Acker(outcomes, each_round=self.heartbeat.tick)
        self.pool = LanePool(slots=self.concurrency, until_empty=options.until_empty)
        self.slot_loop = SlotLoop(
            worker_id=options.worker_id, until_empty=options.until_empty,
            stopping=self.stopping, request_stop=self.request_stop,
            budget=Budget(options.max_messages), in_flight=in_flight, acker=self.acker,
            outcomes=outcomes, pool=self.pool,
        )  # fmt: skip
        self._slots: list[threading.Thread] = []
        self._unknown_handlers: set[str] = set()
        self._last_reload = time.monotonic()
        self._last_progress = 0.0
        self.timed_out = False
        self.maintenance: Any = None
        self.scheduler: Any = None
        self.outbox_relay: Any = None
        self.housekeeping = Interleaved([], self.stopping)
        self._lanes = lanes
        set_process_fields(worker=options.worker_id)  # every JSON log line names it
        self.registration = Registration(
            worker_id=options.worker_id, kind="queue_worker", queues=self._queues,
            counts=self.tally.as_counts,
        )  # fmt: skip

    def run(self) -> None:
        # The threads start here, not in __init__: the command installs the
        # signal handlers in between, so a SIGTERM that arrives once a message
        # is claimed always finds them (it used to kill the process outright).
        self._start_thread(self.acker.run, "gq-acker")
        self._serve(self._lanes)
        self._slots = [self._start_thread(self.slot_loop.run, f"gq-slot-{i}")
                       for i in range(self.concurrency)]  # fmt: skip
        logger.info("%d slot(s) serve %d queue(s)", self.concurrency, len(self.pool.rotations()))
        self.housekeeping = Interleaved(self._housekeeping_loops(), self.stopping)
        self.housekeeping.prepare()
        super().run()

    # --- threads and loops ----------------------------------------------------------
    def _start_thread(self, target: Any, name: str, *args: Any) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        return thread

    def _housekeeping_loops(self) -> list[Loop]:
        """What the main thread runs between its own ticks: the registry
        heartbeat (after the lanes: its first row names their queues), and
        unless ``--no-maintenance`` maintenance, the scheduler and the outbox
        relay (each acts only as the leader, or claims its own rows)."""
        loops: list[Loop] = [self.registration] if self.registration.enabled else []
        if not self.options.maintenance:
            return loops
        from groupqueues.maintenance import Maintenance
        from store.outbox_conf import outbox_settings  # late: the store app sits above the queues
        from store.outbox_relay import OutboxRelay
        from store.schedule_tick import Scheduler

        owner = self.options.worker_id
        self.maintenance = Maintenance(owner=owner)
        self.scheduler = Scheduler(owner=owner)
        loops += [self.maintenance, self.scheduler]
        if outbox_settings().relay_in_worker:
            self.outbox_relay = OutboxRelay(relay_id=owner)
            loops.append(self.outbox_relay)
        return loops

    def _serve(self, lanes: list[Lane]) -> None:
        """Hand the pool these lanes (those whose handler is registered)."""
        runnable = []
        for lane in lanes:
            if lane.handler_name not in self.slot_loop.handlers:
                try:
                    self.slot_loop.handlers[lane.handler_name] = handlers.get(lane.handler_name)
                except LookupError as exc:
                    if lane.handler_name not in self._unknown_handlers:
                        self._unknown_handlers.add(lane.handler_name)
                        logger.error("lanes of %s skipped: %s", lane.handler_name, exc)
                    continue
            runnable.append(lane)
        added, retired = self.pool.update(runnable)
        for rotation in added:
            logger.info("running %s (%d consumer(s) in turn, up to %d slot(s) at once)",
                        rotation, len(rotation.lanes), rotation.cap)  # fmt: skip
        for rotation in retired:
            logger.info("no longer running %s", rotation.queue)

    # --- the main loop (Runner) -------------------------------------------------
    def tick(self) -> bool:
        now = time.monotonic()
        if self.lane_source and self.options.reload and now - self._last_reload > RELOAD_EVERY:
            self._last_reload = now
            self._serve(self.lane_source())
        self._show_progress()
        self.housekeeping.turn()
        if self.options.until_empty and not self.pool.rotations():
            self.request_stop()  # nothing to consume: empty by definition
        return False

    def wait(self, timeout: float) -> None:
        self.stopping.wait(min(timeout, self.housekeeping.next_due()))

    def request_stop(self) -> None:
        super().request_stop()
        self.pool.wake_all()

    def on_stop(self) -> None:
        """Wait for the slots (they finish their handler, release the rest and
        ack) within the grace period; then the acker; then stop the
        housekeeping loops (maintenance and the scheduler resign, the registry
        row goes)."""
        deadline = time.monotonic() + self.options.grace
        for thread in self._slots:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                self.timed_out = True
        if self.timed_out:
            logger.warning("grace period of %.0fs over; handlers still running", self.options.grace)
        self.acker.finish(max(1.0, deadline - time.monotonic()))
        self.pool.close()
        self.housekeeping.stop()

    def _queues(self) -> list[str]:
        """The queues this worker serves now (for its registry row)."""
        return sorted({rotation.queue for rotation in self.pool.rotations()})

    # --- progress -------------------------------------------------------------------
    def summary(self) -> str:
        return self.tally.summary(time.monotonic() - self.started)

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
    settings = product_settings()
    pooler = " (behind a transaction pooler)" if settings.transaction_pooler else ""
    return f"polling every {settings.worker_poll_interval:g}s{pooler}"
