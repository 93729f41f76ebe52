"""``manage.py outbox_relay [--once] [--max-rows N] [--batch N] [--lease-seconds S]
[--interval S] [--relay-id ID]``: deliver outbox rows to their targets (every
queue_worker runs the same relay in a thread; any number may run at once)."""

from __future__ import annotations

from typing import Any

from groupqueues.management.commands.queue_maintenance import positive_float
from queueproject.commands import ServiceCommand, positive_int
from queueproject.runner import default_worker_id
from store.outbox_relay import OutboxRelay


class Command(ServiceCommand):
    help = "Deliver outbox rows; --once: until nothing is due now, then exit."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--once", action="store_true",
                            help="deliver until nothing is due now, then exit")  # fmt: skip
        parser.add_argument("--max-rows", type=positive_int, default=None,
                            help="exit after handling this many rows")  # fmt: skip
        parser.add_argument("--batch", type=positive_int, default=None, help="rows per claim")
        parser.add_argument("--lease-seconds", type=positive_float, default=None,
                            help="how long a claim holds its rows")  # fmt: skip
        parser.add_argument("--interval", type=positive_float, default=None,
                            help="seconds to sleep when nothing is due")  # fmt: skip
        parser.add_argument("--relay-id", default=None, help="claimed_by (default host-pid)")

    def run(self, *args: Any, **opts: Any) -> None:
        relay = OutboxRelay(
            relay_id=opts["relay_id"] or default_worker_id(), batch=opts["batch"],
            lease_seconds=opts["lease_seconds"], poll_interval=opts["interval"],
            once=opts["once"], max_rows=opts["max_rows"],
        )  # fmt: skip
        relay.install_signal_handlers()
        relay.run()
        self.stdout.write(f"{relay.relay_id}: {relay.outcome}")
