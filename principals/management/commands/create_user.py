import os
import secrets
from typing import Any

from principals import services
from queueproject.commands import ServiceCommand

PASSWORD_ENV = "QUEUE_USER_PASSWORD"


class Command(ServiceCommand):
    help = (
        "Create a login (then give it roles with grant_role). The password comes from "
        f"${PASSWORD_ENV}, else one is generated and printed alone on the last line, once."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="")
        parser.add_argument("--staff", action="store_true", help="may log in to the admin")

    def run(self, *args: Any, **opts: Any) -> None:
        given = os.environ.get(PASSWORD_ENV)
        password = given or secrets.token_urlsafe(12)
        services.user_create(
            username=opts["username"], password=password, email=opts["email"], staff=opts["staff"]
        )
        staff = " (staff: may log in to the admin)" if opts["staff"] else ""
        if given:
            self.stdout.write(
                f"Created user {opts['username']}{staff}; password from ${PASSWORD_ENV}."
            )
            return
        self.stdout.write(f"Created user {opts['username']}{staff}. The password is shown once:")
        self.stdout.write(password)
