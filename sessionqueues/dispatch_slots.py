"""The session dispatcher's delivery slots: ``concurrency`` threads, each
delivering for one session at a time, never two for one session at once in
this process. Across processes and hosts the dispatcher's reserve refuses a
session that has a dispatcher reservation open
(``sessionqueues.sql.RESERVE_HEAD_FOR_AGENT``, under the session's lock row).

The dispatcher's main thread picks sessions in a fair order and hands each to
:meth:`DeliverySlots.submit`, which waits for a free slot. Each slot thread
has its own database connection (Django's are per thread) and closes it when
the slots close, so threads and connections are bounded by ``concurrency``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, close_old_connections, connections

from queueproject.runner import drop_connections

logger = logging.getLogger("sessionqueues.dispatch")

SUBMIT_RECHECK = 0.5  # seconds: a submit waiting for a slot re-checks ``stopping``


class DeliverySlots:
    """``work(item)`` runs on one of ``concurrency`` threads; items with the
    same ``key(item)`` never run at once; ``on_done()`` is called (on the slot
    thread) after each. An exception escaping ``work`` is logged and the
    slot's connections are dropped (the next item reconnects)."""

    def __init__(
        self,
        concurrency: int,
        work: Callable[[Any], object],
        *,
        key: Callable[[Any], object],
        stopping: threading.Event,
        on_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.concurrency = concurrency
        self._work, self._key, self._stopping, self._on_done = work, key, stopping, on_done
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._busy: set[object] = set()
        self._changed = threading.Condition()
        self._threads = [
            threading.Thread(target=self._run, name=f"dispatch-slot-{n}", daemon=True)
            for n in range(concurrency)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, item: Any) -> bool:
        """Hand ``item`` to a slot, waiting for a free one. False (not handed)
        when its key is in flight here already, or once stopping."""
        key = self._key(item)
        with self._changed:
            while len(self._busy) >= self.concurrency and not self._stopping.is_set():
                self._changed.wait(SUBMIT_RECHECK)
            if self._stopping.is_set() or key in self._busy:
                return False
            self._busy.add(key)
        self._items.put(item)
        return True

    def busy_with(self, item: Any) -> bool:
        with self._changed:
            return self._key(item) in self._busy

    def in_flight(self) -> int:
        with self._changed:
            return len(self._busy)

    def wake(self) -> None:
        """Wake every waiter (a stop was requested)."""
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        """Let the items in hand finish, then end the threads (their
        connections are closed)."""
        for _ in self._threads:
            self._items.put(None)
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        try:
            while (item := self._items.get()) is not None:
                self._one(item)
        finally:
            connections.close_all()

    def _one(self, item: Any) -> None:
        try:
            close_old_connections()
            self._work(item)
        except (OperationalError, InterfaceError) as exc:
            logger.warning("delivery slot: database unavailable (%s)", exc)
            drop_connections()
        except Exception:
            logger.exception("delivery slot: error")
            drop_connections()
        finally:
            with self._changed:
                self._busy.discard(self._key(item))
                self._changed.notify_all()
            self._on_done()
