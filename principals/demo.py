"""Demo principals for ``seed_demo`` (idempotent)."""

from typing import Any

from principals.models import App, Group, Role
from principals.services import app_create, group_create, membership_grant

# Seeded first: every other demo builds on these groups and apps (seed_demo's rule).
DEMO_ORDER = 10

DEMO_GROUPS = [("acme", "Acme Inc.", None), ("acme-platform", "Acme platform", "acme")]
DEMO_APPS = [("storefront", "Storefront", "acme-platform"), ("billing", "Billing", "acme")]


def seed(*, admin_user: Any, log: Any) -> None:
    for slug, name, parent in DEMO_GROUPS:
        if not Group.objects.filter(slug=slug).exists():
            group_create(
                slug=slug, name=name, parent=Group.objects.get(slug=parent) if parent else None
            )
            log(f"group {slug}")
    for slug, name, group in DEMO_APPS:
        if not App.objects.filter(slug=slug).exists():
            app_create(slug=slug, name=name, group=Group.objects.get(slug=group))
            log(f"app {slug}")
    if admin_user is not None:
        membership_grant(user=admin_user, group=Group.objects.get(slug="acme"), role=Role.OWNER)
