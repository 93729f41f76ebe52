from typing import Any

from principals import services
from principals.models import Role
from queueproject.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Give a user a role (viewer, editor, admin, owner) on a group and its subtree."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("group")
        parser.add_argument("role", help=", ".join(Role.names_lower()))

    def run(self, *args: Any, **opts: Any) -> None:
        role = services.role_parse(opts["role"])
        user = services.user_get(username=opts["username"])
        group = services.group_get(ref=opts["group"])
        services.membership_grant(user=user, group=group, role=role)
        self.stdout.write(f"{opts['username']} is now {role.label} of {group.path}")
