from typing import Any

from django.core.management.base import CommandError

from groupqueues import cli, services


class Command(cli.OpsCommand):
    help = (
        "Dead messages of GROUP/NAME back to ready (attempt 0, last error kept): the given "
        "--id ones, those the filter options select, or --all."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("queue", help="GROUP/NAME (group slug or id)")
        parser.add_argument("--id", action="append", dest="ids", help="a dead message (repeat)")
        cli.add_filter_arguments(parser)
        parser.add_argument("--all", action="store_true", help="every dead message")

    def run(self, *args: Any, **opts: Any) -> None:
        queue = cli.queue_ref(opts["queue"])
        if not opts["ids"]:
            cli.redrive_or_purge(self, opts, queue=queue, purge=False)
            return
        if opts["all"] or not cli.filter_from(opts).is_empty:
            raise CommandError("Give --id, or filter options / --all, not both.")
        count = services.messages_redrive(collection=queue, ids=opts["ids"])
        self.emit(
            opts,
            {"queue": cli.queue_label(queue), "count": count, "ids": opts["ids"]},
            f"Redrove {count} dead message(s) of {cli.queue_label(queue)}.",
        )
