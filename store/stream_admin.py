"""Admin for streams: topics with their head offset, first available offset,
retained entries and consumers with their lag (head - committed), and the
consumers' own list. Reading needs QUEUE_READ on the owning group; the
actions (purge and prune a topic, reset a consumer to the earliest retained
entry or to the head) need QUEUE_MANAGE, as in the API, and are recorded in
the admin log. Topics are created and changed through the API or the
commands, so that every rule lives in ``store.streams``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join

from groupqueues.admin import GroupFilter, may
from principals.admin import CapabilityAdmin, admin_principal
from principals.authz import Capability, readable_groups
from principals.models import Group
from store import streams
from store.models import StreamConsumer, Topic


class ReadOnly(CapabilityAdmin):
    view_capability = Capability.QUEUE_READ
    change_capability = Capability.QUEUE_MANAGE

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only pages; the actions check QUEUE_MANAGE per object

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return super().has_change_permission(request)

    def _act(self, request: HttpRequest, objects: Any, verb: str,
             act: Callable[[Any], Any]) -> None:  # fmt: skip
        """``act`` on each object whose group the user may manage, logged."""
        done = 0
        for obj in objects:
            if not may(request, Capability.QUEUE_MANAGE, self.group_of(obj)):
                messages.error(request, f"{obj}: you may not manage it.")
                continue
            act(obj)
            self.log_change(request, obj, verb)
            done += 1
        if done:
            messages.success(request, f"{verb}: {done}.")


@admin.register(Topic)
class TopicAdmin(ReadOnly):
    list_display = ["name", "group__slug", "head_offset", "first_offset", "retained",
                    "consumer_count", "max_lag", "retention_seconds", "max_entries"]  # fmt: skip
    list_filter = [GroupFilter]
    list_select_related = ["group"]
    search_fields = ["name", "group__slug"]
    actions = ["purge", "prune"]
    fields = readonly_fields = ("group", "name", "head_offset", "first_offset", "retained",
                                "retention_seconds", "max_entries", "max_payload_bytes",
                                "created_at", "consumers_and_lag")  # fmt: skip

    def group_of(self, obj: Topic) -> Group:
        return obj.group

    def get_queryset(self, request: HttpRequest) -> QuerySet[Topic]:
        qs: QuerySet[Topic] = super().get_queryset(request)
        qs = qs.annotate(n_consumers=Count("consumers"))
        return self.readable(request, qs)

    @admin.display(description="first offset")
    def first_offset(self, obj: Topic) -> int:
        return obj.first_offset

    @admin.display(description="retained")
    def retained(self, obj: Topic) -> int:
        return obj.head_offset - obj.pruned_through

    @admin.display(description="consumers", ordering="n_consumers")
    def consumer_count(self, obj: Topic) -> int:
        return getattr(obj, "n_consumers", 0)

    @admin.display(description="max lag")
    def max_lag(self, obj: Topic) -> int | None:
        lags = [streams.consumer_lag(c) for c in streams.consumers_of(topic=obj)]
        return max(lags) if lags else None

    @admin.display(description="consumers (committed offset, lag)")
    def consumers_and_lag(self, obj: Topic) -> str:
        rows = ((c.name, c.committed_offset, streams.consumer_lag(c))
                for c in streams.consumers_of(topic=obj))  # fmt: skip
        return format_html_join(", ", "{} at {} (lag {})", rows) or "none"

    @admin.action(description="Purge selected topics (delete every entry)",
                  permissions=["manage"])  # fmt: skip
    def purge(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "Purged", lambda t: streams.topic_purge(topic=t))

    @admin.action(description="Apply retention now", permissions=["manage"])
    def prune(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "Pruned", lambda t: streams.topic_prune(topic=t))


@admin.register(StreamConsumer)
class StreamConsumerAdmin(ReadOnly):
    list_display = ["name", "topic", "committed_offset", "lag", "committed_at"]
    list_select_related = ["topic", "topic__group"]
    search_fields = ["name", "topic__name", "topic__group__slug"]
    actions = ["reset_earliest", "reset_latest"]

    def group_of(self, obj: StreamConsumer) -> Group:
        return obj.topic.group

    def get_queryset(self, request: HttpRequest) -> QuerySet[StreamConsumer]:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        groups = [g.pk for g in readable_groups(admin_principal(request))]
        return qs.filter(topic__group__in=groups)

    @admin.display(description="lag")
    def lag(self, obj: StreamConsumer) -> int:
        return streams.consumer_lag(obj)

    @admin.action(description="Reset to the earliest retained entry", permissions=["manage"])
    def reset_earliest(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "Reset to earliest", lambda c: streams.consumer_reset(
            topic=c.topic, name=c.name, to="earliest"))  # fmt: skip

    @admin.action(description="Reset to the head (skip everything)", permissions=["manage"])
    def reset_latest(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "Reset to latest", lambda c: streams.consumer_reset(
            topic=c.topic, name=c.name, to="latest"))  # fmt: skip
