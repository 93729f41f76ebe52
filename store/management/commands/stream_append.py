"""``manage.py stream_append GROUP TOPIC JSON [JSON ...] [--key KEY]``: append
each JSON document as one entry (one transaction); prints the offsets."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from principals.services import group_get
from queueproject.commands import ServiceCommand
from store import streams
from store.management.commands.create_schedule import json_value


class Command(ServiceCommand):
    help = "Append entries (JSON payloads) to a stream topic; prints their offsets."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("topic")
        parser.add_argument("payloads", nargs="+", type=json_value, help="JSON payloads")
        parser.add_argument("--key", help="idempotency key (one payload only): a repeat "
                            "prints the existing offset")  # fmt: skip

    def run(self, *args: Any, **opts: Any) -> None:
        if opts["key"] is not None and len(opts["payloads"]) != 1:
            raise CommandError("--key goes with exactly one payload.")
        topic = streams.topic_get(group=group_get(ref=opts["group"]), name=opts["topic"])
        entries = [streams.StreamEntryIn(p, opts["key"]) for p in opts["payloads"]]
        offsets = streams.append(topic=topic, entries=entries, appended_by="command")
        self.stdout.write(" ".join(map(str, offsets)))
