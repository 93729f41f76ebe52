from typing import Any

from principals import services
from queueproject.commands import ServiceCommand, positive_int


class Command(ServiceCommand):
    help = (
        "Create an API token for a user or an app. The secret is printed alone on the "
        "last line of stdout, once; only its hash is stored."
    )

    def add_arguments(self, parser: Any) -> None:
        owner = parser.add_mutually_exclusive_group(required=True)
        owner.add_argument("--user", help="username")
        owner.add_argument("--app", help="app slug or id")
        parser.add_argument("--scopes", required=True, help="comma-separated, e.g. queue:read")
        parser.add_argument("--name", default="")
        parser.add_argument("--expires-in", type=positive_int, default=None, help="seconds")

    def run(self, *args: Any, **opts: Any) -> None:
        scopes = services.scopes_parse(opts["scopes"])
        user = services.user_get(username=opts["user"]) if opts["user"] else None
        app = services.app_get(ref=opts["app"]) if opts["app"] else None
        owner = f"user {opts['user']}" if user is not None else f"app {opts['app']}"
        token, secret = services.token_create(
            name=opts["name"] or f"{owner.split()[1]}-token",
            scopes=scopes,
            user=user,
            app=app,
            expires_in=opts["expires_in"],
        )
        expiry = token.expires_at.isoformat() if token.expires_at else "never"
        self.stdout.write(
            f"Created token {token.name!r} (prefix {token.prefix}) for {owner}; "
            f"scopes {','.join(token.scopes)}; expires {expiry}. The secret is shown once:"
        )
        self.stdout.write(secret)
