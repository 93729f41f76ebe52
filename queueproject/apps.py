from django.apps import AppConfig


class QueueProjectConfig(AppConfig):
    """The project package is also an app: it holds project-wide commands
    (seed_demo) and wires the shared layer's connection set-up."""

    name = "queueproject"
    verbose_name = "Durable queues"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from queueproject import rawsql

        connection_created.connect(
            rawsql.enable_prepared_statements, dispatch_uid="queue-prepared-statements"
        )
        # Registers the <api_id:…> path converter before any URLconf loads.
        from queueproject import ids  # noqa: F401
