from django.apps import AppConfig


class SessionQueuesConfig(AppConfig):
    """Per-session ordered entry queues for interactive agent sessions."""

    name = "sessionqueues"
    verbose_name = "Session queues"
    default_auto_field = "django.db.models.BigAutoField"
