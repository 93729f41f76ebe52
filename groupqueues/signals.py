"""Keep the consumers of shared triggers in sync with the apps and groups
(connected once from ``GroupQueuesConfig.ready()``). Consumers of a deleted
app go with it (foreign key cascade)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save, pre_delete

from groupqueues.models import Collection
from principals.models import App, Group


def _app_saved(sender: Any, instance: App, **kwargs: Any) -> None:
    """An app was created or moved: re-sync the shared triggers (in the same
    transaction, so a rolled-back app leaves no consumer)."""
    from groupqueues.trigger_services import consumers_sync_for_app

    consumers_sync_for_app(app=instance)


def _group_saved(sender: Any, instance: Group, created: bool, **kwargs: Any) -> None:
    """A group moved under another parent: its apps left or entered subtrees."""
    if created:
        return
    from groupqueues.trigger_services import consumers_sync

    consumers_sync()


def lock_collection_before_delete(sender: Any, instance: Collection, **kwargs: Any) -> None:
    """A collection is about to be deleted (directly or with its group), in
    Django's delete transaction, before its messages are: lock its row FOR
    UPDATE. This waits for enqueues in flight (they hold KEY SHARE on it) to
    commit, so the CASCADE then deletes their messages too, and any later
    enqueue waits and finds the collection gone. It stands in for the foreign
    key constraint ``Message.collection`` does not have (SQLite's write lock
    already serialises the two)."""
    list(Collection.objects.select_for_update().filter(pk=instance.pk).values_list("pk"))


def connect() -> None:
    pre_delete.connect(
        lock_collection_before_delete, sender=Collection, dispatch_uid="groupqueues.collection_lock"
    )
    post_save.connect(_app_saved, sender=App, dispatch_uid="groupqueues.app_saved")
    post_save.connect(_group_saved, sender=Group, dispatch_uid="groupqueues.group_saved")
