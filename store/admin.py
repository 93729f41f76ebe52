"""Admin for the store primitives. Schedules: a list with their next five
boundaries and whether code declares them (``QUEUE_SCHEDULES``), and the
pause / resume / run-now actions, each recorded in the admin log. Reading
needs QUEUE_READ on the owning group, the actions and deleting QUEUE_MANAGE
(the API's capabilities, through ``CapabilityAdmin``). Schedules are created
and changed through the API, the ``create_schedule`` command or the setting,
so that every rule lives in ``store.schedules``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join

from groupqueues.admin import GroupFilter, may
from principals.admin import CapabilityAdmin
from principals.authz import Capability
from principals.models import Group
from store import (
    channel_admin,  # noqa: F401  (registers the notify channel pages)
    lock_admin,  # noqa: F401  (registers the read-only lock list)
    schedules,
    stream_admin,  # noqa: F401  (registers topics and stream consumers)
)
from store.exceptions import ScheduleError
from store.models import Schedule


@admin.register(Schedule)
class ScheduleAdmin(CapabilityAdmin):
    view_capability = Capability.QUEUE_READ
    change_capability = Capability.QUEUE_MANAGE
    list_display = ["name", "group__slug", "collection", "expression", "timezone", "paused",
                    "declared_in_code", "last_fired_at", "next_boundaries"]  # fmt: skip
    list_filter = ["paused", "declared_in_code", GroupFilter]
    list_select_related = ["group"]
    search_fields = ["name", "group__slug", "collection"]
    actions = ["pause", "resume", "run_now"]

    def group_of(self, obj: Schedule) -> Group:
        return obj.group

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        qs = super().get_queryset(request)
        return self.readable(request, qs)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only form; the actions check QUEUE_MANAGE per schedule

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return super().has_change_permission(request)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in Schedule._meta.fields] + ["next_boundaries"]

    @admin.display(description="next 5 boundaries")
    def next_boundaries(self, obj: Schedule) -> str:
        if obj.paused:
            return "paused"
        try:
            upcoming = schedules.schedule_upcoming(schedule=obj)
        except ScheduleError as exc:
            return str(exc)
        return format_html_join(", ", "{}", ((b.isoformat(timespec="seconds"),) for b in upcoming))

    def _act(self, request: HttpRequest, queryset: Any, verb: str,
             act: Callable[[Schedule], Any]) -> None:  # fmt: skip
        """``act`` on each schedule the user may manage, logged; refusals and
        errors reported."""
        done = 0
        for schedule in queryset:
            if not may(request, Capability.QUEUE_MANAGE, schedule.group):
                messages.error(request, f"{schedule}: you may not manage it.")
                continue
            try:
                act(schedule)
            except Exception as exc:  # a domain error of the enqueue: report, go on
                messages.error(request, f"{schedule}: {exc}")
                continue
            self.log_change(request, schedule, verb)
            done += 1
        if done:
            messages.success(request, f"{verb}: {done} schedule(s).")

    @admin.action(description="Pause selected schedules", permissions=["manage"])
    def pause(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "Paused", lambda s: schedules.schedule_pause(schedule=s))

    @admin.action(description="Resume selected schedules", permissions=["manage"])
    def resume(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "Resumed", lambda s: schedules.schedule_resume(schedule=s))

    @admin.action(description="Run selected schedules now", permissions=["manage"])
    def run_now(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "Ran now", lambda s: schedules.schedule_run_now(schedule=s))


from store import outbox_admin  # noqa: E402, F401  (registers the outbox list)
