from typing import Any

from principals import services
from queueproject.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Create an app in a group."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug")
        parser.add_argument("--group", required=True, help="slug or id of the group")
        parser.add_argument("--name", default="")

    def run(self, *args: Any, **opts: Any) -> None:
        group = services.group_get(ref=opts["group"])
        app = services.app_create(slug=opts["slug"], group=group, name=opts["name"])
        self.stdout.write(f"Created app {app.slug} in {group.path} ({app.pk})")
