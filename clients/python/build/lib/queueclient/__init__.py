"""Python client of the durable queues REST API, and a remote worker.

Only dependency: httpx. See ``Client`` and ``RemoteWorker``."""

from queueclient.client import AppQueue, Client, Queue, SessionQueue
from queueclient.errors import (
    AlreadyExists,
    Conflict,
    InvalidRequest,
    LeaseLost,
    NotAuthenticated,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    QueueClientError,
    QueueFull,
    ServerError,
    Throttled,
    TransportError,
    Unavailable,
)
from queueclient.models import (
    AckEntry,
    AckResult,
    ClaimedMessage,
    Enqueued,
    Message,
    Page,
    QueueStats,
    Reservation,
)
from queueclient.worker import RemoteWorker

__all__ = [
    "AckEntry", "AckResult", "AlreadyExists", "AppQueue", "ClaimedMessage", "Client",
    "Conflict", "Enqueued", "InvalidRequest", "LeaseLost", "Message", "NotAuthenticated",
    "NotFound", "Page", "PayloadTooLarge", "PermissionDenied", "Queue", "QueueClientError",
    "QueueFull", "QueueStats", "RemoteWorker", "Reservation", "ServerError", "SessionQueue",
    "Throttled", "TransportError", "Unavailable",
]  # fmt: skip
