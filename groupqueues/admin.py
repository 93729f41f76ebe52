"""Admin for group queues: collections with live depths, their settings,
pause/resume, purge and redrive; a read-only message browser with cancel and
redrive.

Every action goes through ``groupqueues.services`` and is checked per object
with the same capability function as the API (``CapabilityAdmin``): reading
needs QUEUE_READ on the owning group, settings / pause / purge / redrive need
QUEUE_MANAGE, cancel needs QUEUE_CONSUME. Each action is recorded in the admin
log. Superusers may do everything.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from groupqueues import admin_dead, admin_keys, selectors, services
from groupqueues.exceptions import GroupQueueError, InvalidQueueInput
from groupqueues.excerpts import error_excerpt, payload_excerpt
from groupqueues.models import Collection, CollectionKind, Fairness, Message, MessageState
from groupqueues.selectors import QueueStats
from groupqueues.services.collections import parse_rate_limit
from groupqueues.settings_ranges import SETTING_RANGES
from groupqueues.validation import PRIORITY_MAX, PRIORITY_MIN
from principals.admin import CapabilityAdmin, admin_principal
from principals.authz import Capability, has_capability, readable_groups
from principals.models import Group
from queueproject.models import WorkerProcess

SETTINGS = [
    "max_payload_bytes", "default_max_attempts", "visibility_timeout", "retry_backoff_base",
    "retry_backoff_max", "dead_retention", "max_depth", "paused",
    # ordering keys, fairness and limits (SPEC §7)
    "fairness", "max_in_flight", "max_in_flight_per_key", "rate_limit",
]  # fmt: skip


def groups_where(request: HttpRequest, capability: Capability) -> list[Group]:
    """Groups on which the staff user has ``capability`` (all for superusers),
    computed once per request: the admin asks for every permission check."""
    cache: dict[Capability, list[Group]] = request.__dict__.setdefault("_gq_groups_where", {})
    if capability not in cache:
        principal = admin_principal(request)
        cache[capability] = [
            g
            for g in readable_groups(principal)
            if principal.is_superuser or has_capability(principal, capability, g)
        ]
    return cache[capability]


def may(request: HttpRequest, capability: Capability, group: Group) -> bool:
    return request.user.is_superuser or has_capability(admin_principal(request), capability, group)


class GroupFilter(admin.SimpleListFilter):
    """The groups whose queues the staff user can read (never the others)."""

    title = "group"
    parameter_name = "group"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(g.pk), g.slug) for g in readable_groups(admin_principal(request))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        return queryset.filter(group_id=self.value()) if self.value() else queryset


# --------------------------------------------------------------- collections

LIVE_STATS = "live_stats"


def live_stats(obj: Collection) -> QueueStats:
    """The stats ``CollectionAdmin.get_changelist_instance`` left on ``obj`` for
    its changelist page (an admin attribute, not the model's)."""
    stats: QueueStats = obj.__dict__[LIVE_STATS]
    return stats


def setting_field(name: str) -> forms.Field:
    """The form field of collection setting ``name``, ranged by ``SETTING_RANGES``."""
    r = SETTING_RANGES[name]
    if r.seconds:
        return forms.FloatField(min_value=r.low, max_value=r.high, required=not r.nullable)
    # An integer setting's range is integral (``SettingRange``).
    return forms.IntegerField(min_value=int(r.low), max_value=int(r.high), required=not r.nullable)


class CollectionForm(forms.ModelForm):
    """Settings with the API's ranges; the name and group are fixed once created."""

    max_payload_bytes = setting_field("max_payload_bytes")
    default_max_attempts = setting_field("default_max_attempts")
    visibility_timeout = setting_field("visibility_timeout")
    retry_backoff_base = setting_field("retry_backoff_base")
    retry_backoff_max = setting_field("retry_backoff_max")
    dead_retention = setting_field("dead_retention")
    max_depth = setting_field("max_depth")
    max_in_flight = setting_field("max_in_flight")
    max_in_flight_per_key = setting_field("max_in_flight_per_key")
    rate_limit = forms.CharField(
        required=False, max_length=20, help_text='"100/s", "1000/min" or "10/h"; empty: none.'
    )

    class Meta:
        model = Collection
        fields = ["group", "name", *SETTINGS]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["fairness"].required = False
        if self.instance.pk is not None:
            self.fields["rate_limit"].initial = self.instance.rate_limit

    def clean_fairness(self) -> str:
        return self.cleaned_data["fairness"] or Fairness.NONE

    def clean_rate_limit(self) -> str | None:
        """The rate limit as the service reads it (None: none), checked by it."""
        value = self.cleaned_data["rate_limit"] or None
        try:
            parse_rate_limit(value)
        except InvalidQueueInput as exc:
            raise forms.ValidationError(str(exc)) from exc
        return value


@admin.register(Collection)
class CollectionAdmin(CapabilityAdmin):
    form = CollectionForm
    view_capability = Capability.QUEUE_READ
    change_capability = Capability.QUEUE_MANAGE
    list_display = [
        "name", "group__slug", "paused", "depth", "pending", "in_flight", "delayed", "dead",
        "oldest_pending_age", "visibility_timeout", "default_max_attempts", "max_depth",
    ]  # fmt: skip
    list_filter = ["paused", GroupFilter]
    list_select_related = ["group"]
    search_fields = ["name", "group__slug"]
    readonly_fields = ["stats_summary", "ordering_keys"]
    actions = ["pause", "resume", "redrive_dead", "purge"]

    def group_of(self, obj: Collection) -> Group:
        return obj.group

    def get_queryset(self, request: HttpRequest) -> QuerySet[Collection]:
        qs = super().get_queryset(request).filter(kind=CollectionKind.QUEUE)
        return self.readable(request, qs)

    # permissions: managing needs QUEUE_MANAGE; collections are never deleted here
    def has_add_permission(self, request: HttpRequest) -> bool:
        if not self._staff(request):
            return False
        return request.user.is_superuser or bool(groups_where(request, Capability.QUEUE_MANAGE))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is None:
            return self.has_add_permission(request)
        return self._may(request, Capability.QUEUE_MANAGE, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return self.has_add_permission(request)

    @staticmethod
    def _staff(request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        return ["group", "name", "stats_summary", "ordering_keys"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "group":
            groups = groups_where(request, Capability.QUEUE_MANAGE)
            kwargs["queryset"] = Group.objects.filter(pk__in=[g.pk for g in groups])
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Collection, form: Any, change: bool) -> None:
        """Create or update through the services (the form already checked ranges)."""
        if change:
            changed = {f: form.cleaned_data[f] for f in SETTINGS if f in form.changed_data}
            services.collection_update(collection=obj, **changed)
            return
        settings = {f: form.cleaned_data[f] for f in SETTINGS}
        created = services.collection_create(group=obj.group, name=obj.name, **settings)
        obj.pk, obj.created_at = created.pk, created.created_at
        obj._state.adding = False

    # live stats: one grouped query for the page (see ``selectors.collections_stats``),
    # kept on each collection of the page for the columns below (``live_stats``)
    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)
        stats = selectors.collections_stats(collections=page)
        for collection in page:
            collection.__dict__[LIVE_STATS] = stats[collection.pk]
        changelist.result_list = page
        return changelist

    @admin.display(description="depth")
    def depth(self, obj: Collection) -> int:
        return live_stats(obj).depth

    @admin.display(description="pending")
    def pending(self, obj: Collection) -> int:
        return live_stats(obj).depth_pending

    @admin.display(description="in flight")
    def in_flight(self, obj: Collection) -> int:
        return live_stats(obj).in_flight

    @admin.display(description="delayed")
    def delayed(self, obj: Collection) -> int:
        return live_stats(obj).delayed

    @admin.display(description="dead")
    def dead(self, obj: Collection) -> str:
        url = reverse("admin:groupqueues_collection_dead", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, live_stats(obj).dead)

    @admin.display(description="oldest pending")
    def oldest_pending_age(self, obj: Collection) -> str:
        return age(live_stats(obj).oldest_pending_age_seconds)

    @admin.display(description="stats")
    def stats_summary(self, obj: Collection) -> str:  # HTML (format_html)
        if obj.pk is None:  # unsaved: django-stubs type an auto pk as int, never None
            return "-"  # type: ignore[unreachable]
        stats = services.collection_stats(collection=obj)
        url = reverse("admin:groupqueues_collection_dead", args=[obj.pk])
        return format_html(
            "depth {}, pending {}, delayed {}, in flight {}, "
            '<a href="{}">dead {}</a>, oldest pending {}',
            stats.depth, stats.depth_pending, stats.delayed, stats.in_flight, url, stats.dead,
            age(stats.oldest_pending_age_seconds),
        )  # fmt: skip

    @admin.display(description="ordering keys")
    def ordering_keys(self, obj: Collection) -> str:  # HTML (format_html)
        if obj.pk is None:  # unsaved: django-stubs type an auto pk as int, never None
            return "-"  # type: ignore[unreachable]
        url = reverse("admin:groupqueues_collection_keys", args=[obj.pk])
        return format_html(
            '<a href="{}">keys with live messages</a>, <a href="{}?blocked=true">blocked keys'
            "</a> (their head, why it holds the key back, how many wait behind it)",
            url, url,
        )  # fmt: skip

    def get_urls(self) -> list[Any]:
        """The dashboard and database-health pages (``dashboard_admin``), the
        dead-message and ordering-key pages, then the admin's own."""
        from groupqueues.dashboard_admin import admin_urls

        dead = self.admin_site.admin_view(self.dead_messages)
        keys = self.admin_site.admin_view(self.keys_of_queue)
        own = [
            path("<int:pk>/dead/", dead, name="groupqueues_collection_dead"),
            path("<int:pk>/keys/", keys, name="groupqueues_collection_keys"),
        ]
        return [*admin_urls(self), *own, *super().get_urls()]

    def _readable_queue(self, request: HttpRequest, pk: int) -> Collection:
        collection = self.get_queryset(request).select_related("group").filter(pk=pk).first()
        if collection is None:
            raise Http404("No such queue.")
        return collection

    def dead_messages(self, request: HttpRequest, pk: int) -> HttpResponse:
        """The queue's dead messages by filter, with redrive / purge (``admin_dead``)."""
        return admin_dead.dead_messages_view(self, request, self._readable_queue(request, pk))

    def keys_of_queue(self, request: HttpRequest, pk: int) -> HttpResponse:
        """The queue's ordering keys and their heads, blocked or all (``admin_keys``)."""
        return admin_keys.ordering_keys_view(self, request, self._readable_queue(request, pk))

    # actions: each collection is checked for QUEUE_MANAGE on its group
    def _managed(self, request: HttpRequest, queryset: QuerySet[Collection]) -> list[Collection]:
        allowed = [c for c in queryset if may(request, Capability.QUEUE_MANAGE, c.group)]
        refused = len(queryset) - len(allowed)
        if refused:
            messages.error(
                request, f"Refused for {refused} collection(s): you may not manage them."
            )
        return allowed

    def _set_paused(self, request: HttpRequest, queryset: Any, paused: bool) -> None:
        done = self._managed(request, queryset)
        for collection in done:
            services.collection_update(collection=collection, paused=paused)
            self.log_change(request, collection, "Paused" if paused else "Resumed")
        if done:
            verb = "Paused" if paused else "Resumed"
            messages.success(request, f"{verb} {len(done)} collection(s).")

    @admin.action(description="Pause selected queues", permissions=["manage"])
    def pause(self, request: HttpRequest, queryset: Any) -> None:
        self._set_paused(request, queryset, True)

    @admin.action(description="Resume selected queues", permissions=["manage"])
    def resume(self, request: HttpRequest, queryset: Any) -> None:
        self._set_paused(request, queryset, False)

    @admin.action(
        description="Redrive all dead messages of selected queues", permissions=["manage"]
    )
    def redrive_dead(self, request: HttpRequest, queryset: Any) -> None:
        total = 0
        for collection in self._managed(request, queryset):
            count = services.messages_redrive(collection=collection, all=True)
            self.log_change(request, collection, f"Redrove {count} dead message(s)")
            total += count
        messages.success(request, f"Redrove {total} dead message(s).")

    @admin.action(description="Purge selected queues...", permissions=["manage"])
    def purge(self, request: HttpRequest, queryset: Any) -> TemplateResponse | None:
        """Ask first (a confirmation page); on "yes" delete every ready message
        (and the dead ones when asked) of each collection the user manages."""
        collections = self._managed(request, queryset)
        if not collections:
            return None
        if request.POST.get("confirm") != "yes":
            return self._purge_confirmation(request, collections)
        include_dead = request.POST.get("include_dead") == "on"
        total = 0
        for collection in collections:
            count = services.collection_purge(collection=collection, include_dead=include_dead)
            what = "ready and dead" if include_dead else "ready"
            self.log_change(request, collection, f"Purged {count} {what} message(s)")
            total += count
        messages.success(request, f"Purged {total} message(s).")
        return None

    def _purge_confirmation(
        self, request: HttpRequest, collections: list[Collection]
    ) -> TemplateResponse:
        stats = selectors.collections_stats(collections=collections)
        context = {
            **self.admin_site.each_context(request),
            "title": "Purge queues: are you sure?",
            "opts": self.model._meta,
            "rows": [(c, stats[c.pk]) for c in collections],
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(
            request, "admin/groupqueues/collection/purge_confirmation.html", context
        )


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ------------------------------------------------------------------ messages


class PriorityFilter(admin.SimpleListFilter):
    """Priority bands (cheap: no scan for the distinct values)."""

    title = "priority"
    parameter_name = "priority_band"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("high", "above 0"), ("normal", "0"), ("low", "below 0")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Message]) -> Any:
        band = {"high": {"priority__gt": 0}, "normal": {"priority": 0}, "low": {"priority__lt": 0}}
        value = self.value()
        return queryset.filter(**band[value]) if value in band else queryset


class CollectionFilter(admin.SimpleListFilter):
    """The collections the staff user can read."""

    title = "collection"
    parameter_name = "collection"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        visible = model_admin.visible_collections(request).select_related("group")
        return [(str(c.pk), str(c)) for c in visible]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Message]) -> Any:
        value = self.value()
        return queryset.filter(collection_id=value) if value and value.isdigit() else queryset


@admin.register(Message)
class MessageAdmin(CapabilityAdmin):
    """The message browser: every field read-only, no add or delete; cancel and
    redrive are actions through the services."""

    view_capability = Capability.QUEUE_READ
    change_capability = Capability.QUEUE_CONSUME
    list_display = [
        "id", "collection", "state", "priority", "attempt", "max_attempts", "payload_excerpt",
        "error_excerpt", "enqueued_at", "deliver_after", "claimed_by", "lease_expires_at",
        "dead_reason", "died_at",
    ]  # fmt: skip
    list_filter = ["state", "dead_reason", PriorityFilter, GroupFilter, CollectionFilter]
    list_select_related = ["collection__group"]
    search_fields = ["=id", "idempotency_key", "claimed_by", "enqueued_by", "last_error"]
    actions = ["cancel", "redrive", "retry_now", "change_priority"]
    change_form_template = "admin/groupqueues/message/change_form.html"
    fields = (
        "id", "group", "collection", "state", "payload_pretty", "priority", "attempt",
        "max_attempts", "enqueued_at", "enqueued_by", "deliver_after", "expires_at",
        "claimed_by_worker", "claimed_at", "lease_expires_at", "last_error", "dead_reason",
        "died_at", "idempotency_key",
    )  # fmt: skip
    readonly_fields = fields
    show_full_result_count = False  # the count of a large table is not free

    def group_of(self, obj: Message) -> Group:
        return obj.group

    def visible_collections(self, request: HttpRequest) -> QuerySet[Collection]:
        qs = Collection.objects.queues()
        return self.readable(request, qs)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        qs = super().get_queryset(request).order_by("-seq")
        return self.readable(request, qs)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # message fields are read-only; actions check their own capability

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deleting is "cancel", through the service

    def has_consume_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser or bool(groups_where(request, Capability.QUEUE_CONSUME))

    def has_manage_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser or bool(groups_where(request, Capability.QUEUE_MANAGE))

    @admin.display(description="claimed by")
    def claimed_by_worker(self, obj: Message) -> str:
        """``claimed_by``, linked to the worker's registry row while it is live."""
        if obj.claimed_by and WorkerProcess.objects.filter(id=obj.claimed_by).exists():
            url = reverse("admin:queueproject_workerprocess_change", args=[quote(obj.claimed_by)])
            return format_html('<a href="{}">{}</a>', url, obj.claimed_by)
        return obj.claimed_by or "-"

    @admin.display(description="payload")
    def payload_pretty(self, obj: Message) -> str:
        text = json.dumps(obj.payload, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', text)

    def _allowed(
        self, request: HttpRequest, queryset: Any, capability: Capability
    ) -> list[Message]:
        chosen = list(queryset.select_related("collection__group"))
        allowed = [m for m in chosen if may(request, capability, m.collection.group)]
        if len(allowed) < len(chosen):
            messages.error(
                request, f"Refused for {len(chosen) - len(allowed)} message(s): not allowed."
            )
        return allowed

    @admin.action(
        description="Cancel selected messages (ready or claimed)", permissions=["consume"]
    )
    def cancel(self, request: HttpRequest, queryset: Any) -> None:
        count = 0
        for message in self._allowed(request, queryset, Capability.QUEUE_CONSUME):
            if services.message_cancel(collection=message.collection, id=message.id):
                self.log_change(request, message, "Cancelled")
                count += 1
        messages.success(request, f"Cancelled {count} message(s).")

    @admin.action(description="Redrive selected dead messages", permissions=["manage"])
    def redrive(self, request: HttpRequest, queryset: Any) -> None:
        by_collection: dict[int, list[Message]] = defaultdict(list)
        for message in self._allowed(request, queryset, Capability.QUEUE_MANAGE):
            if message.state == MessageState.DEAD:
                by_collection[message.collection_id].append(message)
        total = 0
        for chosen in by_collection.values():
            collection = chosen[0].collection
            total += services.messages_redrive(collection=collection, ids=[m.id for m in chosen])
            for message in chosen:
                self.log_change(request, message, "Redriven")
        messages.success(request, f"Redrove {total} dead message(s).")

    # excerpts in the list (the full payload and error are on the message's page)
    @admin.display(description="payload")
    def payload_excerpt(self, obj: Message) -> str:
        return payload_excerpt(obj.payload)

    @admin.display(description="last error")
    def error_excerpt(self, obj: Message) -> str:
        return error_excerpt(obj.last_error) or "-"

    # operator changes to waiting messages (QUEUE_MANAGE, as redrive)
    def _each(self, request: HttpRequest, chosen: list[Message], change: Any, note: str) -> int:
        """``change(message)`` (a service call) for each message; refusals
        (not waiting any more, bad input) are counted and reported, not raised."""
        done, refused = 0, []
        for message in chosen:
            try:
                change(message)
            except GroupQueueError as exc:
                refused.append(exc.message)
                continue
            self.log_change(request, message, note)
            done += 1
        if refused:
            messages.warning(request, f"Skipped {len(refused)}: {refused[0]}")
        return done

    @admin.action(description="Retry selected waiting messages now", permissions=["manage"])
    def retry_now(self, request: HttpRequest, queryset: Any) -> None:
        chosen = self._allowed(request, queryset, Capability.QUEUE_MANAGE)
        done = self._each(request, chosen, lambda m: services.message_retry_now(
            collection=m.collection, id=m.id), "Retried now")  # fmt: skip
        messages.success(request, f"{done} message(s) are due now.")

    @admin.action(description="Change priority of selected waiting messages...",
                  permissions=["manage"])  # fmt: skip
    def change_priority(self, request: HttpRequest, queryset: Any) -> TemplateResponse | None:
        """Ask for the priority (a form page); then set it on each ready message."""
        chosen = self._allowed(request, queryset, Capability.QUEUE_MANAGE)
        if not chosen:
            return None
        form = PriorityForm(request.POST if "priority" in request.POST else None)
        if not form.is_valid():
            context = {
                **self.admin_site.each_context(request),
                "title": "Change the priority of waiting messages",
                "opts": self.model._meta,
                "chosen": chosen,
                "form": form,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request, "admin/groupqueues/message/change_priority.html", context
            )
        priority = form.cleaned_data["priority"]
        done = self._each(
            request, chosen,
            lambda m: services.message_set_priority(
                collection=m.collection, id=m.id, priority=priority),
            f"Priority {priority}",
        )  # fmt: skip
        messages.success(request, f"Set priority {priority} on {done} message(s).")
        return None

    # the message's own page: redrive (dead), retry now and priority (ready)
    def get_urls(self) -> list[Any]:
        operate = self.admin_site.admin_view(self.operate)
        own = [path("<int:pk>/operate/", operate, name="groupqueues_message_operate")]
        return own + super().get_urls()

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:  # fmt: skip
        message = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if message is not None and may(request, Capability.QUEUE_MANAGE, message.group):
            extra["operations"] = operations_of(message)
            extra["priority_range"] = (PRIORITY_MIN, PRIORITY_MAX)
        return super().change_view(request, object_id, form_url, extra)

    def operate(self, request: HttpRequest, pk: int) -> HttpResponse:
        """POST ``do`` = redrive | retry-now | priority (with ``priority``)."""
        found = self.get_queryset(request).select_related("collection__group").filter(pk=pk).first()
        if found is None:
            raise Http404("No such message.")
        if request.method != "POST" or not may(request, Capability.QUEUE_MANAGE, found.group):
            raise PermissionDenied
        do = request.POST.get("do", "")
        done = self._each(request, [found], lambda m: self._operate(m, do, request), f"Admin: {do}")
        if done:
            messages.success(request, OPERATION_DONE[do])
        return HttpResponseRedirect(reverse("admin:groupqueues_message_change", args=[pk]))

    @staticmethod
    def _operate(message: Message, do: str, request: HttpRequest) -> Any:
        collection = message.collection
        if do == "redrive":
            return services.messages_redrive(collection=collection, ids=[message.id])
        if do == "retry-now":
            return services.message_retry_now(collection=collection, id=message.id)
        if do == "priority":
            form = PriorityForm(request.POST)
            if not form.is_valid():
                raise InvalidQueueInput.field(
                    "priority", "; ".join(str(e) for e in form.errors["priority"])
                )
            priority = form.cleaned_data["priority"]
            return services.message_set_priority(
                collection=collection, id=message.id, priority=priority
            )
        raise InvalidQueueInput.field("do", f"Unknown operation {do!r}.")


OPERATION_DONE = {
    "redrive": "Redriven: the message is ready again (attempt 0).",
    "retry-now": "The message is due now.",
    "priority": "Priority changed.",
}


def operations_of(message: Message) -> list[str]:
    """What the message's page offers for its state."""
    if message.state == MessageState.DEAD:
        return ["redrive"]
    if message.state == MessageState.READY:
        return ["retry-now", "priority"]
    return []


class PriorityForm(forms.Form):
    priority = forms.IntegerField(min_value=PRIORITY_MIN, max_value=PRIORITY_MAX)


# Triggers, consumers and Django Tasks runs live in their own module.
from groupqueues import admin_consumers  # noqa: E402,F401
