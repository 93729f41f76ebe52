"""The error envelope and the one place that maps errors to HTTP.

Every error the API returns has the shape
``{"error": {"code": "<snake_case>", "message": "<sentence>", "details": {...}}}``.
Domain errors subclass :class:`DomainError` (one base per app, a subclass per
code); the DRF exception handler below maps them, DRF's own exceptions, and
Django's 404/413 to that envelope. ``api_not_found`` / ``server_error`` give the
same envelope to routing 404s and unexpected 500s under ``/api/``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class DomainError(Exception):
    """The request could not be carried out."""

    status_code: int = 400
    code: str = "invalid"

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None):
        self.message = message or (self.__doc__ or self.code).strip().splitlines()[0]
        self.details = details or {}
        super().__init__(self.message)


class InvalidInput(DomainError):
    """The request is not valid."""

    status_code = 400
    code = "invalid"


class NotFound(DomainError):
    """Not found."""

    status_code = 404
    code = "not_found"


class PermissionDenied(DomainError):
    """You do not have permission to perform this action."""

    status_code = 403
    code = "permission_denied"


class Conflict(DomainError):
    """The resource changed; the request conflicts with its current state."""

    status_code = 409
    code = "conflict"


class AlreadyExists(Conflict):
    """An object with that identity already exists."""

    code = "already_exists"


class PayloadTooLarge(DomainError):
    """The request body is larger than allowed."""

    status_code = 413
    code = "payload_too_large"


def envelope(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The error body every API error uses."""
    return {"error": {"code": code, "message": message, "details": details or {}}}


class Unavailable(DomainError):
    """The service cannot answer now (its database is unreachable or
    overloaded); retry after ``Retry-After`` seconds."""

    status_code = 503
    code = "unavailable"
    headers = {"Retry-After": "1"}


def _unavailable(exc: Exception) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A database that refuses or drops connections (too many clients, a
    restart, SQLite's busy timeout) or a web process whose connection pool
    had no connection free within ``DB_POOL_TIMEOUT``: 503, never 500, with
    ``Retry-After`` (also in ``details``). Nothing to undo: the next request
    reconnects (Django drops a broken connection at the request's end) or
    gets a connection once the pool has one free."""
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    exhausted = type(exc.__cause__).__name__ == "PoolTimeout"  # psycopg_pool's, wrapped by Django
    logger.warning("database %s: %s", "pool exhausted" if exhausted else "unavailable", first_line)
    message = (
        "No database connection came free in time (the server is busy or the "
        "database unreachable); retry shortly."
        if exhausted
        else "The database is unavailable; retry shortly."
    )
    retry_after = int(Unavailable.headers["Retry-After"])
    body = envelope(Unavailable.code, message, {"retry_after_seconds": retry_after})
    return Unavailable.status_code, body, dict(Unavailable.headers)


def _flatten_validation(detail: Any) -> Any:
    """DRF's ErrorDetail tree as plain strings/lists/dicts (for ``details``)."""
    if isinstance(detail, dict):
        return {str(k): _flatten_validation(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return [_flatten_validation(v) for v in detail]
    return str(detail)


def _validation_details(exc: drf.ValidationError) -> dict[str, Any]:
    detail = _flatten_validation(exc.detail)
    if isinstance(detail, dict):
        return detail
    return {"non_field_errors": detail if isinstance(detail, list) else [detail]}


# DRF exception class -> (status, code); the most specific first.
_DRF_CODES: list[tuple[type[drf.APIException], int, str]] = [
    (drf.NotAuthenticated, 401, "not_authenticated"),
    (drf.AuthenticationFailed, 401, "not_authenticated"),
    (drf.PermissionDenied, 403, "permission_denied"),
    (drf.NotFound, 404, "not_found"),
    (drf.MethodNotAllowed, 405, "method_not_allowed"),
    (drf.NotAcceptable, 406, "not_acceptable"),
    (drf.UnsupportedMediaType, 415, "unsupported_media_type"),
    (drf.Throttled, 429, "throttled"),
    (drf.ParseError, 400, "invalid"),
    (drf.ValidationError, 400, "invalid"),
]


def _from_drf(exc: drf.APIException) -> tuple[int, dict[str, Any], dict[str, str]]:
    headers: dict[str, str] = {}
    status, code = exc.status_code, "error"
    for cls, cls_status, cls_code in _DRF_CODES:
        if isinstance(exc, cls):
            status, code = cls_status, cls_code
            break
    if isinstance(exc, drf.ValidationError):
        body = envelope(code, "The request is not valid.", _validation_details(exc))
    else:
        body = envelope(code, str(exc.detail))
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="api"'
    # DRF's Throttled.__init__ sets ``wait``; djangorestframework-stubs leave it out.
    if isinstance(exc, drf.Throttled) and exc.wait is not None:  # type: ignore[attr-defined]
        headers["Retry-After"] = str(max(1, int(exc.wait + 0.999)))  # type: ignore[attr-defined]
        body["error"]["details"] = {"retry_after_seconds": int(headers["Retry-After"])}
    return status, body, headers


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's EXCEPTION_HANDLER: every handled error as the envelope."""
    headers: dict[str, str] = {}
    if isinstance(exc, DomainError):
        status = exc.status_code
        body = envelope(exc.code, exc.message, exc.details)
        headers.update(getattr(exc, "headers", {}) or {})
    elif isinstance(exc, Http404):
        status, body = 404, envelope("not_found", "Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        status, body = 403, envelope("permission_denied", PermissionDenied.__doc__ or "")
    elif isinstance(exc, RequestDataTooBig):
        status, body = 413, envelope("payload_too_large", PayloadTooLarge.__doc__ or "")
    elif isinstance(exc, drf.APIException):
        status, body, headers = _from_drf(exc)
    elif isinstance(exc, OperationalError | InterfaceError):
        status, body, headers = _unavailable(exc)
    else:
        return None  # unexpected: Django's 500 handler answers (see server_error)
    from rest_framework.views import set_rollback  # late: DRF settings import this module

    set_rollback()
    return Response(body, status=status, headers=headers)


@csrf_exempt
def api_not_found(request: Any, *args: Any, **kwargs: Any) -> JsonResponse:
    """Routing 404 under /api/ (a catch-all URL, so it holds with DEBUG on too),
    for every method: exempt from the CSRF check, which would otherwise answer
    an unsafe method's 404 with a 403 page (it changes nothing to protect)."""
    return JsonResponse(envelope("not_found", f"No API endpoint at {request.path}."), status=404)


def csrf_failure(request: Any, reason: str = "") -> Any:
    """CSRF_FAILURE_VIEW: the envelope (403 permission_denied) for API paths,
    Django's page elsewhere."""
    if request.path.startswith("/api/"):
        message = f"CSRF Failed: {reason}" if reason else PermissionDenied.__doc__ or ""
        return JsonResponse(envelope("permission_denied", message), status=403)
    from django.views.csrf import csrf_failure as default

    return default(request, reason=reason)


def server_error(request: Any, *args: Any, **kwargs: Any) -> Any:
    """handler500: the envelope for API paths, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(envelope("internal_error", "Internal server error."), status=500)
    from django.views.defaults import server_error as default

    return default(request)


def page_not_found(request: Any, exception: Exception) -> Any:
    """handler404: the envelope for API paths, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return api_not_found(request)
    from django.views.defaults import page_not_found as default

    return default(request, exception)
