"""Admin for the outbox (issue 15): every row with its state (filter pending,
claimed, dead, done), attempts and last error, and the redrive action for dead
rows. Reading needs QUEUE_READ on the row's group, redriving QUEUE_MANAGE (the
API's capabilities, through ``CapabilityAdmin``); rows are never edited or
added here (``outbox.publish`` writes them in the business transaction)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from groupqueues.admin import GroupFilter, may
from principals.admin import CapabilityAdmin
from principals.authz import Capability
from principals.models import Group
from store import outbox
from store.models import OutboxMessage


@admin.register(OutboxMessage)
class OutboxAdmin(CapabilityAdmin):
    view_capability = Capability.QUEUE_READ
    change_capability = Capability.QUEUE_MANAGE
    list_display = ["id", "group__slug", "target_kind", "target_name", "state", "attempt",
                    "max_attempts", "deliver_after", "created_at", "short_error"]  # fmt: skip
    list_filter = ["state", "target_kind", GroupFilter]
    list_select_related = ["group"]
    search_fields = ["=id", "key", "target_name", "group__slug"]
    ordering = ["-created_at"]
    actions = ["redrive"]

    def group_of(self, obj: OutboxMessage) -> Group:
        return obj.group

    def get_queryset(self, request: HttpRequest) -> QuerySet[OutboxMessage]:
        qs = super().get_queryset(request)
        return self.readable(request, qs)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only form; redrive checks QUEUE_MANAGE per group

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # purge goes through the API (outbox_purge)

    def has_redrive_permission(self, request: HttpRequest) -> bool:
        return super().has_change_permission(request)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in OutboxMessage._meta.fields]

    @admin.display(description="last error")
    def short_error(self, obj: OutboxMessage) -> str:
        return obj.last_error[:80]

    @admin.action(description="Redrive selected dead rows", permissions=["redrive"])
    def redrive(self, request: HttpRequest, queryset: Any) -> None:
        """Dead rows of the groups the user may manage back to pending, each
        recorded in the admin log; other groups' rows are refused."""
        by_group: dict[Group, list[OutboxMessage]] = defaultdict(list)
        for row in queryset.filter(state="dead").select_related("group"):
            by_group[row.group].append(row)
        done = 0
        for group, rows in by_group.items():
            if not may(request, Capability.QUEUE_MANAGE, group):
                messages.error(request, f"{group.slug}: you may not manage its outbox.")
                continue
            for start in range(0, len(rows), outbox.MAX_REDRIVE_IDS):
                chunk = rows[start : start + outbox.MAX_REDRIVE_IDS]
                done += outbox.outbox_redrive(group=group, ids=[row.id for row in chunk])
            for row in rows:
                self.log_change(request, row, "Redriven")
        if done:
            messages.success(request, f"Redriven: {done} outbox row(s).")
        elif not by_group:
            messages.warning(request, "No dead rows selected.")
