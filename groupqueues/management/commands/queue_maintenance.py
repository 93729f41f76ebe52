"""``manage.py queue_maintenance [--once] [--interval S]``: reclaim, sweep,
drop exhausted, prune and re-sync consumers, as the one leader at a time."""

from __future__ import annotations

from typing import Any

from groupqueues.maintenance import Maintenance, MaintenanceReport
from queueproject.commands import ServiceCommand
from queueproject.runner import default_worker_id


def positive_float(value: str) -> float:
    import argparse

    try:
        number = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from exc
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be greater than 0")
    return number


class Command(ServiceCommand):
    help = "Run queue maintenance (one leader among all processes); --once for a single pass."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true", help="one pass (if leader), then exit")
        parser.add_argument("--interval", type=positive_float, help="seconds between passes")
        parser.add_argument("--ttl", type=positive_float, help="leadership lease TTL in seconds")
        parser.add_argument("--owner", default=None, help="leader name (default host-pid)")

    def run(self, *args: Any, **opts: Any) -> None:
        owner = opts["owner"] or default_worker_id()
        loop = Maintenance(owner=owner, interval=opts["interval"], ttl=opts["ttl"],
                           once=opts["once"], on_pass=self._print)  # fmt: skip
        loop.install_signal_handlers()
        loop.run()
        if opts["once"] and not loop.passes:
            self.stdout.write(f"{owner}: another process leads maintenance; nothing done")

    def _print(self, owner: str, report: MaintenanceReport) -> None:
        self.stdout.write(f"{owner}: {report}")
        self.stdout.flush()
