from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class StoreConfig(AppConfig):
    """The store primitives of SPEC §6 owned by groups: schedules, TTL locks
    (over the shared layer's one lease mechanism), and later notify channels,
    streams and the outbox."""

    name = "store"
    verbose_name = "Store primitives"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        post_migrate.connect(_sync_declared_schedules, sender=self)


def _sync_declared_schedules(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """After ``migrate``: the QUEUE_SCHEDULES schedules exist and match."""
    from store.schedule_declared import schedules_sync_declared

    schedules_sync_declared()
