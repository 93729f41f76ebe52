"""Lanes: what a worker runs. A lane is one consumer, a handler on a
collection, with its batch size, slot count and visibility timeout."""

from __future__ import annotations

import logging
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

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.collection.pk, self.handler_name, self.app_slug, self.batch,
                self.concurrency, self.visibility_timeout)  # fmt: skip

    def __str__(self) -> str:
        who = f" as {self.app_slug}" if self.app_slug else ""
        return f"{self.queue} → {self.handler_name}{who}"


def lanes_of_consumers(
    consumers: Iterable[Consumer],
    *,
    queues: set[str] | None = None,
    batch: int | None = None,
    concurrency: int | None = None,
) -> list[Lane]:
    """Lanes for consumers of enabled triggers (those on ``queues`` only, when
    given); ``batch``/``concurrency`` override the triggers'. Consumers whose
    queue no longer resolves are skipped with a warning."""
    lanes = []
    for consumer in consumers:
        trigger = consumer.trigger
        try:
            collection = trigger_collection(trigger=trigger)
        except CollectionNotFound:
            logger.warning("trigger %s: no such queue; skipped", trigger)
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
