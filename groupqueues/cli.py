"""What the operations commands share (``queue_dead``, ``queue_redrive``,
``queue_pause``, ``queue_resume``, ``queue_message``): the ``GROUP/NAME``
queue argument, the dead-message filter options (built into the one
``DeadFilter`` of ``groupqueues.dead_filters``), ``--json`` output and errors
as one line on stderr with a non-zero exit (never a traceback)."""

from __future__ import annotations

import json
from typing import Any, NoReturn

from django.core.management.base import CommandError, CommandParser

from groupqueues import services
from groupqueues.dead_filters import DeadFilter, dead_filter, parse_moment
from groupqueues.models import Collection, DeadReason, Message
from groupqueues.serializers import MessageSerializer
from principals.services import group_get
from queueproject import clock
from queueproject.commands import ServiceCommand, positive_int


class OneLineParser(CommandParser):
    """A command parser whose usage errors are one line on stderr (exit 2)
    instead of the usage block followed by the error."""

    def error(self, message: str) -> NoReturn:
        if self.called_from_command_line:
            self.exit(2, f"{self.prog}: error: {message} (see --help)\n")
        raise CommandError(f"Error: {message}")


class OpsCommand(ServiceCommand):
    """An operations command: ``--json`` for machine-readable output; domain
    errors become ``CommandError`` (``ServiceCommand``)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = OneLineParser  # same state, one-line errors
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")
        return parser

    def emit(self, opts: dict[str, Any], data: Any, text: str) -> None:
        """Print ``data`` as JSON with ``--json``, else ``text``."""
        self.stdout.write(json.dumps(data, indent=2, default=str) if opts["json"] else text)


def queue_ref(ref: str) -> Collection:
    """The queue named ``GROUP/NAME`` (group slug or id). Raises CommandError
    for a malformed reference, GroupNotFound, CollectionNotFound."""
    group_ref, slash, name = ref.rpartition("/")
    if not slash or not group_ref or not name:
        raise CommandError(f"Give the queue as GROUP/NAME, not {ref!r}.")
    return services.collection_get(group=group_get(ref=group_ref), name=name)


def queue_label(queue: Collection) -> str:
    return f"{queue.group.slug}/{queue.name}"


def add_filter_arguments(parser: CommandParser) -> None:
    """The dead-message filter options (the fields of ``DeadFilter``)."""
    parser.add_argument(
        "--reason", action="append", choices=DeadReason.values,
        help="dead for this reason (repeat for several)",
    )  # fmt: skip
    parser.add_argument("--since", help="died at or after: ISO 8601, a date, or an age (2h, 3d)")
    parser.add_argument("--until", help="died before: ISO 8601, a date, or an age (30m)")
    parser.add_argument("--error-contains", help="the last error contains this text")
    parser.add_argument("--limit", type=positive_int, help="at most this many, newest death first")


def filter_from(opts: dict[str, Any], *, default_limit: int | None = None) -> DeadFilter:
    """The ``DeadFilter`` the options spell (InvalidQueueInput names the field)."""
    now = clock.now()
    since, until = opts.get("since"), opts.get("until")
    limit = opts.get("limit")
    return dead_filter(
        reason=opts.get("reason"),
        since=parse_moment(since, field="since", now=now) if since is not None else None,
        until=parse_moment(until, field="until", now=now) if until is not None else None,
        error_contains=opts.get("error_contains"),
        limit=limit if limit is not None else default_limit,
    )


def message_data(message: Message, queue: Collection) -> dict[str, Any]:
    """A message as the REST API shows it (one shape for JSON everywhere)."""
    message.collection, message.group = queue, queue.group
    data: dict[str, Any] = MessageSerializer(message).data
    return data


def redrive_or_purge(
    command: OpsCommand, opts: dict[str, Any], *, queue: Collection, purge: bool
) -> None:
    """Redrive (or purge) the dead messages the filter options select; with no
    filter option ``--all`` must say "every dead message"."""
    where = filter_from(opts)
    if where.is_empty and not opts.get("all"):
        raise CommandError("Say which dead messages: give a filter option, or --all for every one.")
    if purge:
        count = services.messages_purge_dead(collection=queue, where=where)
    else:
        count = services.messages_redrive(collection=queue, where=where)
    verb = "Purged" if purge else "Redrove"
    command.emit(
        opts,
        {"queue": queue_label(queue), "count": count, "filter": where.as_dict()},
        f"{verb} {count} dead message(s) of {queue_label(queue)}.",
    )


class SetPausedCommand(OpsCommand):
    """``queue_pause`` / ``queue_resume``: set ``paused`` on one or more queues
    (every reference is resolved before any queue changes)."""

    paused: bool
    verb: str

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("queues", nargs="+", metavar="queue", help="GROUP/NAME (one or more)")

    def run(self, *args: Any, **opts: Any) -> None:
        queues = [queue_ref(ref) for ref in opts["queues"]]
        for queue in queues:
            services.collection_update(collection=queue, paused=self.paused)
        labels = [queue_label(q) for q in queues]
        self.emit(
            opts,
            [{"queue": label, "paused": self.paused} for label in labels],
            "\n".join(f"{self.verb} {label}." for label in labels),
        )
