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

        _runserver_without_nagle()


def _runserver_without_nagle() -> None:
    """``manage.py runserver`` (``make run``) writes each response in several
    small sends (status line, headers, body: wsgiref). With Nagle's algorithm
    on, every send after the first waits for the client's delayed ACK, about
    40 ms per response on Linux, which was most of a request's time there
    (bench/README.md, "The REST API under load"). TCP_NODELAY sends them at
    once; uvicorn sets it already."""
    from django.core.servers.basehttp import WSGIRequestHandler

    WSGIRequestHandler.disable_nagle_algorithm = True
