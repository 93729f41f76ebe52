"""Admin for tasks, sessions and queued entries.

Read-only views of the state; every change is an action that calls a service
after checking the same capability as the API on the task's app (superusers
have all), and is recorded in the admin log. Staff see only tasks of apps in
groups they can read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from principals.admin import CapabilityAdmin, admin_principal
from principals.authz import Capability, has_capability, readable_groups
from principals.models import App, Group
from sessionqueues import admin_blocked, services
from sessionqueues import exceptions as err
from sessionqueues.models import AuditRecord, QueuedMessage, Session, Task


class ReadOnlyMixin:
    """State changes only through actions (services), never through forms."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class SessionQueueAdmin(ReadOnlyMixin, CapabilityAdmin):
    """Capabilities on the task's app; querysets narrowed to readable groups."""

    view_capability = Capability.SESSION_READ
    app_path = "app"

    def app_of(self, obj: Any) -> App:
        raise NotImplementedError

    def group_of(self, obj: Any) -> Group:
        return self.app_of(obj).group

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        groups = [g.pk for g in readable_groups(admin_principal(request))]
        return qs.filter(**{f"{self.app_path}__group__in": groups})

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def apply(
        self,
        request: HttpRequest,
        objects: Any,
        capability: Capability,
        change: Callable[[Any], str],
    ) -> None:
        """Run ``change(obj)`` (a service call returning the log message) on each
        object the staff user holds ``capability`` for; report the others."""
        principal = admin_principal(request)
        done = refused = 0
        for obj in objects:
            if not has_capability(principal, capability, self.app_of(obj)):
                refused += 1
                continue
            try:
                message = change(obj)
            except err.SessionQueueError as exc:
                messages.error(request, f"{obj}: {exc.message}")
                continue
            self.log_change(request, self.logged_object(obj), message)
            done += 1
        if done:
            messages.success(request, f"Done for {done} item(s).")
        if refused:
            messages.error(request, f"Refused for {refused} item(s): you lack the permission.")

    def logged_object(self, obj: Any) -> Any:
        return obj


class SessionInline(admin.TabularInline):
    model = Session
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ("id", "auto_run", "agent_ready", "generation", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_staff


@admin.register(Task)
class TaskAdmin(SessionQueueAdmin):
    list_display = ["__str__", "app", "archived", "generation", "created_at"]
    list_filter = ["archived"]
    search_fields = ["title", "id"]
    readonly_fields = ["id", "app", "title", "archived", "generation", "created_at"]
    inlines = [SessionInline]
    actions = ["purge_tasks", "archive_tasks"]

    def app_of(self, obj: Task) -> App:
        return obj.app

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("app__group")

    @admin.action(description="Purge selected tasks (delete every queued entry)")
    def purge_tasks(self, request: HttpRequest, queryset: Any) -> None:
        def purge(task: Task) -> str:
            removed, generation = services.queue_purge_task(task_id=task.pk)
            return f"Purged {removed} entries; generation is now {generation}."

        self.apply(request, queryset, Capability.TASK_ADMIN, purge)

    @admin.action(description="Archive selected tasks")
    def archive_tasks(self, request: HttpRequest, queryset: Any) -> None:
        def archive(task: Task) -> str:
            services.task_archive(task_id=task.pk)
            return "Archived."

        self.apply(request, queryset, Capability.TASK_ADMIN, archive)


@admin.register(Session)
class SessionAdmin(SessionQueueAdmin):
    app_path = "task__app"
    list_display = ["id", "task", "auto_run", "agent_ready", "entry_count", "created_at"]
    list_filter = ["auto_run", "agent_ready"]
    search_fields = ["id", "task__title"]
    readonly_fields = [
        "id",
        "task",
        "incarnation_id",
        "auto_run",
        "auto_merge",
        "agent_ready",
        "generation",
        "queue",
    ]
    actions = ["pause_auto_run", "resume_auto_run"]

    def app_of(self, obj: Session) -> App:
        return obj.task.app

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("task__app__group")

    def get_urls(self) -> list[Any]:
        """The blocked-heads page (``admin_blocked``), then the admin's own."""
        blocked = self.admin_site.admin_view(self.blocked)
        return [path("blocked/", blocked, name="sessionqueues_blocked"), *super().get_urls()]

    def blocked(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return admin_blocked.blocked_view(self, request)

    @admin.display(description="entries")
    def entry_count(self, obj: Session) -> int:
        return obj.messages.visible().count()

    @admin.display(description="queue (in order)")
    def queue(self, obj: Session) -> str:
        rows = list(obj.messages.in_order())
        if not rows:
            return "empty"
        return format_html(
            "<table><tr><th>#</th><th>content</th><th>queued by</th><th></th></tr>{}</table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                ((row.position, row.content[:120], row.queued_by, _marker(row)) for row in rows),
            ),
        )

    @admin.action(description="Pause auto-run")
    def pause_auto_run(self, request: HttpRequest, queryset: Any) -> None:
        self.apply(request, queryset, Capability.SESSION_EDIT, _set_auto_run(False))

    @admin.action(description="Resume auto-run")
    def resume_auto_run(self, request: HttpRequest, queryset: Any) -> None:
        self.apply(request, queryset, Capability.SESSION_EDIT, _set_auto_run(True))


def _marker(row: QueuedMessage) -> str:
    if row.reserved:
        return "RESERVED (in flight)"
    return "durable" if row.durable else ""


def _set_auto_run(enabled: bool) -> Callable[[Session], str]:
    def change(session: Session) -> str:
        services.session_set_auto_run(session_id=session.pk, enabled=enabled)
        return "Resumed auto-run." if enabled else "Paused auto-run."

    return change


@admin.register(QueuedMessage)
class QueuedMessageAdmin(SessionQueueAdmin):
    app_path = "task__app"
    list_display = ["position", "short_content", "queued_by", "state", "session_link"]
    list_filter = ["durable"]
    search_fields = ["content", "session__id"]
    ordering = ["session", "position"]
    readonly_fields = [
        "id",
        "session",
        "task",
        "position",
        "content",
        "model",
        "plan_mode",
        "attachments",
        "metadata",
        "queued_by",
        "queued_at",
        "coalesce_key",
        "durable",
        "reservation_id",
        "delivery_attempted",
    ]
    actions = ["delete_entries"]

    def app_of(self, obj: QueuedMessage) -> App:
        return obj.task.app

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("task__app__group", "session")

    @admin.display(description="content")
    def short_content(self, obj: QueuedMessage) -> str:
        return obj.content[:80]

    @admin.display(description="state")
    def state(self, obj: QueuedMessage) -> str:
        return _marker(obj) or "queued"

    @admin.display(description="session")
    def session_link(self, obj: QueuedMessage) -> str:
        url = reverse("admin:sessionqueues_session_change", args=[obj.session_id])
        return format_html('<a href="{}">{}</a>', url, obj.session_id)

    def logged_object(self, obj: QueuedMessage) -> Any:
        return obj.session

    @admin.action(description="Delete selected entries (reserved ones stay)")
    def delete_entries(self, request: HttpRequest, queryset: Any) -> None:
        def delete(row: QueuedMessage) -> str:
            services.entry_delete(session_id=row.session_id, entry_id=row.pk)
            return f"Deleted entry {row.pk} at position {row.position}."

        self.apply(request, queryset, Capability.SESSION_EDIT, delete)


@admin.register(AuditRecord)
class AuditRecordAdmin(SessionQueueAdmin):
    """Who did what to which blocked head, when, and how (read-only)."""

    list_display = ["at", "actor", "via", "action", "session_id", "entry_id", "note"]
    list_filter = ["action", "via"]
    search_fields = ["actor", "session_id", "note"]
    readonly_fields = [
        "at", "actor", "via", "action", "app", "task_id", "session_id", "entry_id",
        "note", "details",
    ]  # fmt: skip

    def app_of(self, obj: AuditRecord) -> App:
        return obj.app

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("app__group")
