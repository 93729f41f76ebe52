"""The groups' TTL locks (SPEC §6) over the shared layer's one lease mechanism
(``queueproject.leases``): services for the REST API and the ``lock`` context
manager for application code.

A group's lock ``name`` is the lease ``g:<group id>:<name>``, so locks of two
groups never meet and never meet an internal lease (those have no ``g:``
prefix). Each operation is one statement; the fencing token grows with every
new acquisition and never repeats.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import ValidationError

from groupqueues.models import COLLECTION_NAME_VALIDATOR
from principals import services as principals
from principals.models import Group
from queueproject import clock, leases
from store.exceptions import InvalidLockInput, LockHeld, LockLost

OWNER_MAX = 128
TTL_MIN, TTL_MAX = 1, 86400
PREFIX = "g:"

# One owner per process: two ``lock`` blocks of one process share it, so the
# inner one re-enters (same token) and its exit releases the lock for both.
PROCESS_OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class HeldLock:
    """A lock as its holder sees it after taking or renewing it."""

    name: str
    owner: str
    expires_at: datetime
    fencing_token: int


@dataclass(frozen=True)
class LockState:
    """A lock as anyone may see it: ``owner`` and ``expires_at`` are None while
    it is free (never taken, released or expired); ``fencing_token`` is the
    last one handed out (0 when never taken)."""

    name: str
    owner: str | None
    expires_at: datetime | None
    fencing_token: int


def lock_acquire(*, group: Group, name: str, owner: str, ttl: float) -> HeldLock:
    """Take the lock for ``ttl`` seconds if it is free or expired, with the next
    fencing token. Its current owner re-acquiring gets it back unchanged (same
    expiry and token). Raises LockHeld (naming holder and expiry) when another
    owner holds it, InvalidLockInput for a bad name, owner or ttl."""
    _check(name=name, owner=owner, ttl=ttl)
    taken = leases.lease_try(name=_lease_name(group, name), owner=owner, ttl=ttl)
    if taken is None:
        current = lock_get(group=group, name=name)
        raise LockHeld.by(name, current.owner, current.expires_at)
    return HeldLock(name, owner, taken.expires_at, taken.fencing_token)


def lock_renew(*, group: Group, name: str, owner: str, ttl: float) -> HeldLock:
    """Extend the lock to now + ``ttl``, only while ``owner`` holds it unexpired
    (the token stays). Raises LockLost otherwise."""
    _check(name=name, owner=owner, ttl=ttl)
    renewed = leases.lease_renew(name=_lease_name(group, name), owner=owner, ttl=ttl)
    if renewed is None:
        raise LockLost(f"Lock {name!r} is not held by {owner!r}.")
    return HeldLock(name, owner, renewed.expires_at, renewed.fencing_token)


def lock_release(*, group: Group, name: str, owner: str) -> None:
    """Free the lock at once, only while ``owner`` holds it unexpired (raises
    LockLost otherwise). Its token history stays: the next taker gets a higher one."""
    _check(name=name, owner=owner)
    if not leases.lease_release(name=_lease_name(group, name), owner=owner):
        raise LockLost(f"Lock {name!r} is not held by {owner!r}.")


def lock_get(*, group: Group, name: str) -> LockState:
    """The lock's holder, expiry and last token; a free lock has owner None."""
    _check(name=name)
    lease = leases.lease_get(name=_lease_name(group, name))
    if lease is None:
        return LockState(name, None, None, 0)
    if lease.owner is None or lease.expires_at <= clock.now():
        return LockState(name, None, None, lease.fencing_token)
    return LockState(name, lease.owner, lease.expires_at, lease.fencing_token)


@contextmanager
def lock(
    name: str, *, group: Group | str, ttl: float = 60, owner: str | None = None
) -> Iterator[int]:
    """Hold the group's lock ``name`` for the block; yields its fencing token.

    ``group`` is a Group or its slug or id; ``owner`` defaults to this
    process's id. Raises LockHeld at once when another owner holds it (no
    waiting). The lock is released on exit; if it was lost meanwhile (the block
    outlived ``ttl`` and someone took it over) a block that ended normally
    raises LockLost, since its work ran partly unguarded."""
    target = group if isinstance(group, Group) else principals.group_get(ref=group)
    holder = owner if owner is not None else PROCESS_OWNER
    state = lock_acquire(group=target, name=name, owner=holder, ttl=ttl)
    completed = False
    try:
        yield state.fencing_token
        completed = True
    finally:
        released = leases.lease_release(name=_lease_name(target, name), owner=holder)
    if completed and not released:
        raise LockLost(f"Lock {name!r} expired while the block ran.")


def _lease_name(group: Group, name: str) -> str:
    return f"{PREFIX}{group.pk}:{name}"


def _check(*, name: str, owner: str | None = None, ttl: float | None = None) -> None:
    """The ranges the REST serializer also states (it reports every field at once)."""
    try:
        COLLECTION_NAME_VALIDATOR(name)
    except ValidationError:
        raise InvalidLockInput.field("name", str(COLLECTION_NAME_VALIDATOR.message)) from None
    if owner is not None and not 1 <= len(owner) <= OWNER_MAX:
        raise InvalidLockInput.field("owner", f"Use 1-{OWNER_MAX} characters.")
    if ttl is not None and not TTL_MIN <= ttl <= TTL_MAX:
        raise InvalidLockInput.field("ttl", f"Use {TTL_MIN}-{TTL_MAX} seconds.")
