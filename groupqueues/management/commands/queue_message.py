import json
from typing import Any

from django.core.management.base import CommandError

from groupqueues import cli, services
from groupqueues.exceptions import MessageNotFound
from groupqueues.models import Collection, Message, MessageState
from groupqueues.validation import PRIORITY_MAX, PRIORITY_MIN

SHOWN = ("id", "state", "priority", "attempt", "max_attempts", "enqueued_at", "enqueued_by",
         "deliver_after", "expires_at", "claimed_by", "lease_expires_at", "dead_reason",
         "died_at", "idempotency_key", "last_error", "payload")  # fmt: skip


class Command(cli.OpsCommand):
    help = (
        "One message of GROUP/NAME: show it, retry-now (a delayed or backing-off ready message "
        "becomes due now), priority (change a ready message's priority: --priority N), or "
        "cancel (delete a ready or claimed message)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["show", "retry-now", "priority", "cancel"])
        parser.add_argument("queue", help="GROUP/NAME (group slug or id)")
        parser.add_argument("id", help="the message id (a UUID)")
        parser.add_argument(
            "--priority",
            type=int,
            help=f"priority: the new priority ({PRIORITY_MIN}…{PRIORITY_MAX})",
        )

    def run(self, *args: Any, **opts: Any) -> None:
        queue = cli.queue_ref(opts["queue"])
        action = opts["action"]
        if (opts["priority"] is None) == (action == "priority"):
            raise CommandError("--priority N goes with the priority action (and only with it).")
        try:
            message = services.message_get(collection=queue, id=opts["id"])
        except MessageNotFound:
            raise CommandError(f"No message {opts['id']!r} in {cli.queue_label(queue)}.") from None
        if action == "retry-now":
            message = services.message_retry_now(collection=queue, id=message.id)
        elif action == "priority":
            message = services.message_set_priority(
                collection=queue, id=message.id, priority=opts["priority"]
            )
        elif action == "cancel":
            self._cancel(queue, message, opts)
            return
        self.emit(opts, cli.message_data(message, queue), self._text(action, message))

    def _cancel(self, queue: Collection, message: Message, opts: dict[str, Any]) -> None:
        if message.state == MessageState.DEAD:
            raise CommandError(
                f"Message {message.id} is dead: delete it with queue_dead purge, or redrive it."
            )
        if not services.message_cancel(collection=queue, id=message.id):
            raise CommandError(f"Message {message.id} is gone (acked or cancelled meanwhile).")
        self.emit(
            opts,
            {"id": str(message.id), "cancelled": True},
            f"Cancelled message {message.id} of {cli.queue_label(queue)}.",
        )

    @staticmethod
    def _text(action: str, message: Message) -> str:
        if action == "retry-now":
            since = message.deliver_after.isoformat(timespec="seconds")
            return f"Message {message.id} is due now (ready since {since})."
        if action == "priority":
            return f"Message {message.id} now has priority {message.priority}."
        width = max(len(name) for name in SHOWN)
        return "\n".join(f"{name.ljust(width)}  {_shown(getattr(message, name))}" for name in SHOWN)


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
