from django.apps import AppConfig


class StoreConfig(AppConfig):
    """The store primitives of SPEC §6 owned by groups: schedules, TTL locks
    (over the shared layer's one lease mechanism), and later notify channels,
    streams and the outbox."""

    name = "store"
    verbose_name = "Store primitives"
    default_auto_field = "django.db.models.BigAutoField"
