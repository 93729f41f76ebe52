from typing import Any

from principals import services
from queueproject.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Create a group, optionally under a parent group."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--parent", default=None, help="slug or id of the parent group")

    def run(self, *args: Any, **opts: Any) -> None:
        parent = services.group_get(ref=opts["parent"]) if opts["parent"] else None
        group = services.group_create(slug=opts["slug"], name=opts["name"], parent=parent)
        self.stdout.write(f"Created group {group.path} ({group.pk})")
