"""The server's error envelope as exceptions: one class per error code.

Every error the API answers is ``{"error": {"code", "message", "details"}}``;
``error_from`` turns a response into the most specific class for its code
(falling back on the HTTP status), so callers catch what they mean::

    try:
        queue.ack(message)
    except LeaseLost:
        ...  # someone else holds it now
"""

from __future__ import annotations

from typing import Any

import httpx


class QueueClientError(Exception):
    """A request failed: ``status`` (0 when no answer came), ``code``,
    ``message`` and ``details`` from the error envelope."""

    status: int = 0
    code: str = "error"

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status or type(self).status
        self.code = code or type(self).code
        self.details = details or {}

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}" if self.status else self.message


class TransportError(QueueClientError):
    """No answer from the server (connection refused, timed out, reset)."""

    code = "transport"


class InvalidRequest(QueueClientError):
    """400: the request is not valid (``details`` names the fields)."""

    status, code = 400, "invalid"


class NotAuthenticated(QueueClientError):
    """401: missing, unknown, expired or revoked token."""

    status, code = 401, "not_authenticated"


class PermissionDenied(QueueClientError):
    """403: the token may not do this."""

    status, code = 403, "permission_denied"


class NotFound(QueueClientError):
    """404: no such group, app, queue, message, session, …"""

    status, code = 404, "not_found"


class Conflict(QueueClientError):
    """409: the state changed under the request."""

    status, code = 409, "conflict"


class LeaseLost(Conflict):
    """409 ``lease_lost``: the claim is no longer held (stale token, lapsed lease)."""

    code = "lease_lost"


class AlreadyExists(Conflict):
    """409 ``already_exists``."""

    code = "already_exists"


class PayloadTooLarge(QueueClientError):
    """413: the body or the message payload is over the limit."""

    status, code = 413, "payload_too_large"


class QueueFull(QueueClientError):
    """429 ``queue_full`` (a collection's ``max_depth``) or 409 ``queue_full``
    (a session queue's cap)."""

    status, code = 429, "queue_full"


class Throttled(QueueClientError):
    """429 ``throttled``: too many requests; ``retry_after`` seconds to wait."""

    status, code = 429, "throttled"

    @property
    def retry_after(self) -> float | None:
        value = self.details.get("retry_after_seconds")
        return float(value) if isinstance(value, int | float) else None


class Unavailable(QueueClientError):
    """503: the server cannot serve now (database unreachable, overloaded)."""

    status, code = 503, "unavailable"


class ServerError(QueueClientError):
    """Any other 5xx."""

    status, code = 500, "server_error"


_BY_CODE: dict[str, type[QueueClientError]] = {
    "lease_lost": LeaseLost,
    "already_exists": AlreadyExists,
    "queue_full": QueueFull,
    "throttled": Throttled,
    "collection_not_found": NotFound,
}
_BY_STATUS: dict[int, type[QueueClientError]] = {
    400: InvalidRequest, 401: NotAuthenticated, 403: PermissionDenied, 404: NotFound,
    409: Conflict, 413: PayloadTooLarge, 429: Throttled, 503: Unavailable,
}  # fmt: skip


def error_from(response: httpx.Response) -> QueueClientError:
    """The exception for an error response (envelope or not)."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
        details = error.get("details") or {}
    except (ValueError, KeyError, TypeError):
        code, message, details = "", response.text[:200] or response.reason_phrase, {}
    cls = _BY_CODE.get(code) or _BY_STATUS.get(response.status_code)
    if cls is None:
        cls = ServerError if response.status_code >= 500 else QueueClientError
    return cls(message, status=response.status_code, code=code, details=details)
