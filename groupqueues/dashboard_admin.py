"""Admin pages of issue 16, under the collections' admin:
``/admin/groupqueues/collection/dashboard/`` (history charts and the top
collections, for the queues the staff user may read) and
``/admin/groupqueues/collection/health/`` (the database health of the queue
tables, and REINDEX CONCURRENTLY of their indexes; superusers only: it shows
every database session)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from groupqueues import dashboard, health
from groupqueues.services import history
from groupqueues.services.storage import queue_indexes_reindex

# The health page's thresholds, overridable as query parameters (seconds).
THRESHOLDS = (
    ("max_xact_age", health.MAX_XACT_AGE_SECONDS),
    ("max_idle_age", health.MAX_IDLE_IN_TRANSACTION_SECONDS),
)


def _seconds(request: HttpRequest, name: str, default: float) -> float:
    raw = request.GET.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < 1e9:
        raise ValueError(f"{name}: a number of seconds, 0 or more")
    return value


def admin_urls(model_admin: admin.ModelAdmin[Any]) -> list[URLPattern]:
    """The pages' URLs, for ``CollectionAdmin.get_urls``."""
    site = model_admin.admin_site

    def dashboard_page(request: HttpRequest) -> HttpResponse:
        return dashboard_view(model_admin, request)

    def health_page(request: HttpRequest) -> HttpResponse:
        return health_view(model_admin, request)

    return [
        path("dashboard/", site.admin_view(dashboard_page), name="groupqueues_dashboard"),
        path("health/", site.admin_view(health_page), name="groupqueues_health"),
    ]


def dashboard_view(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    window = request.GET.get("window", dashboard.DEFAULT_WINDOW)
    if window not in dashboard.WINDOWS:
        return HttpResponseBadRequest(f"window: one of {', '.join(dashboard.WINDOWS)}")
    queues = model_admin.get_queryset(request).select_related("group")
    group = request.GET.get("group")
    if group:
        queues = queues.filter(group__slug=group)
    board = dashboard.dashboard(collections=list(queues), window=window)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": "Queue dashboard",
        "board": board,
        "windows": list(dashboard.WINDOWS),
        "group": group or "",
        "retention_days": f"{history.sample_retention() / 86400:g}",
    }
    return TemplateResponse(request, "admin/groupqueues/dashboard.html", context)


def health_view(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    if not request.user.is_superuser:
        raise PermissionDenied
    if request.method == "POST":
        if request.POST.get("action") != "reindex":
            return HttpResponseBadRequest("action: reindex")
        done = queue_indexes_reindex()
        seconds = sum(d.seconds for d in done)
        messages.success(request, f"Rebuilt {len(done)} indexes in {seconds:.1f}s.")
        return redirect("admin:groupqueues_health")
    try:
        thresholds = {name: _seconds(request, name, default) for name, default in THRESHOLDS}
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc))
    report = health.database_health(**thresholds)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": "Queue database health",
        "health": report,
        "holder": next((t for t in report.transactions if t.holds_xmin), None),
        **thresholds,
    }
    return TemplateResponse(request, "admin/groupqueues/health.html", context)
