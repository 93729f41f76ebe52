"""TTL locks (SPEC §6): take if free or expired, renew and release by the holder.

Each operation is one statement. A lease carries a fencing token that grows
with every new acquisition of its name (never reused: a release keeps the row
and only marks it free), so whatever the holder guards can refuse a write
from a holder that has since lost the lease. ``Leadership`` wraps the
operations for a loop that wants to act only while it is the one leader among
many processes; ``store.locks`` puts the groups' public locks on top.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.utils.dateparse import parse_datetime

from queueproject import clock, rawsql, sql
from queueproject.models import Lease


@dataclass(frozen=True)
class LeaseState:
    """A lease as its holder sees it: held by ``owner`` until ``expires_at``
    under ``fencing_token``."""

    name: str
    owner: str
    expires_at: datetime
    fencing_token: int


def lease_try(*, name: str, owner: str, ttl: float) -> LeaseState | None:
    """Take ``name`` for ``ttl`` seconds if free or expired (a new acquisition:
    the next fencing token), or None while someone else holds it. The current
    owner re-acquiring an unexpired lease gets it back unchanged: same expiry,
    same token (use ``lease_renew`` to extend)."""
    now = clock.now()
    params = {"name": name, "owner": owner, "now": now, "expires_at": now + timedelta(seconds=ttl)}
    row = rawsql.fetch_one(sql.LEASE_TRY, params)
    if row is None:
        return None
    return LeaseState(name, owner, _as_datetime(row[0]), row[1])


def lease_renew(*, name: str, owner: str, ttl: float) -> LeaseState | None:
    """Extend the lease to now + ttl, only while ``owner`` still holds it
    unexpired (its token unchanged); None when it does not."""
    now = clock.now()
    expires_at = now + timedelta(seconds=ttl)
    params = {"name": name, "owner": owner, "now": now, "expires_at": expires_at}
    row = rawsql.fetch_one(sql.LEASE_RENEW, params)
    return None if row is None else LeaseState(name, owner, expires_at, row[0])


def lease_release(*, name: str, owner: str) -> bool:
    """Give the lease up (free at once for anyone); only its owner can, while
    it holds it unexpired. The row stays so the next token is still higher."""
    now = clock.now()
    held = Lease.objects.filter(name=name, owner=owner, expires_at__gt=now)
    return held.update(owner=None, expires_at=now) == 1


def lease_get(*, name: str) -> Lease | None:
    """The lease row of ``name`` (held, expired or released), None if never taken."""
    return Lease.objects.filter(name=name).first()


def _as_datetime(value: datetime | str) -> datetime:
    """A timestamp read back by raw SQL: SQLite hands it over as text (UTC)."""
    if isinstance(value, datetime):
        return value
    parsed = parse_datetime(value)
    assert parsed is not None, value
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Leadership:
    """Leader election over one lease: ``ensure()`` answers whether this process
    leads now (renewing while it leads, trying to take over otherwise)."""

    def __init__(self, *, name: str, owner: str, ttl: float):
        self.name, self.owner, self.ttl = name, owner, ttl
        self.leading = False

    def ensure(self) -> bool:
        if self.leading:
            self.leading = lease_renew(name=self.name, owner=self.owner, ttl=self.ttl) is not None
        if not self.leading:
            self.leading = lease_try(name=self.name, owner=self.owner, ttl=self.ttl) is not None
        return self.leading

    def resign(self) -> None:
        if self.leading:
            lease_release(name=self.name, owner=self.owner)
            self.leading = False
