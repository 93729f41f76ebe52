"""Demo data for a first look; idempotent (run it as often as you like).

Every installed app may contribute a ``demo`` module (``<app>/demo.py``) with
``seed(*, admin_user, log)``; this command finds them the way Django's
``autodiscover_modules`` finds ``admin`` modules, so it names no app itself.
A demo module with more than one seeder lists them, in order, in ``DEMO_SEEDS``
(default: ``[seed]``).

Ordering rule: ascending ``DEMO_ORDER`` (an optional int in the demo module,
:data:`DEFAULT_ORDER` when absent), ties in ``INSTALLED_APPS`` order. A demo
that builds on another app's demo data declares a higher ``DEMO_ORDER``.
"""

from importlib import import_module
from types import ModuleType
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.utils.module_loading import module_has_submodule

from queueproject.commands import ServiceCommand

DEMO_MODULE = "demo"
DEFAULT_ORDER = 100


def demo_modules() -> list[ModuleType]:
    """The installed apps' ``demo`` modules in seeding order (see the module docstring)."""
    found = [
        import_module(f"{config.name}.{DEMO_MODULE}")
        for config in apps.get_app_configs()  # INSTALLED_APPS order
        if module_has_submodule(config.module, DEMO_MODULE)
    ]
    return sorted(found, key=lambda module: getattr(module, "DEMO_ORDER", DEFAULT_ORDER))


class Command(ServiceCommand):
    help = "Create demo groups, apps, queues and sessions (idempotent)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--admin", default="admin", help="user made owner of the demo tree")

    def run(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        admin_user = User.objects.filter(username=opts["admin"]).first()
        for module in demo_modules():
            for seed in getattr(module, "DEMO_SEEDS", [module.seed]):
                seed(admin_user=admin_user, log=lambda m: self.stdout.write(f"  created {m}"))
        self.stdout.write(self.style.SUCCESS("Demo data is in place."))
