"""Admin for notify channels: the list with each channel's head (latest id),
how many notifications it retains and when the latest was published, the
retained notifications on its page (newest first), and the purge action
(recorded in the admin log). Reading needs QUEUE_READ on the owning group,
purging and deleting QUEUE_MANAGE (the API's capabilities, through
``CapabilityAdmin``). Channels are created through the API or
``manage.py create_channel``, so that every rule lives in ``store.channels``."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from groupqueues.admin import GroupFilter, may
from principals.admin import CapabilityAdmin, admin_principal
from principals.authz import Capability, readable_groups
from principals.models import Group
from store import channels
from store.models import Channel, Notification

RECENT = 50  # notifications shown on a channel's page


@admin.register(Channel)
class ChannelAdmin(CapabilityAdmin):
    view_capability = Capability.QUEUE_READ
    change_capability = Capability.QUEUE_MANAGE
    list_display = ["name", "group__slug", "last_seq", "retained", "latest_published_at",
                    "created_at"]  # fmt: skip
    list_filter = [GroupFilter]
    list_select_related = ["group"]
    search_fields = ["name", "group__slug"]
    readonly_fields = ["group", "name", "last_seq", "created_at", "recent"]
    fields = ["group", "name", "last_seq", "created_at", "recent"]
    actions = ["purge"]

    def group_of(self, obj: Channel) -> Group:
        return obj.group

    def get_queryset(self, request: HttpRequest) -> QuerySet[Channel]:
        qs: QuerySet[Channel] = super().get_queryset(request)
        qs = qs.annotate(
            n_retained=Count("notifications"), latest=Max("notifications__published_at")
        )
        if not request.user.is_superuser:
            qs = qs.filter(group__in=[g.pk for g in readable_groups(admin_principal(request))])
        return qs

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only page; purge checks QUEUE_MANAGE per channel

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return super().has_change_permission(request)

    def delete_model(self, request: HttpRequest, obj: Channel) -> None:
        channels.channel_delete(channel=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Channel]) -> None:
        for channel in queryset:
            channels.channel_delete(channel=channel)

    @admin.display(description="retained", ordering="n_retained")
    def retained(self, obj: Channel) -> int:
        return int(getattr(obj, "n_retained", 0))

    @admin.display(description="latest published", ordering="latest")
    def latest_published_at(self, obj: Channel) -> Any:
        return getattr(obj, "latest", None)

    @admin.display(description=f"retained notifications (newest {RECENT})")
    def recent(self, obj: Channel) -> str:
        notes = Notification.objects.filter(channel=obj).order_by("-seq")[:RECENT]
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            ((n.seq, n.published_at.isoformat(timespec="seconds"), n.idempotency_key or "",
              json.dumps(n.payload)[:500]) for n in notes),
        )  # fmt: skip
        head = "<tr><th>id</th><th>published</th><th>idempotency key</th><th>payload</th></tr>"
        return format_html("<table>{}{}</table>", mark_safe(head), rows)

    @admin.action(description="Purge retained notifications", permissions=["manage"])
    def purge(self, request: HttpRequest, queryset: Any) -> None:
        done = 0
        for channel in queryset:
            if not may(request, Capability.QUEUE_MANAGE, channel.group):
                messages.error(request, f"{channel}: you may not manage it.")
                continue
            deleted = channels.channel_purge(channel=channel)
            self.log_change(request, channel, f"Purged {deleted} notification(s)")
            done += 1
        if done:
            messages.success(request, f"Purged {done} channel(s).")
