"""``manage.py stream_read GROUP TOPIC [--since N | --consumer NAME [--commit]]
[--limit N]``: print entries as JSON lines ``{"offset", "payload"}``."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from principals.services import group_get
from queueproject.commands import ServiceCommand, positive_int
from store import streams


class Command(ServiceCommand):
    help = ("Print a topic's entries after --since (default 0) or after a consumer's saved "
            "offset; --commit saves the last one printed as the consumer's offset.")  # fmt: skip

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("topic")
        parser.add_argument("--since", type=int, help="read the entries after this offset")
        parser.add_argument("--consumer", help="read from this consumer's saved offset")
        parser.add_argument("--commit", action="store_true", help="with --consumer")
        parser.add_argument("--limit", type=positive_int, default=streams.READ_DEFAULT)

    def run(self, *args: Any, **opts: Any) -> None:
        consumer = opts["consumer"]
        if consumer is not None and opts["since"] is not None:
            raise CommandError("Give --since or --consumer, not both.")
        if opts["commit"] and consumer is None:
            raise CommandError("--commit needs --consumer.")
        topic = streams.topic_get(group=group_get(ref=opts["group"]), name=opts["topic"])
        limit = min(opts["limit"], streams.READ_MAX)
        if consumer is not None:
            page = streams.consumer_read(topic=topic, name=consumer, limit=limit)
        else:
            page = streams.stream_read(topic=topic, since=opts["since"] or 0, limit=limit)
        for entry in page.entries:
            self.stdout.write(json.dumps({"offset": entry.offset, "payload": entry.payload}))
        if opts["commit"] and page.entries:
            streams.consumer_commit(topic=topic, name=consumer, offset=page.next_since)
