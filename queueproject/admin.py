"""The admin's "Workers" page: the worker registry, read-only
(``queueproject.workers_registry`` writes it; nobody edits it by hand)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from queueproject import clock
from queueproject.models import WorkerProcess


@admin.register(WorkerProcess)
class WorkerProcessAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "kind",
        "host",
        "pid",
        "queue_list",
        "version",
        "started_at",
        "last_seen_at",
        "seen_ago",
        "count_summary",
    ]
    list_filter = ["kind", "host"]
    search_fields = ["id", "host"]
    readonly_fields = [
        "id",
        "kind",
        "host",
        "pid",
        "queues",
        "version",
        "started_at",
        "last_seen_at",
        "counts",
    ]
    fields = tuple(readonly_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="queues")
    def queue_list(self, obj: WorkerProcess) -> str:
        return ", ".join(obj.queues)

    @admin.display(description="last seen")
    def seen_ago(self, obj: WorkerProcess) -> str:
        return f"{max(0.0, (clock.now() - obj.last_seen_at).total_seconds()):.0f}s ago"

    @admin.display(description="counts")
    def count_summary(self, obj: WorkerProcess) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(obj.counts.items()) if isinstance(v, int))
