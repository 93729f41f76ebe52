"""``manage.py create_channel GROUP NAME``: a notify channel of a group."""

from __future__ import annotations

from typing import Any

from principals.services import group_get
from queueproject.commands import ServiceCommand
from store import channels


class Command(ServiceCommand):
    help = "Create a notify channel on a group."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("group", help="slug or id of the owning group")
        parser.add_argument("name", help="1-64 characters of [A-Za-z0-9._-]")

    def run(self, *args: Any, **opts: Any) -> None:
        group = group_get(ref=opts["group"])
        channel = channels.channel_create(group=group, name=opts["name"])
        self.stdout.write(f"Created channel {group.path}/{channel.name}")
