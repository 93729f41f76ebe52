from typing import Any

from principals import services
from queueproject.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Revoke the live token(s) with this name or secret prefix."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("token", metavar="TOKEN_NAME_OR_PREFIX")

    def run(self, *args: Any, **opts: Any) -> None:
        tokens = services.token_find(name_or_prefix=opts["token"])
        services.token_revoke(tokens=tokens)
        for token in tokens:
            self.stdout.write(f"Revoked token {token.name!r} (prefix {token.prefix})")
