"""``manage.py channel_publish GROUP NAME PAYLOAD [--idempotency-key K]``:
publish one JSON notification to a channel's current listeners (prints its id)."""

from __future__ import annotations

from typing import Any

from principals.services import group_get
from queueproject.commands import ServiceCommand
from store import channels
from store.management.commands.create_schedule import json_value


class Command(ServiceCommand):
    help = "Publish a JSON notification on a notify channel."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("name", help="the channel's name")
        parser.add_argument("payload", type=json_value, help="the payload, a JSON document")
        parser.add_argument("--idempotency-key", help="publish at most once per key (retained)")

    def run(self, *args: Any, **opts: Any) -> None:
        channel = channels.channel_get(group=group_get(ref=opts["group"]), name=opts["name"])
        note = channels.publish(
            channel=channel, payload=opts["payload"], idempotency_key=opts["idempotency_key"]
        )
        self.stdout.write(str(note.seq))
