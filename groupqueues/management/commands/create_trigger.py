"""``manage.py create_trigger GROUP_SLUG COLLECTION --handler NAME [--shared]
[--concurrency N] [--batch N]``."""

from __future__ import annotations

from typing import Any

from groupqueues.trigger_services import trigger_create
from principals.services import group_get
from queueproject.commands import ServiceCommand, positive_int


class Command(ServiceCommand):
    help = "Declare a queue trigger (consumer template) on a group."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group")
        parser.add_argument("collection")
        parser.add_argument("--handler", required=True, help="a registered handler or 'webhook'")
        parser.add_argument("--shared", action="store_true", help="one consumer per app below")
        parser.add_argument("--concurrency", type=positive_int, default=1)
        parser.add_argument("--batch", type=positive_int, default=10)
        parser.add_argument("--visibility-timeout", type=positive_int, default=None)

    def run(self, *args: Any, **opts: Any) -> None:
        trigger = trigger_create(
            group=group_get(ref=opts["group"]), collection_name=opts["collection"],
            handler=opts["handler"], shared=opts["shared"], batch_size=opts["batch"],
            concurrency=opts["concurrency"], visibility_timeout=opts["visibility_timeout"],
        )  # fmt: skip
        self.stdout.write(f"Trigger {trigger} with {trigger.consumers.count()} consumer(s).")
        self.stdout.write(str(trigger.pk))
