"""Writes of queue triggers, their consumers and app endpoints (SPEC §2
"Consumers and workers").

A shared trigger has one Consumer per app in its group's subtree; any other
trigger has one Consumer for the group. ``consumers_sync`` makes the rows
match; it runs after every trigger write here, from the App signals connected
in ``GroupQueuesConfig.ready()`` (an app created, moved or deleted) and from
every maintenance pass (a safety net for writes that bypass signals, such as
``QuerySet.update`` or a group moved under another parent).
"""

from __future__ import annotations

import re
from typing import Any

from django.db import IntegrityError, transaction

from groupqueues import exceptions as err
from groupqueues import validation as check
from groupqueues.handlers import handlers
from groupqueues.models import (
    COLLECTION_NAME_VALIDATOR,
    Collection,
    Consumer,
    Trigger,
)
from principals.models import App, Group

WEBHOOK_HANDLER = "webhook"
MAX_TRIGGER_BATCH = 100
MAX_TRIGGER_CONCURRENCY = 64
_UNSET: Any = object()


def trigger_collection(*, trigger: Trigger) -> Collection:
    """The queue the trigger consumes: ``collection_name`` in the nearest group
    from the trigger's group up to the root. Raises CollectionNotFound."""
    chain = trigger.group.ancestors()
    found = {c.group_id: c for c in Collection.objects.declared_in(chain, trigger.collection_name)}
    for group in chain:
        if group.pk in found:
            return found[group.pk]
    raise err.CollectionNotFound(
        f"No queue {trigger.collection_name!r} in group {trigger.group.slug!r} or above."
    )


def _check_trigger(values: dict[str, Any]) -> dict[str, Any]:
    """Validate trigger fields (only those given)."""
    out = {k: v for k, v in values.items() if v is not _UNSET}
    name = out.get("collection_name")
    if name is not None and not re.match(COLLECTION_NAME_VALIDATOR.regex, str(name)):
        raise err.InvalidQueueInput.field("collection_name", str(COLLECTION_NAME_VALIDATOR.message))
    if "handler" in out and out["handler"] not in handlers.names():
        known = ", ".join(handlers.names())
        raise err.InvalidQueueInput.field("handler", f"Not a registered handler; known: {known}.")
    if "batch_size" in out:
        out["batch_size"] = check.check_int(
            out["batch_size"], "batch_size", low=1, high=MAX_TRIGGER_BATCH
        )
    if "concurrency" in out:
        out["concurrency"] = check.check_int(
            out["concurrency"], "concurrency", low=1, high=MAX_TRIGGER_CONCURRENCY
        )
    if out.get("visibility_timeout") is not None:
        out["visibility_timeout"] = check.check_int(
            out["visibility_timeout"], "visibility_timeout",
            low=check.VISIBILITY_TIMEOUT_MIN, high=check.VISIBILITY_TIMEOUT_MAX,
        )  # fmt: skip
    return out


def check_webhook_shared(trigger: Trigger) -> None:
    if trigger.handler == WEBHOOK_HANDLER and not trigger.shared:
        raise err.InvalidQueueInput.field(
            "shared", "A webhook trigger must be shared: each app posts to its own endpoint."
        )


def trigger_create(
    *,
    group: Group,
    collection_name: str,
    handler: str,
    shared: bool = False,
    batch_size: int = 10,
    concurrency: int = 1,
    visibility_timeout: int | None = None,
    enabled: bool = True,
) -> Trigger:
    """Declare a trigger on ``group`` and materialise its consumers, in one
    transaction. The queue must be visible from the group. Raises
    InvalidQueueInput (unregistered handler, ranges, an unshared webhook),
    CollectionNotFound, TriggerExists (409) for a duplicate (group,
    collection, handler)."""
    fields = _check_trigger(
        {"collection_name": collection_name, "handler": handler, "batch_size": batch_size,
         "concurrency": concurrency, "visibility_timeout": visibility_timeout}
    )  # fmt: skip
    trigger = Trigger(group=group, shared=bool(shared), enabled=bool(enabled), **fields)
    check_webhook_shared(trigger)
    trigger_collection(trigger=trigger)
    try:
        with transaction.atomic():  # the unique constraint decides a race
            trigger.save(force_insert=True)
            consumers_sync(trigger=trigger)
    except IntegrityError as exc:
        raise err.TriggerExists(
            f"Group {group.slug!r} already runs {handler!r} on {collection_name!r}."
        ) from exc
    return trigger


def trigger_update(
    *,
    trigger: Trigger,
    handler: str = _UNSET,
    shared: bool = _UNSET,
    batch_size: int = _UNSET,
    concurrency: int = _UNSET,
    visibility_timeout: int | None = _UNSET,
    enabled: bool = _UNSET,
) -> Trigger:
    """Change the given fields and re-materialise the consumers (a trigger
    turned shared gets one consumer per app, and back). Raises InvalidQueueInput."""
    fields = _check_trigger(
        {"handler": handler, "batch_size": batch_size, "concurrency": concurrency,
         "visibility_timeout": visibility_timeout}
    )  # fmt: skip
    for flag, value in (("shared", shared), ("enabled", enabled)):
        if value is not _UNSET:
            fields[flag] = bool(value)
    for name, value in fields.items():
        setattr(trigger, name, value)
    check_webhook_shared(trigger)
    with transaction.atomic():
        trigger.save()
        consumers_sync(trigger=trigger)
    return trigger


def trigger_delete(*, trigger: Trigger) -> None:
    """Delete the trigger; its consumers go with it (workers stop running them
    at their next reload)."""
    trigger.delete()


def _wanted_apps(trigger: Trigger) -> set[Any]:
    """App ids a shared trigger should have consumers for: every app in the
    group's subtree."""
    groups = {trigger.group_id}
    frontier = [trigger.group_id]
    while frontier:
        children = list(Group.objects.filter(parent_id__in=frontier).values_list("id", flat=True))
        frontier = [c for c in children if c not in groups]
        groups.update(frontier)
    return set(App.objects.filter(group_id__in=groups).values_list("id", flat=True))


def consumers_sync(*, trigger: Trigger | None = None) -> tuple[int, int]:
    """Make the consumer rows of ``trigger`` (all triggers when None) match
    what it should have. Idempotent; concurrent calls may both insert, so the
    unique constraints decide and ``ignore_conflicts`` absorbs the loser.
    Returns (created, deleted)."""
    triggers = [trigger] if trigger is not None else list(Trigger.objects.all())
    created = deleted = 0
    for t in triggers:
        c, d = _sync_one(t)
        created, deleted = created + c, deleted + d
    return created, deleted


def _sync_one(trigger: Trigger) -> tuple[int, int]:
    rows = Consumer.objects.filter(trigger=trigger)
    if not trigger.shared:
        deleted, _ = rows.filter(app__isnull=False).delete()
        if rows.filter(app__isnull=True).exists():
            return 0, deleted
        Consumer.objects.bulk_create([Consumer(trigger=trigger)], ignore_conflicts=True)
        return 1, deleted
    wanted = _wanted_apps(trigger)
    have = set(rows.filter(app__isnull=False).values_list("app_id", flat=True))
    deleted, _ = rows.exclude(app_id__in=wanted).delete()  # also the group's own row
    new = [Consumer(trigger=trigger, app_id=a) for a in wanted - have]
    Consumer.objects.bulk_create(new, ignore_conflicts=True)
    return len(new), deleted


def consumers_sync_for_app(*, app: App) -> None:
    """Re-sync the shared triggers that may concern ``app`` (after it was
    created or moved): every shared trigger, since a move can leave one
    subtree and enter another. Cheap: triggers are few."""
    for trigger in Trigger.objects.filter(shared=True):
        _sync_one(trigger)
