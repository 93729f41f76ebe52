"""``manage.py schedule_list [--group G] [--json]``: every schedule with its
cursor and next boundaries."""

from __future__ import annotations

import json
from typing import Any

from principals.services import group_get
from queueproject.commands import ServiceCommand
from store.models import Schedule
from store.schedule_serializers import ScheduleSerializer


class Command(ServiceCommand):
    help = "List schedules (all groups, or one), as a table or --json."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--group", help="only this group (slug or id)")
        parser.add_argument("--json", action="store_true", help="one JSON array")

    def run(self, *args: Any, **opts: Any) -> None:
        found = Schedule.objects.select_related("group").order_by("group__slug", "name")
        if opts["group"]:
            found = found.filter(group=group_get(ref=opts["group"]))
        rows = ScheduleSerializer(found, many=True).data
        if opts["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        for row in rows:
            flags = "".join([" paused" if row["paused"] else "",
                             " code" if row["declared_in_code"] else ""])  # fmt: skip
            upcoming = row["upcoming"][0] if row["upcoming"] else "-"
            self.stdout.write(f"{row['group']}/{row['name']}\t{row['schedule']!r} "
                              f"({row['timezone']}) -> {row['collection']}\tnext {upcoming}"
                              f"\tlast {row['last_fired_at'] or '-'}{flags}")  # fmt: skip
