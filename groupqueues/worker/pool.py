"""The lane pool: which collection a free slot claims from next.

A worker runs a fixed number of slot threads (``--concurrency``, default
``QUEUE_WORKER_CONCURRENCY``) whatever the number of consumers it serves, so
its threads and database connections are bounded by its own settings. The
consumers of one collection take turns in a ``Rotation`` (``lanes``: each
claim's messages are delivered as one of them); the ``LanePool`` hands
rotations to slots:

- a rotation is *due* when it may have work: when it is added, after a claim
  that brought messages, when its collection's LISTEN/NOTIFY channel fires,
  and when its re-check time comes after an empty claim (``IDLE_RECHECK``,
  or the poll interval where LISTEN is off; ``UNTIL_EMPTY_RECHECK`` with
  ``--until-empty``);
- due rotations are served first come, first served, at most ``cap`` slots
  on one rotation at once; a rotation being worked stays due while under its
  cap, so free slots join a busy collection;
- a slot's ack-and-claim chain carries on while messages come, but lets go
  (``should_yield``) when another rotation is due with no slot free to take
  it: with more busy collections than slots, each gets its turn.

One LISTEN subscription per rotation (the process's one listener connection
serves them all); its wake-up makes the rotation due.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from groupqueues.worker.lanes import Lane, Rotation, lanes_by_claim
from queueproject import notify
from queueproject.conf import product_settings

IDLE_RECHECK = 1.0  # seconds: an idle collection is re-checked this often (delayed messages)
UNTIL_EMPTY_RECHECK = 0.05  # seconds: the same with --until-empty
MAX_WAIT = 1.0  # seconds: the longest a free slot sleeps without looking again


@dataclass(eq=False)
class Serving:
    """A rotation as the pool serves it. Every field but ``rotation`` and
    ``subscription`` is guarded by the pool's lock."""

    rotation: Rotation
    subscription: notify.Subscription | None = None
    active: int = 0  # slots claiming from it now
    queued: bool = False  # in the line of due rotations
    wake_at: float = 0.0  # asleep until then after an empty claim (0: not asleep)
    wakes: int = 0  # notifications so far (one during an empty claim keeps it due)
    empty: bool = False  # its last claim brought nothing (--until-empty)
    retired: bool = False  # no longer served (its consumers went at a reload)


@dataclass(frozen=True)
class Turn:
    """A slot's hold on a rotation, from ``take`` to ``done``."""

    serving: Serving
    wakes: int = field(compare=False)

    @property
    def rotation(self) -> Rotation:
        return self.serving.rotation


class _Wake(threading.Event):
    """A subscription's event: the listener thread's ``set()`` makes the
    rotation due at once."""

    def __init__(self, pool: LanePool, serving: Serving) -> None:
        super().__init__()
        self.pool, self.serving = pool, serving

    def set(self) -> None:
        super().set()
        self.pool.wake(self.serving)


class LanePool:
    """The rotations a worker's slots serve, and whose turn it is
    (thread-safe). Slots loop ``take`` → claim and handle → ``done``."""

    def __init__(self, *, slots: int, until_empty: bool = False) -> None:
        self.slots = slots
        if until_empty:
            self.recheck = UNTIL_EMPTY_RECHECK
        elif notify.listen_available():
            self.recheck = IDLE_RECHECK
        else:
            self.recheck = min(IDLE_RECHECK, product_settings().worker_poll_interval)
        self._cond = threading.Condition()
        self._serving: dict[Any, Serving] = {}
        self._due: deque[Serving] = deque()
        self._asleep: list[tuple[float, int, Serving]] = []  # a heap by wake-up time
        self._order = itertools.count()
        self._free = 0  # slots waiting in take()

    # --- what is served (the supervisor) ----------------------------------------------
    def update(self, lanes: list[Lane]) -> tuple[list[Rotation], list[Rotation]]:
        """Serve these lanes from now on, in rotations (``lanes_by_claim``):
        new ones are due at once and subscribed to their collection's
        channel; those no longer among the lanes are retired (their slots let
        go after the batch in hand). (added, retired)."""
        grouped = lanes_by_claim(lanes)
        added: list[Serving] = []
        retired: list[Serving] = []
        with self._cond:
            for pk in [pk for pk in self._serving if pk not in grouped]:
                gone = self._serving.pop(pk)
                gone.retired = True
                retired.append(gone)
            for pk, group in grouped.items():
                serving = self._serving.get(pk)
                if serving is None:
                    serving = self._serving[pk] = Serving(Rotation(group, slots=self.slots))
                    added.append(serving)
                    self._queue(serving)
                else:
                    serving.rotation.set_lanes(group)
            self._cond.notify_all()
        for serving in retired:
            if serving.subscription is not None:
                serving.subscription.close()
        for serving in added:  # outside the lock: the listener thread takes it to wake
            channel = serving.rotation.collection.wake_channel
            serving.subscription = notify.subscribe(channel, event=_Wake(self, serving))
        return [s.rotation for s in added], [s.rotation for s in retired]

    def rotations(self) -> list[Rotation]:
        with self._cond:
            return [s.rotation for s in self._serving.values()]

    def close(self) -> None:
        """Drop every subscription (the worker stopped)."""
        with self._cond:
            serving = list(self._serving.values())
        for s in serving:
            if s.subscription is not None:
                s.subscription.close()

    # --- the slots ------------------------------------------------------------------
    def take(self, stopping: threading.Event) -> Turn | None:
        """The next due rotation (waiting for one); None once ``stopping``."""
        with self._cond:
            while not stopping.is_set():
                now = time.monotonic()
                self._wake_sleepers(now)
                serving = self._pop_due()
                if serving is not None:
                    serving.active += 1
                    if serving.active < serving.rotation.cap and not serving.empty:
                        self._queue(serving)  # it has work: free slots may join
                    return Turn(serving, serving.wakes)
                self._free += 1
                try:
                    self._cond.wait(self._next_wake(now))
                finally:
                    self._free -= 1
        return None

    def done(self, turn: Turn, *, worked: bool) -> None:
        """The slot let go of ``turn``'s rotation. ``worked``: its claims
        brought messages (due again at once); otherwise it sleeps until its
        re-check time, unless it was notified meanwhile."""
        serving = turn.serving
        with self._cond:
            serving.active -= 1
            if serving.retired:
                return
            if worked or serving.wakes != turn.wakes:
                if worked:
                    serving.empty = False
                self._queue(serving)
                self._cond.notify()
            else:
                serving.empty = True
                serving.queued = False  # dropped from the line when met there
                serving.wake_at = time.monotonic() + self.recheck
                heapq.heappush(self._asleep, (serving.wake_at, next(self._order), serving))

    def should_yield(self, turn: Turn) -> bool:
        """Whether a slot chaining claims on ``turn``'s rotation should let it
        go: it was retired, or another rotation is due and no slot is free."""
        serving = turn.serving
        if serving.retired:
            return True
        if self._free or not (self._due or self._asleep):  # unlocked: a cheap first look
            return False
        with self._cond:
            self._wake_sleepers(time.monotonic())
            return any(s.queued and s.active == 0 and not s.retired and s is not serving
                       for s in self._due)  # fmt: skip

    def all_empty(self) -> bool:
        """Every rotation's last claim came back empty and none is being
        worked (``--until-empty``: the caller also checks nothing is held)."""
        with self._cond:
            return all(s.empty and not s.active for s in self._serving.values())

    def wake(self, serving: Serving) -> None:
        """A notification on the rotation's channel: due now."""
        with self._cond:
            serving.wakes += 1
            if serving.retired:
                return
            serving.empty = False
            serving.wake_at = 0.0
            self._queue(serving)
            self._cond.notify()

    def wake_all(self) -> None:
        """Wake the free slots (to see a stop)."""
        with self._cond:
            self._cond.notify_all()

    # --- under the lock ---------------------------------------------------------------
    def _queue(self, serving: Serving) -> None:
        if not serving.queued:
            serving.queued = True
            serving.wake_at = 0.0
            self._due.append(serving)

    def _pop_due(self) -> Serving | None:
        """The first rotation in line that is still due and under its cap.
        Entries of rotations that went to sleep, were retired or reached their
        cap since they were queued are dropped on the way."""
        while self._due:
            serving = self._due.popleft()
            if not serving.queued or serving.retired:
                continue
            serving.queued = False
            if serving.active < serving.rotation.cap:
                return serving
        return None

    def _wake_sleepers(self, now: float) -> None:
        while self._asleep and self._asleep[0][0] <= now:
            at, _, serving = heapq.heappop(self._asleep)
            if serving.wake_at == at and not serving.retired:  # not woken or re-slept since
                self._queue(serving)

    def _next_wake(self, now: float) -> float:
        if self._asleep:
            return max(0.0, min(MAX_WAIT, self._asleep[0][0] - now))
        return MAX_WAIT
