"""``{% queue_overview %}``: the admin index's overview of the queues the
staff user can read (their groups by the capability function; superusers:
all), with message counts per state per group, and, for superusers, the
leases (leaders and locks) held right now."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django import template

from groupqueues import selectors
from groupqueues.models import Collection
from principals.admin import admin_principal
from principals.authz import readable_groups
from queueproject import clock
from queueproject.models import Lease

register = template.Library()
LEASES_SHOWN = 20


@dataclass
class GroupRow:
    """Counts of one group's queues (or of all of them: the total row)."""

    label: str
    group_id: uuid.UUID | None = None
    queues: int = 0
    paused: int = 0
    pending: int = 0
    delayed: int = 0
    in_flight: int = 0
    dead: int = 0
    oldest: list[float] = field(default_factory=list)

    @property
    def oldest_pending_age(self) -> float | None:
        return max(self.oldest) if self.oldest else None


def overview_rows(collections: list[Collection]) -> list[GroupRow]:
    """One row per group (by slug) then the total, from ``collections_stats``."""
    stats = selectors.collections_stats(collections=collections)
    rows: dict[uuid.UUID, GroupRow] = {}
    total = GroupRow("all groups")
    for c in collections:
        row = rows.setdefault(c.group_id, GroupRow(c.group.slug, c.group_id))
        s = stats[c.pk]
        for target in (row, total):
            target.queues += 1
            target.paused += int(c.paused)
            target.pending += s.depth_pending
            target.delayed += s.delayed
            target.in_flight += s.in_flight
            target.dead += s.dead
            if s.oldest_pending_age_seconds is not None:
                target.oldest.append(s.oldest_pending_age_seconds)
    return [*sorted(rows.values(), key=lambda r: r.label), total]


@register.inclusion_tag("admin/groupqueues/overview.html", takes_context=True)
def queue_overview(context: template.Context) -> dict[str, Any]:
    request = context["request"]
    queues = Collection.objects.queues().select_related("group")
    if not request.user.is_superuser:
        queues = queues.filter(group__in=[g.pk for g in readable_groups(admin_principal(request))])
    rows = overview_rows(list(queues))
    leases = (
        list(Lease.objects.filter(expires_at__gt=clock.now(), owner__isnull=False)
             .order_by("name")[:LEASES_SHOWN])
        if request.user.is_superuser else []
    )  # fmt: skip
    return {"rows": rows if len(rows) > 1 else [], "leases": leases, "request": request}
