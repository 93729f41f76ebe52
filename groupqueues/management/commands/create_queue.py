from typing import Any

from groupqueues import services
from groupqueues.models import MAX_IN_FLIGHT_PER_KEY_HELP
from principals.services import group_get
from queueproject.commands import ServiceCommand, positive_int


def non_negative_int(value: str) -> int:
    """argparse type: an integer >= 0."""
    import argparse

    try:
        number = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from exc
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value!r} must not be negative")
    return number


class Command(ServiceCommand):
    help = "Declare a queue collection on a group (omitted settings take their defaults)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("name", help="1-64 characters of [A-Za-z0-9._-]")
        parser.add_argument("--max-attempts", type=positive_int, dest="default_max_attempts")
        parser.add_argument("--visibility-timeout", type=positive_int, help="seconds")
        parser.add_argument("--max-payload-bytes", type=positive_int)
        parser.add_argument("--max-depth", type=positive_int, help="live messages at most")
        parser.add_argument("--dead-retention", type=non_negative_int, help="seconds")
        # ordering keys, fairness and limits (SPEC §7)
        parser.add_argument("--fairness", choices=["none", "enqueuer", "ordering_key"])
        parser.add_argument("--max-in-flight", type=positive_int, help="claimed at once")
        parser.add_argument("--max-in-flight-per-key", type=positive_int,
                            help=MAX_IN_FLIGHT_PER_KEY_HELP)  # fmt: skip
        parser.add_argument("--rate-limit", help='claims per interval: "100/s", "1000/min"')

    def run(self, *args: Any, **opts: Any) -> None:
        group = group_get(ref=opts["group"])
        names = ("default_max_attempts", "visibility_timeout", "max_payload_bytes", "max_depth",
                 "dead_retention", "fairness", "max_in_flight", "max_in_flight_per_key",
                 "rate_limit")  # fmt: skip
        settings = {name: opts[name] for name in names if opts[name] is not None}
        queue = services.collection_create(group=group, name=opts["name"], **settings)
        self.stdout.write(
            f"Created queue {group.path}/{queue.name}: max_attempts={queue.default_max_attempts} "
            f"visibility_timeout={queue.visibility_timeout}s "
            f"max_payload_bytes={queue.max_payload_bytes} max_depth={queue.max_depth} "
            f"dead_retention={queue.dead_retention}s fairness={queue.fairness} "
            f"max_in_flight={queue.max_in_flight} "
            f"max_in_flight_per_key={queue.max_in_flight_per_key} rate_limit={queue.rate_limit}"
        )
