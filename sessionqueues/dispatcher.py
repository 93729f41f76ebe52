"""The session dispatcher: drains sessions whose auto-run is ON and whose agent
is ready, one entry at a time, through a deliverer.

Per entry: reserve the head for delivery (only while auto-run is ON and the
agent is ready; the agent is marked busy in the same transaction) → deliver
outside any transaction → acknowledge exactly that reservation. When delivery
fails the reservation is released, so the entry is back at its position; when
the outcome is uncertain the delivery is first marked attempted, so the release
drops it instead (at most once). A session whose delivery failed is retried
after a back-off (``--until-empty``: not again in this run).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from queueproject import notify
from queueproject.backoff import backoff_delay
from queueproject.logging_json import set_process_fields
from queueproject.runner import Runner, default_worker_id
from queueproject.workers_registry import Registration
from sessionqueues import exceptions as err
from sessionqueues import selectors, services
from sessionqueues.delivery import Deliverer, Delivery, DeliveryUncertain, get_deliverer
from sessionqueues.models import ANY_SESSION_CHANNEL, QueuedMessage, Session, session_channel

logger = logging.getLogger("sessionqueues.dispatch")

IDLE_WAIT = 5.0
RETRY_BASE = 1.0
RETRY_MAX = 60.0


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
    stopped (``request_stop()`` or a signal, once the entry in hand is
    settled), or after one pass (``once``), or once nothing is deliverable
    (``until_empty``), or after ``max_deliveries``. Counts are in ``stats``.
    Raises InvalidSessionInput for an unknown deliverer name."""

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
    ) -> None:
        super().__init__()
        self.worker_id = worker_id or default_worker_id()
        set_process_fields(worker=self.worker_id)  # every JSON log line names it
        self.deliver: Deliverer = get_deliverer(deliverer_name)
        self.session_id = session_id
        self.once, self.until_empty, self.max_deliveries = once, until_empty, max_deliveries
        self.stats = Stats()
        self._passes = 0
        self._last_handled: int | None = None
        self._retry_at: dict[Any, float] = {}
        self._failures: dict[Any, int] = {}
        self._subscription: notify.Subscription | None = None
        self.registration = Registration(
            worker_id=self.worker_id, kind="session_dispatch",
            queues=lambda: [f"session:{self.session_id}" if self.session_id else "sessions"],
            counts=self.stats.as_counts,
        )  # fmt: skip

    # --- the loop (Runner hooks) ------------------------------------------------

    def run(self) -> None:
        """Subscribe to the wake-up channel, then loop (see :meth:`Runner.run`)."""
        channel = session_channel(self.session_id) if self.session_id else ANY_SESSION_CHANNEL
        self.registration.start()
        with notify.subscribe(channel) as subscription:
            self._subscription = subscription
            logger.info("dispatching (session=%s)", self.session_id or "any")
            try:
                super().run()
            finally:
                self._subscription = None
                self.registration.stop()

    def tick(self) -> bool:
        self._last_handled = self.turn()
        self._passes += 1
        return self._last_handled > 0

    def should_continue(self) -> bool:
        if not super().should_continue() or self._quota_reached():
            return False
        if self.once and self._passes:
            return False
        return not (self.until_empty and self._last_handled == 0)

    def wait(self, timeout: float) -> None:
        if self._subscription is None:
            super().wait(timeout)
            return
        pending = [at - time.monotonic() for at in self._retry_at.values()]
        self._subscription.wait(max(0.05, min([timeout, *pending])))

    def request_stop(self) -> None:
        super().request_stop()
        if self._subscription is not None:
            self._subscription.event.set()  # wake an idle wait now

    def _quota_reached(self) -> bool:
        return self.max_deliveries is not None and self.stats.delivered >= self.max_deliveries

    # --- one pass -------------------------------------------------------------

    def turn(self) -> int:
        """Offer one entry to every deliverable session; returns how many were handled."""
        handled = 0
        for session in selectors.dispatchable_sessions(session_id=self.session_id):
            if self.stopping.is_set() or self._quota_reached():
                break
            if self._waiting(session):
                continue
            if self.dispatch_one(session):
                handled += 1
        return handled

    def _waiting(self, session: Session) -> bool:
        at = self._retry_at.get(session.pk)
        if at is None:
            return False
        return self.until_empty or at > time.monotonic()

    def dispatch_one(self, session: Session) -> bool:
        """Reserve, deliver and settle one entry of ``session``. False when there
        was nothing to deliver (paused, emptied or gone meanwhile)."""
        try:
            row = services.reservation_reserve_for_agent(session_id=session.pk)
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
        # Purged or transferred meanwhile: the agent has it, nothing to settle.
        with contextlib.suppress(err.ReservationChanged, err.SessionQueueNotFound):
            services.reservation_acknowledge(
                session_id=session.pk, reservation_id=row.reservation_id
            )
        if still_ready:
            self._ready_again(session)
        self._retry_at.pop(session.pk, None)
        self._failures.pop(session.pk, None)
        # Unconditionally: a failure may have been recorded by an earlier process.
        services.delivery_failure_clear(session_id=session.pk)  # blocked-heads view
        self.stats.delivered += 1
        logger.info("delivered entry=%s session=%s", row.pk, session.pk)

    def _failed(self, session: Session, row: QueuedMessage, exc: Exception) -> None:
        try:
            if isinstance(exc, DeliveryUncertain):
                services.reservation_mark_attempted(
                    session_id=session.pk, reservation_ids=[row.reservation_id]
                )
            _, released = services.reservation_release(
                session_id=session.pk, reservation_id=row.reservation_id
            )
        except (err.ReservationChanged, err.SessionQueueNotFound):
            released = False
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

    def _ready_again(self, session: Session) -> None:
        with contextlib.suppress(err.SessionQueueNotFound):
            services.session_set_agent_ready(session_id=session.pk, ready=True)

    def _back_off(self, session: Session) -> None:
        failures = self._failures.get(session.pk, 0) + 1
        self._failures[session.pk] = failures
        delay = backoff_delay(failures, base=RETRY_BASE, cap=RETRY_MAX)
        self._retry_at[session.pk] = time.monotonic() + delay
