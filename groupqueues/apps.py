from django.apps import AppConfig


class GroupQueuesConfig(AppConfig):
    """Shared queue collections owned by groups, with competing consumers."""

    name = "groupqueues"
    verbose_name = "Group queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from groupqueues import signals, sql

        signals.connect()
        connection_created.connect(sql.enable_prepared_statements, dispatch_uid="gq-prepared")
