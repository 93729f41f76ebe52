from django.apps import AppConfig


class QueueProjectConfig(AppConfig):
    """The project package is also an app: it holds project-wide commands (seed_demo)."""

    name = "queueproject"
    verbose_name = "Durable queues"

    def ready(self) -> None:
        # Registers the <api_id:…> path converter before any URLconf loads.
        from queueproject import ids  # noqa: F401
