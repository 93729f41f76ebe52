"""``manage.py stream_create GROUP TOPIC [--retention-seconds S] [--max-entries N]
[--no-age-limit] [--no-count-limit] [--max-payload-bytes N]``."""

from __future__ import annotations

from typing import Any

from groupqueues.management.commands.queue_maintenance import positive_float
from principals.services import group_get
from queueproject.commands import ServiceCommand, positive_int
from store import streams


class Command(ServiceCommand):
    help = "Create a stream topic on a group (retention defaults from the settings)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("topic", help="1-64 characters of [A-Za-z0-9._-]")
        parser.add_argument("--retention-seconds", type=positive_float,
                            help="prune entries older than this")  # fmt: skip
        parser.add_argument("--max-entries", type=positive_int, help="keep only the newest N")
        parser.add_argument("--no-age-limit", action="store_true")
        parser.add_argument("--no-count-limit", action="store_true")
        parser.add_argument("--max-payload-bytes", type=positive_int)

    def run(self, *args: Any, **opts: Any) -> None:
        fields = {f: opts[f] for f in streams.FIELDS if opts.get(f) is not None}
        if opts["no_age_limit"]:
            fields["retention_seconds"] = None
        if opts["no_count_limit"]:
            fields["max_entries"] = None
        topic = streams.topic_create(group=group_get(ref=opts["group"]), name=opts["topic"],
                                     **fields)  # fmt: skip
        self.stdout.write(
            f"Created topic {topic}: retention_seconds={topic.retention_seconds} "
            f"max_entries={topic.max_entries}"
        )
