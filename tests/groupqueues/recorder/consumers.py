"""``record``: appends one line per delivery, ``<app slug or -> <message id>``,
to the file named by the environment's ``RECORD_DELIVERIES_TO``: which
consumer (app) each message was delivered as, seen from the handler."""

from __future__ import annotations

import os

from groupqueues.handlers import Delivery, handlers

ENV = "RECORD_DELIVERIES_TO"


@handlers.register("record")
def record(delivery: Delivery) -> None:
    line = f"{delivery.app_slug or '-'} {delivery.id}\n".encode()
    fd = os.open(os.environ[ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)  # one short O_APPEND write: lines of threads never interleave
    finally:
        os.close(fd)


def recorded(path: str) -> list[tuple[str, str]]:
    """The (app, message id) lines recorded in ``path``."""
    rows: list[tuple[str, str]] = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                app, message_id = line.split()
                rows.append((app, message_id))
    return rows
