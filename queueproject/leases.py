"""TTL locks (SPEC §6): take if free or expired, renew and release by the holder.

Each operation is one statement. ``Leadership`` wraps them for a loop that
wants to act only while it is the one leader among many processes.
"""

from __future__ import annotations

from datetime import timedelta

from queueproject import clock, rawsql, sql
from queueproject.models import Lease


def lease_try(*, name: str, owner: str, ttl: float) -> bool:
    """Take ``name`` for ``ttl`` seconds if free or expired. The current owner
    re-acquiring succeeds without extending (use ``lease_renew`` for that)."""
    now = clock.now()
    params = {"name": name, "owner": owner, "now": now, "expires_at": now + timedelta(seconds=ttl)}
    return rawsql.fetch_one(sql.LEASE_TRY, params) is not None


def lease_renew(*, name: str, owner: str, ttl: float) -> bool:
    """Extend the lease to now + ttl, only while ``owner`` still holds it unexpired."""
    now = clock.now()
    updated = Lease.objects.filter(name=name, owner=owner, expires_at__gt=now).update(
        expires_at=now + timedelta(seconds=ttl)
    )
    return updated == 1


def lease_release(*, name: str, owner: str) -> bool:
    """Give the lease up; only its owner can."""
    deleted, _ = Lease.objects.filter(name=name, owner=owner).delete()
    return deleted == 1


class Leadership:
    """Leader election over one lease: ``ensure()`` answers whether this process
    leads now (renewing while it leads, trying to take over otherwise)."""

    def __init__(self, *, name: str, owner: str, ttl: float):
        self.name, self.owner, self.ttl = name, owner, ttl
        self.leading = False

    def ensure(self) -> bool:
        if self.leading:
            self.leading = lease_renew(name=self.name, owner=self.owner, ttl=self.ttl)
        if not self.leading:
            self.leading = lease_try(name=self.name, owner=self.owner, ttl=self.ttl)
        return self.leading

    def resign(self) -> None:
        if self.leading:
            lease_release(name=self.name, owner=self.owner)
            self.leading = False
