"""``manage.py schedule_tick [--once] [--interval S] [--ttl S]``: fire due
schedules as the one scheduler leader at a time (every queue_worker runs the
same loop in a thread)."""

from __future__ import annotations

from typing import Any

from groupqueues.management.commands.queue_maintenance import positive_float
from queueproject.commands import ServiceCommand
from queueproject.runner import default_worker_id
from store.schedule_tick import DEFAULT_INTERVAL, DEFAULT_LEASE_TTL, Scheduler


class Command(ServiceCommand):
    help = "Fire due schedules (one leader among all processes); --once for a single tick."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="one tick (if leader), then exit")
        parser.add_argument("--interval", type=positive_float, default=DEFAULT_INTERVAL,
                            help="seconds between ticks")  # fmt: skip
        parser.add_argument("--ttl", type=positive_float, default=DEFAULT_LEASE_TTL,
                            help="leadership lease TTL in seconds")  # fmt: skip
        parser.add_argument("--owner", default=None, help="leader name (default host-pid)")

    def run(self, *args: Any, **opts: Any) -> None:
        owner = opts["owner"] or default_worker_id()
        on_tick = self._print if opts["once"] else None
        loop = Scheduler(owner=owner, interval=opts["interval"], ttl=opts["ttl"],
                         once=opts["once"], on_tick=on_tick)  # fmt: skip
        loop.install_signal_handlers()
        loop.run()
        if opts["once"] and not loop.leadership.leading and not loop.fired:
            self.stdout.write(f"{owner}: another process leads the scheduler; nothing done")

    def _print(self, owner: str, fired: int) -> None:
        self.stdout.write(f"{owner}: fired {fired}")
        self.stdout.flush()
