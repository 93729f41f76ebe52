"""A read-only admin list of the groups' TTL locks (rows of the shared
``Lease`` table named ``g:<group id>:<name>``; internal leases stay hidden).

Staff see the locks of the groups where they hold the consume capability, as
in the API; superusers see all. Nothing here changes a lock: taking, renewing
and releasing go through ``store.locks``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from principals.admin import CapabilityAdmin, admin_principal
from principals.authz import Capability, has_capability, readable_groups
from principals.models import Group
from queueproject import clock
from queueproject.models import Lease
from store.locks import PREFIX


def split(lease: Lease) -> tuple[str, str]:
    """(group id, lock name) of a group lock's lease."""
    group_id, _, name = lease.name.removeprefix(PREFIX).partition(":")
    return group_id, name


@admin.register(Lease)
class LockAdmin(CapabilityAdmin):
    view_capability = Capability.QUEUE_CONSUME
    list_display = ["lock_name", "group", "owner", "expires_at", "fencing_token", "held"]
    ordering = ["name"]
    search_fields = ["name", "owner"]

    def group_of(self, obj: Lease) -> Group:
        return Group.objects.get(pk=split(obj)[0])

    def get_queryset(self, request: HttpRequest) -> QuerySet[Lease]:
        qs = super().get_queryset(request).filter(name__startswith=PREFIX)
        if request.user.is_superuser:
            return qs
        principal = admin_principal(request)
        allowed = Q(pk__in=[])
        for group in readable_groups(principal):
            if has_capability(principal, self.view_capability, group):
                allowed |= Q(name__startswith=f"{PREFIX}{group.pk}:")
        return qs.filter(allowed)

    @admin.display(description="lock", ordering="name")
    def lock_name(self, obj: Lease) -> str:
        return split(obj)[1]

    @admin.display(description="group")
    def group(self, obj: Lease) -> str:
        group = Group.objects.filter(pk=split(obj)[0]).first()
        return group.slug if group else "(deleted group)"

    @admin.display(description="held", boolean=True)
    def held(self, obj: Lease) -> bool:
        return obj.owner is not None and obj.expires_at > clock.now()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
