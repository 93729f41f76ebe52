"""``manage.py create_schedule GROUP NAME --collection C --schedule EXPR
[--timezone TZ] [--payload JSON] [--priority N] [--max-attempts N]
[--expires-in S] [--catch-up N] [--paused] [--update]``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from groupqueues.management.commands.queue_maintenance import positive_float
from principals.services import group_get
from queueproject.commands import ServiceCommand, positive_int
from store import schedules


def json_value(value: str) -> Any:
    """argparse type: a JSON document."""
    try:
        return json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc


class Command(ServiceCommand):
    help = "Create a schedule on a group (--update: create or update it by name)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("name", help="1-64 characters of [A-Za-z0-9._-]")
        parser.add_argument("--collection", required=True, help="queue name, from the group up")
        parser.add_argument("--schedule", required=True, dest="expression",
                            help="cron (5 or 6 fields, @daily, ...) or '@every 30s'")  # fmt: skip
        parser.add_argument("--timezone", help="IANA zone of the cron fields (default UTC)")
        parser.add_argument("--payload", type=json_value, help="JSON payload of each message")
        parser.add_argument("--priority", type=int)
        parser.add_argument("--max-attempts", type=positive_int)
        parser.add_argument("--expires-in", type=positive_float, dest="expires_in_seconds",
                            help="seconds each fired message lives")  # fmt: skip
        parser.add_argument("--catch-up", type=positive_int, help="missed boundaries to fire")
        parser.add_argument("--paused", action="store_true", default=None)
        parser.add_argument("--update", action="store_true", help="update it if it exists")

    def run(self, *args: Any, **opts: Any) -> None:
        group = group_get(ref=opts["group"])
        fields = {f: opts[f] for f in schedules.FIELDS if opts.get(f) is not None}
        if opts["update"]:
            schedule, created = schedules.schedule_upsert(group=group, name=opts["name"],
                                                          **fields)  # fmt: skip
        else:
            schedule, created = schedules.schedule_create(group=group, name=opts["name"],
                                                          **fields), True  # fmt: skip
        verb = "Created" if created else "Updated"
        self.stdout.write(
            f"{verb} schedule {group.path}/{schedule.name}: {schedule.expression!r} "
            f"({schedule.timezone}) -> {schedule.collection}; next at "
            f"{schedule.next_at.isoformat() if schedule.next_at else '-'}"
        )
