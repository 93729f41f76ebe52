"""Queue maintenance (SPEC §2): reclaim lapsed leases, sweep expired
messages, drop exhausted ones, prune dead ones past retention, and re-sync
trigger consumers. Many processes run the loop (every worker has one, and
``manage.py queue_maintenance``); exactly one acts at a time: the holder of
the ``groupqueues.maintenance`` lease (``queueproject.leases.Leadership``).
Each pass is a handful of short statements from ``groupqueues.services``; it
is safe beside workers because every change there is fenced by state and
lease.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import DatabaseError

from groupqueues import services, tally
from groupqueues.services import history
from groupqueues.trigger_services import consumers_sync
from queueproject.conf import product_settings
from queueproject.leases import Leadership
from queueproject.runner import FAILED, Runner, call_resilient

logger = logging.getLogger("groupqueues.maintenance")

LEASE_NAME = "groupqueues.maintenance"
# Tries to resign at exit; with the reconnect backoff they fit well within
# the second or two a worker waits for its maintenance thread.
RESIGN_ATTEMPTS = 3


@dataclass(frozen=True)
class MaintenanceReport:
    reclaimed: int
    expired: int
    pruned: int
    exhausted: int
    consumers_created: int
    consumers_deleted: int
    samples_written: int = 0  # history (groupqueues.services.history)
    samples_pruned: int = 0

    @property
    def changed(self) -> bool:
        return any(
            (self.reclaimed, self.expired, self.pruned, self.exhausted,
             self.consumers_created, self.consumers_deleted)
        )  # fmt: skip

    def __str__(self) -> str:
        return (
            f"reclaimed={self.reclaimed} expired={self.expired} pruned={self.pruned} "
            f"exhausted={self.exhausted} consumers=+{self.consumers_created}"
            f"/-{self.consumers_deleted} samples=+{self.samples_written}/-{self.samples_pruned}"
        )


def maintenance_pass() -> MaintenanceReport:
    """One pass over every collection (no leadership check: callers hold it)."""
    reclaimed = services.messages_reclaim_expired()
    sweep = services.messages_sweep_expired()
    exhausted = services.messages_drop_exhausted()
    created, deleted = consumers_sync()
    services.collections_refresh_claim_floors()  # last: after the reclaims above
    tally.flush()  # this process's counts (nothing pending: no statement)
    written = history.collection_samples_record()  # at most one per QUEUE_SAMPLE_INTERVAL
    pruned = history.collection_samples_prune() if written else 0
    services.dead_counts_refresh_if_due()  # the /metrics dead gauges (a sample just did it)
    return MaintenanceReport(
        reclaimed, sweep.expired, sweep.pruned, exhausted, created, deleted, written, pruned
    )


class Maintenance(Runner):
    """The maintenance loop: every ``interval`` seconds, act if leader.
    ``on_pass(owner, report)`` is called after each pass this process made."""

    def __init__(
        self,
        *,
        owner: str,
        interval: float | None = None,
        ttl: float | None = None,
        once: bool = False,
        on_pass: Callable[[str, MaintenanceReport], None] | None = None,
    ) -> None:
        super().__init__()
        conf = product_settings()
        self.interval = interval if interval is not None else conf.maintenance_interval
        ttl = ttl if ttl is not None else conf.maintenance_lease_ttl
        self.leadership = Leadership(name=LEASE_NAME, owner=owner, ttl=ttl)
        self.once = once
        self.on_pass = on_pass
        self.passes = 0
        self.idle_timeout = self.interval

    def tick(self) -> bool:
        if self.leadership.ensure():
            try:
                report = maintenance_pass()
            except DatabaseError:
                raise  # the Runner reconnects
            except Exception:  # a bug must not end maintenance for good
                logger.exception("maintenance pass failed")
                return False
            self.passes += 1
            level = logging.INFO if report.changed else logging.DEBUG
            logger.log(level, "maintenance by %s: %s", self.leadership.owner, report)
            if self.on_pass is not None:
                self.on_pass(self.leadership.owner, report)
        if self.once:
            self.request_stop()
        return False

    def on_stop(self) -> None:
        """Resign, so that another process takes over now rather than after the
        TTL. The connection may have died while the loop idled (a failover, a
        restart): the resign then reconnects, a few quick tries; if the
        database stays away the lease simply expires."""
        released = call_resilient(
            self.leadership.resign, label="maintenance resign", attempts=RESIGN_ATTEMPTS
        )
        if released is FAILED:
            logger.warning("could not resign maintenance leadership; the lease expires")
