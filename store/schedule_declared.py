"""Schedules declared in code: the ``QUEUE_SCHEDULES`` setting, a dict
name -> {"group": slug, "collection", "schedule", "timezone", "payload",
"priority", "max_attempts", "expires_in_seconds", "catch_up", "paused"}.

``schedules_sync_declared`` creates or updates them by (group, name), marked
``declared_in_code``, and deletes marked schedules the setting no longer
names; it runs after ``migrate`` (post_migrate) and when a scheduler loop
starts (every worker, ``schedule_tick``). An unchanged entry changes nothing
that matters (the cursor stays), so restarts neither duplicate nor re-fire.
An entry whose group or collection does not exist yet is skipped with a
warning (a first ``migrate`` runs before any group is made)."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from principals.exceptions import GroupNotFound
from principals.services import group_get
from queueproject.exceptions import DomainError
from store import schedules
from store.exceptions import ScheduleExists
from store.models import Schedule

logger = logging.getLogger("store.schedules")

KEYS = {"group", "schedule", *schedules.FIELDS} - {"expression"}


def declared_schedules() -> dict[str, dict[str, Any]]:
    """The setting, checked for shape (raises ImproperlyConfigured)."""
    declared = getattr(settings, "QUEUE_SCHEDULES", {}) or {}
    if not isinstance(declared, dict):
        raise ImproperlyConfigured("QUEUE_SCHEDULES must be a dict of name -> schedule.")
    for name, entry in declared.items():
        if not isinstance(entry, dict) or "group" not in entry:
            raise ImproperlyConfigured(f"QUEUE_SCHEDULES[{name!r}] needs a dict with a group.")
        unknown = set(entry) - KEYS
        if unknown:
            raise ImproperlyConfigured(
                f"QUEUE_SCHEDULES[{name!r}]: unknown keys {sorted(unknown)}."
            )
    return declared


def schedules_sync_declared() -> tuple[int, int, int]:
    """Upsert every declared schedule and delete the marked ones no longer
    declared (one skipped keeps what it had); answers (created, updated,
    deleted). Safe beside another process syncing at the same time."""
    created = updated = 0
    kept: list[int] = []
    skipped: list[str] = []
    for name, entry in declared_schedules().items():
        schedule, was_created = _upsert(name, dict(entry))
        if schedule is None:
            skipped.append(name)
            continue
        kept.append(schedule.pk)
        created, updated = created + was_created, updated + (not was_created)
    gone = Schedule.objects.filter(declared_in_code=True).exclude(pk__in=kept)
    deleted, _ = gone.exclude(name__in=skipped).delete()
    return created, updated, deleted


def _upsert(name: str, entry: dict[str, Any]) -> tuple[Schedule | None, bool]:
    """The declared schedule upserted and whether it was created; (None,
    False) when skipped."""
    try:
        group = group_get(ref=entry.pop("group"))
    except GroupNotFound:
        logger.warning("QUEUE_SCHEDULES[%r]: no such group yet; skipped", name)
        return None, False
    if "schedule" in entry:
        entry["expression"] = entry.pop("schedule")
    for _ in range(2):  # a second try when another process created it meanwhile
        try:
            return schedules.schedule_upsert(group=group, name=name, declared_in_code=True,
                                             **entry)  # fmt: skip
        except ScheduleExists:
            continue
        except DomainError as exc:
            logger.warning("QUEUE_SCHEDULES[%r] skipped: %s", name, exc.message)
            break
    return None, False
