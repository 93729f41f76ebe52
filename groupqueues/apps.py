from django.apps import AppConfig


class GroupQueuesConfig(AppConfig):
    """Shared queue collections owned by groups, with competing consumers."""

    name = "groupqueues"
    verbose_name = "Group queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from groupqueues import signals

        signals.connect()
