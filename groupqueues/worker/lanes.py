"""Lanes: what a worker runs. A lane is one consumer, a handler on a
collection as one app (or group), with its batch size, concurrency and
visibility timeout. The lanes of one collection that claim alike share claim
loops as a ``Rotation``: each claim's messages are delivered as one of them,
in turn."""

from __future__ import annotations

import bisect
import logging
import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from groupqueues.exceptions import CollectionNotFound
from groupqueues.models import Collection, Consumer
from groupqueues.trigger_services import trigger_collection

logger = logging.getLogger("groupqueues.worker")


@dataclass(frozen=True)
class Lane:
    """One consumer as a worker runs it: a handler on a collection."""

    collection: Collection
    queue: str  # "GROUP/NAME"
    handler_name: str
    batch: int
    concurrency: int
    visibility_timeout: int
    app_slug: str | None = None
    trigger_id: int | None = None  # None: a --handler lane (no trigger)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.collection.pk, self.handler_name, self.app_slug, self.batch,
                self.concurrency, self.visibility_timeout)  # fmt: skip

    def __str__(self) -> str:
        who = f" as {self.app_slug}" if self.app_slug else ""
        return f"{self.queue} → {self.handler_name}{who}"


class Rotation:
    """Lanes of one collection that claim alike (same batch size and
    visibility timeout: always those of one trigger), taking turns.

    Attribution: the slots claim for the rotation, and each claim that brings
    messages is delivered as exactly one lane (its handler; the app that
    ``Delivery.app_slug``, the outcome lines and the counts name), the next
    in a round robin over the lanes in a fixed order (handler, app). The turn
    is taken once the messages are in hand, so an empty claim (or one that
    waited long for SQLite's write lock) spends nobody's turn: over any run
    of n non-empty claims each of n lanes gets exactly one, and none starves.
    The round robin starts at a random lane, so that several workers do not
    all favour the first apps. Thread-safe: the slots working it share it.

    ``cap``: how many of the worker's slots may claim for it at once, the
    sum of its triggers' concurrency (a ``--concurrency`` override counts
    once), at most ``slots``."""

    def __init__(self, lanes: list[Lane], *, slots: int, start: int | None = None) -> None:
        self._lock = threading.Lock()
        self._last: tuple[Any, ...] | None = None  # the order of the lane served last
        self.lanes: list[Lane] = []
        self.cap = 1
        self.slots = slots
        first = lanes[0]
        self.collection, self.queue = first.collection, first.queue
        self.batch, self.visibility_timeout = first.batch, first.visibility_timeout
        self.set_lanes(lanes)
        self._cursor = random.randrange(len(self.lanes)) if start is None else start

    def set_lanes(self, lanes: list[Lane]) -> None:
        """Serve these lanes from now on (a reload: apps came or went); the
        round robin carries on after the lane it served last."""
        ordered = sorted(lanes, key=_order)
        concurrency = {lane.trigger_id if lane.trigger_id is not None else lane.key:
                       lane.concurrency for lane in ordered}  # fmt: skip
        with self._lock:
            if self._last is not None:
                self._cursor = bisect.bisect_right([_order(lane) for lane in ordered], self._last)
            self.lanes = ordered
            self.collection = ordered[0].collection  # a fresh copy of its settings
            self.cap = max(1, min(self.slots, sum(concurrency.values())))

    def next(self) -> Lane:
        """The lane whose turn it is: call it once per non-empty claim."""
        with self._lock:
            self._cursor %= len(self.lanes)
            lane = self.lanes[self._cursor]
            self._cursor += 1
            self._last = _order(lane)
            return lane

    def __str__(self) -> str:
        shown = self.lanes[:SHOWN_LANES]
        who = ", ".join(f"{lane.handler_name} as {lane.app_slug}" if lane.app_slug
                        else lane.handler_name for lane in shown)  # fmt: skip
        more = len(self.lanes) - len(shown)
        return f"{self.queue} → {who}" + (f" and {more} more" if more > 0 else "")


SHOWN_LANES = 10  # lanes named in a rotation's log line


def _order(lane: Lane) -> tuple[Any, ...]:
    """Where a lane stands in its rotation: by handler, then app."""
    return (lane.handler_name, lane.app_slug or "", lane.key)


def lanes_by_claim(lanes: Iterable[Lane]) -> dict[tuple[Any, ...], list[Lane]]:
    """The lanes grouped into rotations: by collection, batch size and
    visibility timeout (what a claim for them is made with)."""
    groups: dict[tuple[Any, ...], list[Lane]] = {}
    for lane in lanes:
        key = (lane.collection.pk, lane.batch, lane.visibility_timeout)
        groups.setdefault(key, []).append(lane)
    return groups


def lanes_of_consumers(
    consumers: Iterable[Consumer],
    *,
    queues: set[str] | None = None,
    batch: int | None = None,
    concurrency: int | None = None,
) -> list[Lane]:
    """Lanes for consumers of enabled triggers (those on ``queues`` only, when
    given); ``batch``/``concurrency`` override the triggers'. Consumers whose
    queue no longer resolves are skipped with a warning (once per trigger).
    The queue is resolved once per trigger: a shared trigger has a consumer
    per app, thousands of them."""
    lanes = []
    resolved: dict[int, Collection | None] = {}
    for consumer in consumers:
        trigger = consumer.trigger
        if trigger.pk not in resolved:
            try:
                resolved[trigger.pk] = trigger_collection(trigger=trigger)
            except CollectionNotFound:
                logger.warning("trigger %s: no such queue; skipped", trigger)
                resolved[trigger.pk] = None
        collection = resolved[trigger.pk]
        if collection is None:
            continue
        queue = f"{collection.group.slug}/{collection.name}"
        if queues is not None and queue not in queues:
            continue
        lanes.append(
            Lane(
                collection=collection, queue=queue, handler_name=trigger.handler,
                batch=batch or trigger.batch_size, concurrency=concurrency or trigger.concurrency,
                visibility_timeout=trigger.visibility_timeout or collection.visibility_timeout,
                app_slug=consumer.app.slug if consumer.app is not None else None,
                trigger_id=trigger.pk,
            )
        )  # fmt: skip
    return lanes


def lanes_for_handler(
    collections: Iterable[Collection], handler_name: str, *, batch: int, concurrency: int
) -> list[Lane]:
    """Lanes running ``handler_name`` on the given queues without a trigger."""
    return [
        Lane(collection=c, queue=f"{c.group.slug}/{c.name}", handler_name=handler_name,
             batch=batch, concurrency=concurrency, visibility_timeout=c.visibility_timeout)
        for c in collections
    ]  # fmt: skip
