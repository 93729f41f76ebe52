"""The session dispatcher: drains sessions whose auto-run is ON and whose agent
is ready, one prompt at a time, through a deliverer.

Per prompt: reserve the head for delivery (only while auto-run is ON and the
agent is ready; the agent is marked busy in the same transaction) → deliver
outside any transaction → acknowledge exactly that reservation. When delivery
fails the reservation is released, so the prompt is back at its position; when
the outcome is uncertain the delivery is first marked attempted, so the release
drops it instead (at most once). A session whose delivery failed is retried
after a back-off (``--until-empty``: not again in this run).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections

from queueproject import notify
from sessionqueues import exceptions as err
from sessionqueues import selectors, services
from sessionqueues.delivery import Deliverer, Delivery, DeliveryUncertain, get_deliverer
from sessionqueues.models import QueuedMessage, Session

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


@dataclass
class Dispatcher:
    """Run with :meth:`run`; ``stop()`` (or SIGTERM/SIGINT) ends it after the
    prompt in hand. A second signal exits at once."""

    deliverer_name: str = "webhook"
    session_id: Any = None
    once: bool = False
    until_empty: bool = False
    max_deliveries: int | None = None
    stats: Stats = field(default_factory=Stats)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _retry_at: dict[Any, float] = field(default_factory=dict)
    _failures: dict[Any, int] = field(default_factory=dict)
    _subscription: notify.Subscription | None = None

    def __post_init__(self) -> None:
        self.deliver: Deliverer = get_deliverer(self.deliverer_name)

    # --- lifecycle ----------------------------------------------------------

    def stop(self) -> None:
        self._stopping.set()
        if self._subscription is not None:
            self._subscription.event.set()  # wake an idle wait now

    def run(self) -> Stats:
        """Dispatch until stopped, or one pass (``once``), or until nothing is
        deliverable (``until_empty``). Returns the counts."""
        previous = self._install_signals()
        channel = notify.channel("sq", self.session_id or "any")
        try:
            with notify.subscribe(channel) as subscription:
                self._subscription = subscription
                self._loop(subscription)
        finally:
            self._restore_signals(previous)
            close_old_connections()
        return self.stats

    def _loop(self, subscription: notify.Subscription) -> None:
        while not self._stopping.is_set():
            close_old_connections()
            handled = self.turn()
            if self.once or self._quota_reached() or (self.until_empty and handled == 0):
                return
            if handled == 0:
                subscription.wait(self._idle_wait())

    def _quota_reached(self) -> bool:
        return self.max_deliveries is not None and self.stats.delivered >= self.max_deliveries

    def _idle_wait(self) -> float:
        pending = [at - time.monotonic() for at in self._retry_at.values()]
        return max(0.05, min([IDLE_WAIT, *pending]))

    # --- one pass -------------------------------------------------------------

    def turn(self) -> int:
        """Offer one prompt to every deliverable session; returns how many were handled."""
        handled = 0
        for session in selectors.dispatchable_sessions(session_id=self.session_id):
            if self._stopping.is_set() or self._quota_reached():
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
        """Reserve, deliver and settle one prompt of ``session``. False when there
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
            message=services.snapshot(row),
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
        outcome = "released" if released else "dropped"
        logger.warning("failed entry=%s session=%s %s: %s", row.pk, session.pk, outcome, exc)

    def _ready_again(self, session: Session) -> None:
        with contextlib.suppress(err.SessionQueueNotFound):
            services.session_set_agent_ready(session_id=session.pk, ready=True)

    def _back_off(self, session: Session) -> None:
        failures = self._failures.get(session.pk, 0) + 1
        self._failures[session.pk] = failures
        delay = min(RETRY_MAX, RETRY_BASE * 2 ** (failures - 1))
        self._retry_at[session.pk] = time.monotonic() + delay

    # --- signals --------------------------------------------------------------

    def _install_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    def _restore_signals(self, previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stopping.is_set():
            raise SystemExit(128 + signum)  # second signal: now
        logger.info("signal %s: finishing the prompt in hand, then stopping", signum)
        self.stop()
