"""Demo data for a first look; idempotent (run it as often as you like)."""

import importlib
from typing import Any

from django.contrib.auth import get_user_model

from queueproject.commands import ServiceCommand

# Each app contributes a ``demo.seed(admin_user=..., log=...)``, in this order.
DEMO_MODULES = [
    "principals.demo",
    "groupqueues.demo",
    "groupqueues.demo_consumers",
    "sessionqueues.demo",
]


class Command(ServiceCommand):
    help = "Create demo groups, apps, queues and sessions (idempotent)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--admin", default="admin", help="user made owner of the demo tree")

    def run(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        admin_user = User.objects.filter(username=opts["admin"]).first()
        for name in DEMO_MODULES:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError:
                continue
            module.seed(admin_user=admin_user, log=lambda m: self.stdout.write(f"  created {m}"))
        self.stdout.write(self.style.SUCCESS("Demo data is in place."))
