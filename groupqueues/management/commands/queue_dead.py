from typing import Any

from groupqueues import cli, services
from groupqueues.excerpts import error_excerpt, payload_excerpt

LIST_LIMIT = 50


class Command(cli.OpsCommand):
    help = (
        "List, redrive or purge the dead messages of GROUP/NAME, chosen by reason, time of "
        "death, error text and a limit. Redrive and purge without a filter need --all."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["list", "redrive", "purge"])
        parser.add_argument("queue", help="GROUP/NAME (group slug or id)")
        cli.add_filter_arguments(parser)
        parser.add_argument(
            "--all", action="store_true", help="redrive / purge: every dead message"
        )

    def run(self, *args: Any, **opts: Any) -> None:
        queue = cli.queue_ref(opts["queue"])
        if opts["action"] == "list":
            self._list(queue, opts)
        else:
            cli.redrive_or_purge(self, opts, queue=queue, purge=opts["action"] == "purge")

    def _list(self, queue: Any, opts: dict[str, Any]) -> None:
        where = cli.filter_from(opts, default_limit=LIST_LIMIT)
        dead = list(services.messages_dead(collection=queue, where=where))
        data = {
            "queue": cli.queue_label(queue),
            "filter": where.as_dict(),
            "messages": [cli.message_data(m, queue) for m in dead],
        }
        rows = [("id", "reason", "died_at", "attempt", "last_error", "payload")] + [
            (str(m.id), m.dead_reason or "", m.died_at.isoformat(timespec="seconds") if m.died_at
             else "", f"{m.attempt}/{m.max_attempts}", error_excerpt(m.last_error, 50),
             payload_excerpt(m.payload, 40))
            for m in dead
        ]  # fmt: skip
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
        ]
        footer = f"{len(dead)} dead message(s) of {cli.queue_label(queue)}"
        if where.limit is not None and len(dead) == where.limit:
            footer += f" (first {where.limit}; --limit N shows more)"
        self.emit(opts, data, "\n".join([*lines, footer]) if dead else footer + ".")
