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

        _runserver_for_concurrent_clients()


def _runserver_for_concurrent_clients() -> None:
    """Two settings of ``manage.py runserver`` (``make run``) that concurrent
    API clients need (bench/README.md, "The REST API under load"):

    - it writes each response in several small sends (status line, headers,
      body: wsgiref); with Nagle's algorithm on, every send after the first
      waits for the client's delayed ACK, about 40 ms per response on Linux,
      most of a request's time there. TCP_NODELAY sends them at once (uvicorn
      sets it already);
    - its listen backlog is 10: dozens of clients connecting at once overflow
      it, and the kernel then drops or resets some of their connections.
      uvicorn's is 2048; 128 is enough here."""
    from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer

    WSGIRequestHandler.disable_nagle_algorithm = True
    WSGIServer.request_queue_size = max(WSGIServer.request_queue_size, 128)
