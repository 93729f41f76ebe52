"""The session dispatcher: drains sessions whose auto-run is ON and whose agent
is ready, one entry per session at a time, through a deliverer, on
``concurrency`` delivery slots (``sessionqueues.dispatch_slots``).

Per entry: reserve the head for delivery, held by this dispatcher (only while
auto-run is ON, the agent is ready and no other dispatcher reservation of the
session is open; the agent is marked busy in the same transaction) → deliver
outside any transaction → acknowledge exactly that reservation (and, when the
deliverer says the agent can take more, mark it ready in the same
transaction: two commits per delivery). When delivery
fails the reservation is released, so the entry is back at its position; when
the outcome is uncertain the delivery is first marked attempted, so the release
drops it instead (at most once; ``at_most_once`` marks every delivery so at
the reserve). A session whose delivery failed is retried after a back-off
(``--until-empty``: not again in this run).

Fairness: each pass offers every deliverable session one entry, in a fixed
order (rotated by a per-process offset, so two dispatchers start in different
places); a session served in this pass waits for the next one, so a long
queue never delays the other sessions' heads by more than one pass. A
session another dispatcher served since this pass began is skipped too
(``Session.dispatched_at``), so several processes share one round.

Recovery: at start, and every ``RECOVER_EVERY`` seconds, the dispatcher runs
``services.reservation_recover`` (docs/session-dispatch.md): reservations
left by a crashed dispatcher (under this worker id at start, or any
dispatcher the worker registry no longer lists) are released or dropped.
Before its first reserve the dispatcher writes its registry row, so no
other process's recovery takes it for gone.

Database connections: one per delivery slot, one for the main thread (the
pass's listing, recovery), the registry's heartbeat thread, and on
PostgreSQL with LISTEN the process's listener: ``concurrency + 3``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from queueproject import clock, notify
from queueproject.backoff import backoff_delay
from queueproject.logging_json import set_process_fields
from queueproject.runner import FAILED, Resilient, Runner, default_worker_id
from queueproject.workers_registry import Registration
from sessionqueues import exceptions as err
from sessionqueues import selectors, services
from sessionqueues.delivery import Deliverer, Delivery, DeliveryUncertain, get_deliverer
from sessionqueues.dispatch_slots import DeliverySlots
from sessionqueues.models import ANY_SESSION_CHANNEL, QueuedMessage, Session, session_channel

logger = logging.getLogger("sessionqueues.dispatch")

IDLE_WAIT = 5.0
RETRY_BASE = 1.0
RETRY_MAX = 60.0
RECOVER_EVERY = 10.0  # seconds between recovery passes after the one at start
MAX_CONCURRENCY = 256
MAX_WORKER_ID = 128  # QueuedMessage.reserved_by, WorkerProcess.id
SETTLE_ATTEMPTS = 5  # tries of an acknowledge or release once stopping
T = TypeVar("T")


@dataclass
class Stats:
    delivered: int = 0
    released: int = 0
    dropped: int = 0

    @property
    def failed(self) -> int:
        return self.released + self.dropped

    def as_counts(self) -> dict[str, int]:
        """The counters as the worker registry row stores them."""
        return {"delivered": self.delivered, "failed": self.failed,
                "released": self.released, "dropped": self.dropped}  # fmt: skip


class Dispatcher(Runner):
    """A :class:`~queueproject.runner.Runner`: :meth:`run` dispatches until
    stopped (``request_stop()`` or a signal, once the entries in hand are
    settled), or after one pass (``once``), or once nothing is deliverable
    (``until_empty``), or after ``max_deliveries``. Counts are in ``stats``.
    Raises InvalidSessionInput for an unknown deliverer name or a
    concurrency outside 1…``MAX_CONCURRENCY``."""

    idle_timeout = IDLE_WAIT

    def __init__(
        self,
        *,
        deliverer_name: str = "webhook",
        session_id: Any = None,
        once: bool = False,
        until_empty: bool = False,
        max_deliveries: int | None = None,
        worker_id: str | None = None,
        concurrency: int = 1,
        at_most_once: bool = False,
        recover: bool = True,
    ) -> None:
        super().__init__()
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise err.InvalidSessionInput(
                details={"concurrency": [f"Must be between 1 and {MAX_CONCURRENCY}."]}
            )
        self.worker_id = worker_id or default_worker_id()
        if len(self.worker_id) > MAX_WORKER_ID:
            raise err.InvalidSessionInput(
                details={"worker_id": [f"At most {MAX_WORKER_ID} characters."]}
            )
        set_process_fields(worker=self.worker_id)  # every JSON log line names it
        self.deliver: Deliverer = get_deliverer(deliverer_name)
        self.session_id = session_id
        self.once, self.until_empty, self.max_deliveries = once, until_empty, max_deliveries
        self.concurrency, self.at_most_once, self.recover = concurrency, at_most_once, recover
        self.stats = Stats()
        self._lock = threading.Lock()  # stats and the retry maps (slot threads write them)
        self._passes = 0
        self._idle_pass = False
        self._retry_at: dict[Any, float] = {}
        self._failures: dict[Any, int] = {}
        self._rotation = random.randrange(1 << 30)  # where this process starts its passes
        self._announced = False
        self._pass_started: datetime | None = None  # sessions served since: skipped
        self._next_recovery: float | None = None  # None: the start's pass is due
        self._subscription: notify.Subscription | None = None
        self.slots: DeliverySlots | None = None
        self.registration = Registration(
            worker_id=self.worker_id, kind=services.DISPATCHER_KIND,
            queues=lambda: [f"session:{self.session_id}" if self.session_id else "sessions"],
            counts=self.stats.as_counts,
        )  # fmt: skip

    # --- the loop (Runner hooks) ------------------------------------------------

    def run(self) -> None:
        """Subscribe to the wake-up channel, start the slots, then loop (see
        :meth:`Runner.run`); the entries in hand are settled before it returns."""
        channel = session_channel(self.session_id) if self.session_id else ANY_SESSION_CHANNEL
        self.registration.start()
        self.slots = DeliverySlots(
            self.concurrency, self.dispatch_one, key=lambda s: s.pk, stopping=self.stopping,
            on_done=self._wake,
        )  # fmt: skip
        try:
            with notify.subscribe(channel) as subscription:
                self._subscription = subscription
                logger.info(
                    "dispatching (session=%s, concurrency=%d)",
                    self.session_id or "any", self.concurrency,
                )  # fmt: skip
                super().run()
        finally:
            self.slots.close()
            self._subscription = None
            self.registration.stop()

    def tick(self) -> bool:
        self._housekeeping()
        slots = self._slots()
        busy_before = slots.in_flight()
        handed = self.turn()
        self._passes += 1
        self._idle_pass = handed == 0 and busy_before == 0
        # Nothing handed: wait for a wake-up, a delivery ending (it may make its
        # session deliverable again) or a retry coming due.
        return handed > 0

    def should_continue(self) -> bool:
        if not super().should_continue() or self._quota_reached():
            return False
        if self.once and self._passes:
            return False
        return not (self.until_empty and self._idle_pass)

    def wait(self, timeout: float) -> None:
        if self._subscription is None:
            super().wait(timeout)
            return
        with self._lock:
            pending = [at - time.monotonic() for at in self._retry_at.values()]
        if self.recover and self._next_recovery is not None:
            pending.append(self._next_recovery - time.monotonic())
        self._subscription.wait(max(0.05, min([timeout, *pending])))

    def _wake(self) -> None:
        """Wake the idle wait (a slot finished a delivery)."""
        if self._subscription is not None:
            self._subscription.event.set()

    def request_stop(self) -> None:
        super().request_stop()
        if self._subscription is not None:
            self._subscription.event.set()  # wake an idle wait now
        if self.slots is not None:
            self.slots.wake()  # and a pass waiting for a free slot

    def _slots(self) -> DeliverySlots:
        assert self.slots is not None, "run() starts the slots"
        return self.slots

    def _quota_reached(self) -> bool:
        with self._lock:
            delivered = self.stats.delivered
        return self.max_deliveries is not None and delivered >= self.max_deliveries

    def _quota_left(self) -> int | None:
        """Deliveries still to hand out under ``max_deliveries`` (None: no limit)."""
        if self.max_deliveries is None:
            return None
        with self._lock:
            delivered = self.stats.delivered
        return self.max_deliveries - delivered - self._slots().in_flight()

    # --- registry and recovery ------------------------------------------------

    def _housekeeping(self) -> None:
        """Before the first reserve: the registry row (so no recovery elsewhere
        takes this process for gone). Then recovery at start and periodically."""
        if self.registration.enabled and not self._announced:
            self.registration.beat()
            self._announced = True
        now = time.monotonic()
        if not self.recover or (self._next_recovery is not None and now < self._next_recovery):
            return
        if self._next_recovery is None:
            # At start: what this worker id holds was left by a crashed predecessor.
            recovered = services.reservation_recover(gone={self.worker_id})
        else:
            recovered = services.reservation_recover(live={self.worker_id})
        self._next_recovery = now + RECOVER_EVERY
        if recovered:
            logger.warning("recovered %d abandoned reservation(s)", len(recovered))

    # --- one pass -------------------------------------------------------------

    def turn(self) -> int:
        """Offer one entry of every deliverable session to the slots (waiting
        for free ones); returns how many sessions were handed over."""
        slots, handed = self._slots(), 0
        self._pass_started = clock.now()
        sessions = selectors.dispatchable_sessions(session_id=self.session_id)
        for session in self._fair_order(sessions):
            left = self._quota_left()
            if self.stopping.is_set() or (left is not None and left <= 0):
                break
            if self._waiting(session) or slots.busy_with(session):
                continue
            if slots.submit(session):
                handed += 1
        return handed

    def _fair_order(self, sessions: list[Session]) -> list[Session]:
        """Every session once, from this process's own starting point."""
        if not sessions:
            return sessions
        cut = self._rotation % len(sessions)
        return sessions[cut:] + sessions[:cut]

    def _waiting(self, session: Session) -> bool:
        with self._lock:
            at = self._retry_at.get(session.pk)
        if at is None:
            return False
        return self.until_empty or at > time.monotonic()

    def dispatch_one(self, session: Session) -> bool:
        """Reserve, deliver and settle one entry of ``session`` (on a slot
        thread). False when there was nothing to deliver (paused, busy, in
        flight elsewhere, emptied or gone meanwhile, or stopping)."""
        if self.stopping.is_set():
            return False  # handed over but not started: left for the next dispatcher
        try:
            row = services.reservation_reserve_for_agent(
                session_id=session.pk,
                holder=self.worker_id,
                at_most_once=self.at_most_once,
                not_served_since=self._pass_started,
            )
        except err.SessionQueueNotFound:
            return False
        if row is None:
            return False
        delivery = self._delivery(session, row)
        try:
            still_ready = self.deliver(delivery)
        except Exception as exc:
            self._failed(session, row, exc)
            return True
        self._delivered(session, row, still_ready is True)
        return True

    def _delivery(self, session: Session, row: QueuedMessage) -> Delivery:
        return Delivery(
            session_id=str(session.pk),
            task_id=str(session.task_id),
            app=session.task.app.slug,
            incarnation_id=str(row.reservation_owner),
            reservation_id=str(row.reservation_id),
            entry=services.snapshot(row),
        )

    def _delivered(self, session: Session, row: QueuedMessage, still_ready: bool) -> None:
        # One transaction acknowledges and marks the agent ready again. Purged
        # meanwhile: the agent has it, nothing to settle.
        acked = self._settle(
            session, row, "acknowledge",
            lambda sid: services.reservation_acknowledge_delivery(
                session_id=sid, reservation_id=row.reservation_id, holder=self.worker_id,
                agent_ready=still_ready and sid == session.pk,
            ),
        )  # fmt: skip
        if still_ready and (acked is None or acked.session_id != session.pk):
            self._ready_again(session)
        with self._lock:
            self._retry_at.pop(session.pk, None)
            self._failures.pop(session.pk, None)
            self.stats.delivered += 1
        # Unconditionally: a failure may have been recorded by an earlier process.
        services.delivery_failure_clear(session_id=session.pk)  # blocked-heads view
        logger.info("delivered entry=%s session=%s", row.pk, session.pk)

    def _failed(self, session: Session, row: QueuedMessage, exc: Exception) -> None:
        if isinstance(exc, DeliveryUncertain) and not row.delivery_attempted:
            self._settle(
                session, row, "mark attempted",
                lambda sid: services.reservation_mark_attempted(
                    session_id=sid, reservation_ids=[row.reservation_id]
                ),
            )  # fmt: skip
        settled = self._settle(
            session, row, "release",
            lambda sid: services.reservation_release(
                session_id=sid, reservation_id=row.reservation_id
            ),
        )  # fmt: skip
        released = settled is not None and settled[1]
        with self._lock:
            if released:
                self.stats.released += 1
            else:
                self.stats.dropped += 1
        if not isinstance(exc, DeliveryUncertain):
            self._ready_again(session)  # the agent did not take it: still ready
        self._back_off(session)
        services.delivery_failure_record(  # what the blocked-heads view shows
            session_id=session.pk,
            error=f"{type(exc).__name__}: {exc}",
            retry_in=self._retry_at[session.pk] - time.monotonic(),
        )
        outcome = "released" if released else "dropped"
        logger.warning("failed entry=%s session=%s %s: %s", row.pk, session.pk, outcome, exc)

    def _settle(
        self, session: Session, row: QueuedMessage, label: str, settle: Callable[[Any], T]
    ) -> T | None:
        """``settle(session_id)`` where the reservation now is (a transfer takes
        reserved entries along to another session of the task); None when it
        is closed (purged, replaced, or recovered after this process was taken
        for gone). Database trouble is retried, until it works (or, once
        stopping, ``SETTLE_ATTEMPTS`` times): the reservation stays open, and
        its session blocked, until it is settled."""

        def attempt() -> T | None:
            try:
                return settle(session.pk)
            except (err.ReservationChanged, err.SessionQueueNotFound):
                pass
            moved_to = selectors.reservation_session_id(
                reservation_id=row.reservation_id, holder=self.worker_id
            )
            if moved_to is None or moved_to == session.pk:
                return None
            with contextlib.suppress(err.ReservationChanged, err.SessionQueueNotFound):
                return settle(moved_to)
            return None

        guard = Resilient(threading.Event(), f"dispatcher {label}")
        tries = 0
        while True:
            result = guard.turn(attempt)
            if result is not FAILED:
                return result  # type: ignore[return-value]
            tries += 1
            if self.stopping.is_set() and tries >= SETTLE_ATTEMPTS:
                logger.error("could not %s reservation=%s: left open", label, row.reservation_id)
                return None

    def _ready_again(self, session: Session) -> None:
        with contextlib.suppress(err.SessionQueueNotFound):
            services.session_set_agent_ready(session_id=session.pk, ready=True)

    def _back_off(self, session: Session) -> None:
        with self._lock:
            failures = self._failures.get(session.pk, 0) + 1
            self._failures[session.pk] = failures
            delay = backoff_delay(failures, base=RETRY_BASE, cap=RETRY_MAX)
            self._retry_at[session.pk] = time.monotonic() + delay
