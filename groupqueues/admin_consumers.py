"""Admin for queue triggers (with their materialised consumers) and Django
Tasks runs (an app's webhook endpoint is edited on the app, in principals).
Imported from ``groupqueues.admin`` (registration is guarded, so importing it
twice is harmless). Writes go
through ``groupqueues.trigger_services``; permissions come from the
capabilities (QUEUE_READ to view, QUEUE_MANAGE to change a group's triggers)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from groupqueues import trigger_services
from groupqueues.exceptions import GroupQueueError
from groupqueues.handlers import handler_choices
from groupqueues.models import Consumer, TaskRun, Trigger
from principals.admin import CapabilityAdmin, admin_principal, readable_groups
from principals.authz import Capability
from principals.models import Group

TRIGGER_FIELDS = ["group", "collection_name", "handler", "shared", "enabled", "batch_size",
                  "concurrency", "visibility_timeout"]  # fmt: skip


class TriggerForm(forms.ModelForm):
    """The handler is picked from registered names only (never a typed path)."""

    handler = forms.ChoiceField(choices=handler_choices)

    class Meta:
        model = Trigger
        fields = TRIGGER_FIELDS

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        values = {k: getattr(self.instance, k) for k in TRIGGER_FIELDS if k != "group"}
        values.update({k: v for k, v in data.items() if k in TRIGGER_FIELDS})
        if "group" not in values:  # read-only once created
            values["group"] = self.instance.group
        probe = Trigger(**values)
        try:
            trigger_services.trigger_collection(trigger=probe)
            trigger_services.check_webhook_shared(probe)
        except GroupQueueError as exc:
            raise forms.ValidationError(exc.message) from exc
        return data


class ConsumerInline(admin.TabularInline):
    model = Consumer
    readonly_fields = ("app", "created_at")
    fields = readonly_fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TriggerAdmin(CapabilityAdmin):
    form = TriggerForm
    change_capability = Capability.QUEUE_MANAGE
    list_display = ["__str__", "group", "collection_name", "handler", "shared", "enabled",
                    "concurrency", "batch_size"]  # fmt: skip
    list_filter = ["enabled", "shared", "handler"]
    inlines = [ConsumerInline]

    def group_of(self, obj: Trigger) -> Group:
        return obj.group

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = super().get_queryset(request).select_related("group")
        return self.readable(request, qs)

    def save_model(self, request: HttpRequest, obj: Trigger, form: Any, change: bool) -> None:
        data = {k: form.cleaned_data[k] for k in TRIGGER_FIELDS if k in form.cleaned_data}
        if change:
            for name in ("group", "collection_name"):
                data.pop(name, None)
            trigger_services.trigger_update(trigger=Trigger.objects.get(pk=obj.pk), **data)
        else:
            obj.pk = trigger_services.trigger_create(**data).pk

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["group", "collection_name"] if obj is not None else []

    def delete_model(self, request: HttpRequest, obj: Trigger) -> None:
        trigger_services.trigger_delete(trigger=obj)


class TaskRunAdmin(admin.ModelAdmin):
    """Read-only view of Django Tasks results (superusers)."""

    list_display = ["id", "task_path", "queue_name", "status", "enqueued_at", "finished_at"]
    list_filter = ["status", "queue_name"]
    search_fields = ["id", "task_path"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


for model, model_admin in ((Trigger, TriggerAdmin), (TaskRun, TaskRunAdmin)):
    if not admin.site.is_registered(model):
        admin.site.register(model, model_admin)


class ConsumerAdmin(CapabilityAdmin):
    """The materialised consumers (read-only: ``consumers_sync`` writes them):
    which handler runs on which queue, as which app."""

    list_display = ["__str__", "trigger_group", "queue", "handler", "app", "enabled", "created_at"]
    list_filter = ["trigger__enabled", "trigger__handler"]
    list_select_related = ["trigger__group", "app"]
    search_fields = ["trigger__collection_name", "trigger__handler", "app__slug"]

    def group_of(self, obj: Consumer) -> Group:
        return obj.trigger.group

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = super().get_queryset(request).select_related("trigger__group", "app")
        if request.user.is_superuser:
            return qs
        groups = [g.pk for g in readable_groups(admin_principal(request))]
        return qs.filter(trigger__group__in=groups)

    @admin.display(description="group", ordering="trigger__group__slug")
    def trigger_group(self, obj: Consumer) -> str:
        return obj.trigger.group.slug

    @admin.display(description="queue", ordering="trigger__collection_name")
    def queue(self, obj: Consumer) -> str:
        return obj.trigger.collection_name

    @admin.display(description="handler")
    def handler(self, obj: Consumer) -> str:
        return obj.trigger.handler

    @admin.display(description="enabled", boolean=True)
    def enabled(self, obj: Consumer) -> bool:
        return obj.trigger.enabled

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


if not admin.site.is_registered(Consumer):
    admin.site.register(Consumer, ConsumerAdmin)
