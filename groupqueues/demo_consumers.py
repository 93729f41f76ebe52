"""Demo triggers for ``seed_demo`` (idempotent): the ``log`` handler on
``acme/emails`` (shared: one consumer per app of acme) and ``noop`` on
``acme/thumbnails``, plus a few messages, so a first ``queue_worker`` shows
messages flowing; and the group of the Django Tasks backend (``TASKS``
OPTIONS GROUP), so ``my_task.enqueue()`` works at once."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from groupqueues import services
from groupqueues.exceptions import CollectionNotFound
from groupqueues.models import Collection, Trigger
from groupqueues.trigger_services import trigger_create
from principals.models import Group
from principals.services import group_create

DEMO_TRIGGERS = [("emails", "log", True), ("thumbnails", "noop", False)]
DEMO_MESSAGES = 5


def _queue(group: Group, name: str, log: Any) -> Collection:
    try:
        return services.collection_get(group=group, name=name)
    except CollectionNotFound:
        log(f"queue {group.slug}/{name}")
        return services.collection_create(group=group, name=name)


def _tasks_group(log: Any) -> None:
    slug = settings.TASKS.get("default", {}).get("OPTIONS", {}).get("GROUP")
    if slug and not Group.objects.filter(slug=slug).exists():
        group_create(slug=slug, name="Django Tasks")
        log(f"group {slug} (Django Tasks)")


def seed(*, admin_user: Any, log: Any) -> None:
    _tasks_group(log)
    group = Group.objects.filter(slug="acme").first()
    if group is None:
        return
    for name, handler, shared in DEMO_TRIGGERS:
        collection = _queue(group, name, log)
        if Trigger.objects.filter(group=group, collection_name=name, handler=handler).exists():
            continue
        trigger_create(group=group, collection_name=name, handler=handler, shared=shared)
        log(f"trigger {group.slug}/{name} → {handler}")
        for i in range(DEMO_MESSAGES):
            services.message_enqueue(
                collection=collection, payload={"demo": name, "n": i}, enqueued_by="demo"
            )
        log(f"{DEMO_MESSAGES} messages in {group.slug}/{name}")
