"""The supervisor: ``Worker``, the main thread's ``Runner`` loop. It starts
the other threads, supervises the slots (a lane's slots start when its
consumer appears and stop when it goes away), shows progress, and on the
first SIGTERM/SIGINT stops claiming and waits for in-flight work up to the
grace period (a second signal exits at once: the Runner base)."""

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
from groupqueues.worker.slots import Budget, SlotLoop
from queueproject import notify
from queueproject.conf import product_settings
from queueproject.logging_json import set_process_fields
from queueproject.runner import Runner, default_worker_id
from queueproject.workers_registry import Registration

logger = logging.getLogger("groupqueues.worker")

RELOAD_EVERY = 10.0  # seconds: how often the consumers are re-read
PROGRESS_EVERY = 0.5  # seconds
MAINTENANCE_RESIGN_WAIT = 2.0  # seconds to let the maintenance thread resign at exit


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
    """Runs lanes until stopped (signal, ``--max-messages``, ``--until-empty``).
    ``lane_source`` (a callable returning fresh lanes) is re-read every
    RELOAD_EVERY seconds when ``options.reload``."""

    idle_timeout = PROGRESS_EVERY

    def __init__(self, lanes: list[Lane], options: WorkerOptions, *, lane_source: Any = None):
        super().__init__()
        self.options = options
        self.lane_source = lane_source
        self.tally = Tally(durations=product_settings().worker_registry)
        self.started = time.monotonic()
        outcomes = Outcomes(worker_id=options.worker_id, tally=self.tally)
        self.acker = Acker(outcomes)
        in_flight = InFlight()
        self.slot_loop = SlotLoop(
            worker_id=options.worker_id, until_empty=options.until_empty,
            stopping=self.stopping, request_stop=self.request_stop,
            budget=Budget(options.max_messages), in_flight=in_flight, acker=self.acker,
            outcomes=outcomes,
        )  # fmt: skip
        self.heartbeat = Heartbeat(in_flight=in_flight, stopping=self.stopping)
        self._slots: dict[tuple[Any, ...], list[threading.Thread]] = {}
        self._lane_stops: dict[tuple[Any, ...], threading.Event] = {}
        self._running: dict[tuple[Any, ...], Lane] = {}  # lanes whose slots run
        self._last_reload = time.monotonic()
        self._last_progress = 0.0
        self.timed_out = False
        self.maintenance: Any = None
        self.scheduler: Any = None
        self.outbox_relay: Any = None
        self._leader_threads: list[threading.Thread] = []  # maintenance, scheduler
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
        self._start_lanes(self._lanes)
        self.registration.start()  # after the lanes: its first row names their queues
        self._start_thread(self.heartbeat.run, "gq-heartbeat")
        if self.options.maintenance:
            self._start_maintenance()
            self._start_scheduler()
            self._start_outbox_relay()
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
                self.slot_loop.handlers[lane.handler_name] = handlers.get(lane.handler_name)
            except LookupError as exc:
                logger.error("lane %s skipped: %s", lane, exc)
                continue
            self._running[lane.key] = lane
            stop = self._lane_stops[lane.key] = threading.Event()
            self._slots[lane.key] = [
                self._start_thread(self.slot_loop.run, f"gq-slot-{lane.queue}-{i}", lane, stop)
                for i in range(lane.concurrency)
            ]
            logger.info("running %s (concurrency %d, batch %d)", lane, lane.concurrency, lane.batch)

    def _start_maintenance(self) -> None:
        from groupqueues.maintenance import Maintenance

        self.maintenance = Maintenance(owner=self.options.worker_id)
        self._leader_threads.append(
            self._start_thread(self.maintenance.run_in_thread, "gq-maintenance")
        )

    def _start_scheduler(self) -> None:
        from store.schedule_tick import Scheduler  # late: the store app sits above the queues

        self.scheduler = Scheduler(owner=self.options.worker_id)
        self._leader_threads.append(
            self._start_thread(self.scheduler.run_in_thread, "gq-scheduler")
        )

    def _start_outbox_relay(self) -> None:
        from store.outbox_conf import outbox_settings  # late: the store app sits above the queues
        from store.outbox_relay import OutboxRelay

        if outbox_settings().relay_in_worker:
            self.outbox_relay = OutboxRelay(relay_id=self.options.worker_id)
            self._leader_threads.append(
                self._start_thread(self.outbox_relay.run_in_thread, "gq-outbox-relay")
            )

    def _reload(self) -> None:
        """Start lanes for new consumers and stop lanes whose consumer went away."""
        lanes = {lane.key: lane for lane in self.lane_source()}
        for key in [k for k in self._slots if k not in lanes]:
            self._lane_stops.pop(key).set()
            del self._slots[key]
            self._running.pop(key, None)
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
        self.slot_loop.wake_all()

    def on_stop(self) -> None:
        """Wait for the slots (they finish their handler, release the rest and
        ack) within the grace period; then stop maintenance and the scheduler."""
        deadline = time.monotonic() + self.options.grace
        for thread in [t for slots in self._slots.values() for t in slots]:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                self.timed_out = True
        if self.timed_out:
            logger.warning("grace period of %.0fs over; handlers still running", self.options.grace)
        self.acker.finish(max(1.0, deadline - time.monotonic()))
        leaders = [loop for loop in (self.maintenance, self.scheduler, self.outbox_relay)
                   if loop is not None]  # fmt: skip
        for loop in leaders:
            loop.request_stop()
        for thread in self._leader_threads:
            thread.join(MAINTENANCE_RESIGN_WAIT)  # hand leadership over
        self.registration.stop()

    def _queues(self) -> list[str]:
        """The queues this worker serves now (for its registry row)."""
        return sorted({lane.queue for lane in list(self._running.values())})

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
    return f"polling every {product_settings().worker_poll_interval:g}s"
