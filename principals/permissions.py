"""Authorisation for views: DRF permission classes and the ``require`` helper,
both thin wrappers over ``principals.authz.has_capability``."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

from principals.authentication import principal_of
from principals.authz import (
    QUEUE_CAPABILITIES,
    Capability,
    Principal,
    can_see_app_sessions,
    can_see_queues,
    has_capability,
    may_read_metrics,
)
from principals.models import App, Group
from queueproject.exceptions import NotFound, PermissionDenied


class IsPrincipal(BasePermission):
    """Authenticated user or app (fails closed for anonymous requests -> 401)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return principal_of(request).is_authenticated


def require(
    request: Any,
    capability: Capability,
    target: Group | App,
    *,
    not_found: type[NotFound] = NotFound,
) -> Principal:
    """Return the request's principal if it has ``capability`` on ``target``.

    Raises ``not_found`` (404) when the principal cannot see the target at all,
    so ids cannot be probed, and PermissionDenied (403) when it can see the
    target but lacks this capability.
    """
    principal = principal_of(request)
    if has_capability(principal, capability, target):
        return principal
    if capability in QUEUE_CAPABILITIES or capability is Capability.GROUP_MANAGE_ACCESS:
        assert isinstance(target, Group)
        visible = can_see_queues(principal, target)
    else:
        assert isinstance(target, App)
        visible = can_see_app_sessions(principal, target)
    if not visible:
        raise not_found()
    raise PermissionDenied()


class CanReadMetrics(BasePermission):
    """``/metrics``: a staff principal with the ``metrics:read`` scope
    (``principals.authz.may_read_metrics``); anonymous requests get 401."""

    def has_permission(self, request: Any, view: Any) -> bool:
        principal = principal_of(request)
        if not principal.is_authenticated:
            return False  # DRF answers 401 (not_authenticated) for anonymous requests
        if not may_read_metrics(principal):
            raise PermissionDenied("Scraping /metrics needs a staff token with metrics:read.")
        return True
