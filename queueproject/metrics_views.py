"""``GET /metrics``: the Prometheus text exposition (``queueproject.metrics``).

Two gates, both must pass: the client address must sit in one of
``METRICS_ALLOWED_NETWORKS`` (default loopback only; 403 otherwise), and,
while ``METRICS_REQUIRE_TOKEN`` is on (the default), the request must carry
credentials that pass ``METRICS_PERMISSION_CLASSES`` (the principals app's
check: a staff user's token with the ``metrics:read`` scope; 401 without
credentials, 403 without the scope). Errors use the API's error envelope.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.utils.module_loading import import_string
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from queueproject import metrics
from queueproject.conf import product_settings
from queueproject.exceptions import PermissionDenied
from queueproject.schema import error

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def _networks(spec: tuple[str, ...]) -> tuple[Network, ...]:
    try:
        return tuple(ipaddress.ip_network(n.strip(), strict=False) for n in spec if n.strip())
    except ValueError as exc:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_NETWORKS: {exc}") from None


def address_allowed(address: str) -> bool:
    """Whether ``address`` (the request's REMOTE_ADDR) may scrape."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in _networks(product_settings().metrics_allowed_networks))


class _JSONErrors(BaseContentNegotiation):
    """Errors are the JSON envelope whatever a scraper accepts (Prometheus
    sends ``Accept: text/plain``…); the exposition itself is an HttpResponse."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        return (JSONRenderer(), JSONRenderer.media_type)

    def select_parser(self, request: Any, parsers: Any) -> Any:
        return None


class MetricsView(APIView):
    content_negotiation_class = _JSONErrors
    renderer_classes = [JSONRenderer]
    throttle_classes: list[Any] = []

    def get_permissions(self) -> list[Any]:
        if not product_settings().metrics_require_token:
            return []
        return [import_string(path)() for path in settings.METRICS_PERMISSION_CLASSES]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        if not address_allowed(request.META.get("REMOTE_ADDR", "")):
            raise PermissionDenied("Scraping /metrics is not allowed from this address.")
        super().initial(request, *args, **kwargs)

    @extend_schema(
        operation_id="metrics",
        summary="Prometheus metrics (text exposition)",
        description="Needs a staff token with the metrics:read scope, from an allowed network.",
        responses={
            (200, "text/plain"): OpenApiResponse(response=str, description="the exposition"),
            401: error("not_authenticated: no credentials (while a token is required)"),
            403: error(
                "permission_denied: no metrics:read scope, not staff, or not an allowed network"
            ),
        },
        tags=["observability"],
    )
    def get(self, request: Request) -> HttpResponse:
        return HttpResponse(metrics.render(), content_type=CONTENT_TYPE)
