"""``manage.py stream_reset GROUP TOPIC CONSUMER (--offset N | --earliest | --latest)``:
move a consumer's saved offset, backwards too (the only way back)."""

from __future__ import annotations

from typing import Any

from principals.services import group_get
from queueproject.commands import ServiceCommand
from store import streams


class Command(ServiceCommand):
    help = "Move a stream consumer to an offset, the earliest retained entry or the head."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("topic")
        parser.add_argument("consumer")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--offset", type=int)
        where.add_argument("--earliest", action="store_const", const="earliest", dest="to")
        where.add_argument("--latest", action="store_const", const="latest", dest="to")

    def run(self, *args: Any, **opts: Any) -> None:
        topic = streams.topic_get(group=group_get(ref=opts["group"]), name=opts["topic"])
        consumer = streams.consumer_reset(topic=topic, name=opts["consumer"],
                                          offset=opts["offset"], to=opts["to"])  # fmt: skip
        self.stdout.write(
            f"Consumer {consumer.name} of {topic} at {consumer.committed_offset} "
            f"(lag {streams.consumer_lag(consumer)})"
        )
