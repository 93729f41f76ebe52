"""The scheduler loop (SPEC §6): every ``interval`` seconds, if this process
leads, fire the due schedules. Every ``queue_worker`` runs one in a thread
beside maintenance, and ``manage.py schedule_tick`` runs one alone; exactly
one leads at a time, the holder of the ``store.scheduler`` lease
(``queueproject.leases.Leadership``, the maintenance leader's mechanism).
Leadership only keeps the work in one place: exactly-once per boundary is
the fenced cursor of ``store.schedules``, which holds even when two
processes believe they lead.

The leader also prunes notify channels past their retention age every
``NOTIFY_PRUNE_INTERVAL`` seconds (``store.channels.notifications_prune``):
the store's one-leader loop, so no hook into queue maintenance is needed.
Stream retention (``store.streams.streams_prune``) runs on the same timer."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from django.db import DatabaseError

from queueproject.leases import Leadership
from queueproject.runner import FAILED, Runner, call_resilient
from store.channels import notifications_prune, prune_interval
from store.schedule_declared import schedules_sync_declared
from store.schedules import schedules_fire_due
from store.streams import streams_prune

logger = logging.getLogger("store.scheduler")

LEASE_NAME = "store.scheduler"
# Small, so that a boundary fires within a second of its time.
DEFAULT_INTERVAL = 0.25  # seconds
# A killed leader's successor takes over after this; the boundaries missed
# meanwhile fire late (within the schedule's catch-up bound), never twice.
DEFAULT_LEASE_TTL = 5.0  # seconds
RESIGN_ATTEMPTS = 3  # also the tries of the declared schedules' sync at start


class Scheduler(Runner):
    """The scheduler loop. ``on_tick(owner, fired)`` is called after each tick
    this process made as leader."""

    def __init__(
        self,
        *,
        owner: str,
        interval: float = DEFAULT_INTERVAL,
        ttl: float = DEFAULT_LEASE_TTL,
        once: bool = False,
        on_tick: Callable[[str, int], None] | None = None,
    ) -> None:
        super().__init__()
        self.interval = self.idle_timeout = interval
        self.leadership = Leadership(name=LEASE_NAME, owner=owner, ttl=ttl)
        self.lease_every = ttl / 3
        self._lease_checked = -math.inf
        self.once = once
        self.on_tick = on_tick
        self.fired = 0
        self._pruned_at = -math.inf

    def prepare(self) -> None:
        """Sync the schedules declared in code (QUEUE_SCHEDULES) before the loop."""
        synced = call_resilient(schedules_sync_declared, label="declared schedules",
                                attempts=RESIGN_ATTEMPTS)  # fmt: skip
        if synced is FAILED:
            logger.warning("could not sync QUEUE_SCHEDULES; firing the stored schedules")

    def leads(self) -> bool:
        """Whether this process leads, renewing or trying the lease every third
        of its TTL rather than every tick: ticks are frequent and the lease is
        a write (on SQLite, the one writer at a time). A belief up to a third
        of the TTL stale costs nothing: the cursor's fence keeps firing exact."""
        now = time.monotonic()
        if now - self._lease_checked >= self.lease_every:
            self._lease_checked = now
            self.leadership.ensure()
        return self.leadership.leading

    def tick(self) -> bool:
        if self.leads():
            try:
                fired = schedules_fire_due()
                self.prune_notifications()
            except DatabaseError:
                raise  # the Runner reconnects
            except Exception:  # a bug must not end the scheduler for good
                logger.exception("scheduler tick failed")
                return False
            self.fired += fired
            if fired:
                logger.info("scheduler %s fired %d", self.leadership.owner, fired)
            if self.on_tick is not None:
                self.on_tick(self.leadership.owner, fired)
        if self.once:
            self.request_stop()
        return False

    def prune_notifications(self) -> None:
        """Drop notifications past retention, at most every NOTIFY_PRUNE_INTERVAL."""
        now = time.monotonic()
        if now - self._pruned_at >= prune_interval():
            self._pruned_at = now
            pruned = notifications_prune()
            if pruned:
                logger.info("scheduler %s pruned %d notifications", self.leadership.owner, pruned)
            entries = streams_prune()  # stream retention rides on the same timer
            if entries:
                logger.info("scheduler %s pruned %d stream entries", self.leadership.owner, entries)

    def on_stop(self) -> None:
        """Resign so that another process takes over now, not after the TTL."""
        released = call_resilient(
            self.leadership.resign, label="scheduler resign", attempts=RESIGN_ATTEMPTS
        )
        if released is FAILED:
            logger.warning("could not resign scheduler leadership; the lease expires")
