"""The admin's dead-message page of one queue: the dead-message filter
(``groupqueues.dead_filters``, the same fields as ``queue_dead`` and the REST
redrive and purge), the matching messages with error and payload excerpts,
and "redrive matching" / "purge matching" through the services.

Reading needs QUEUE_READ on the queue's group, redrive and purge QUEUE_MANAGE
(the capability function, as everywhere); each write goes to the admin log."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from groupqueues import services
from groupqueues.dead_filters import (
    DEAD_FILTER_LIMIT_MAX,
    ERROR_CONTAINS_MAX,
    DeadFilter,
    dead_filter,
    parse_moment,
)
from groupqueues.exceptions import InvalidQueueInput
from groupqueues.excerpts import error_excerpt, payload_excerpt
from groupqueues.models import Collection, DeadReason, Message
from principals.authz import Capability
from queueproject import clock

SHOWN = 100  # matches listed on the page (redrive and purge act on all of them)
MOMENT_HELP = "ISO 8601 with a zone, a date, or an age like 2h or 3d"


class DeadFilterForm(forms.Form):
    """The dead-message filter as a form; ``where`` is the ``DeadFilter``."""

    reason = forms.MultipleChoiceField(
        choices=DeadReason.choices, required=False, widget=forms.CheckboxSelectMultiple
    )
    since = forms.CharField(required=False, help_text=f"died at or after: {MOMENT_HELP}")
    until = forms.CharField(required=False, help_text=f"died before: {MOMENT_HELP}")
    error_contains = forms.CharField(
        required=False, max_length=ERROR_CONTAINS_MAX, strip=False,
        help_text="the last error contains this (any case)",
    )  # fmt: skip
    limit = forms.IntegerField(
        required=False, min_value=1, max_value=DEAD_FILTER_LIMIT_MAX,
        help_text="at most this many, most recent death first",
    )  # fmt: skip

    where: DeadFilter

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        now = clock.now()
        try:
            self.where = dead_filter(
                reason=data.get("reason") or None,
                since=parse_moment(data["since"], field="since", now=now)
                if data.get("since") else None,
                until=parse_moment(data["until"], field="until", now=now)
                if data.get("until") else None,
                error_contains=data.get("error_contains") or None,
                limit=data.get("limit"),
            )  # fmt: skip
        except InvalidQueueInput as exc:
            for field, problems in exc.details.items():
                self.add_error(field if field in self.fields else None, problems)
        return data


def dead_messages_view(
    model_admin: Any, request: HttpRequest, collection: Collection
) -> HttpResponse:
    """GET: the filter and its matches; POST (``do`` = redrive | purge): act on
    every match, then back to the page with the same filter."""
    if not model_admin._may(request, Capability.QUEUE_READ, collection):
        raise PermissionDenied
    may_manage = model_admin._may(request, Capability.QUEUE_MANAGE, collection)
    data = request.POST if request.method == "POST" else request.GET
    form = DeadFilterForm(data if data else None)
    where = form.where if form.is_bound and form.is_valid() else DeadFilter()
    if request.method == "POST" and form.is_valid():
        if not may_manage:
            raise PermissionDenied
        return _act(model_admin, request, collection, where)
    matches = services.messages_dead(collection=collection, where=where)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Dead messages of {collection}",
        "opts": Collection._meta,
        "collection": collection,
        "form": form,
        "shown": [
            (m, payload_excerpt(m.payload), error_excerpt(m.last_error))
            for m in (matches[:SHOWN] if not form.errors else [])
        ],
        "total": _count(collection, where) if not form.errors else 0,
        "shown_max": SHOWN,
        "may_manage": may_manage,
        "query": request.GET.urlencode(),
    }
    return TemplateResponse(request, "admin/groupqueues/collection/dead_messages.html", context)


def _count(collection: Collection, where: DeadFilter) -> int:
    dead = Message.objects.of(collection).dead().filter(where.condition())
    total = dead.count()
    return min(total, where.limit) if where.limit is not None else total


def _act(
    model_admin: Any, request: HttpRequest, collection: Collection, where: DeadFilter
) -> HttpResponse:
    do = request.POST.get("do")
    if do == "redrive":
        count = services.messages_redrive(collection=collection, where=where)
        verb = "Redrove"
    elif do == "purge":
        count = services.messages_purge_dead(collection=collection, where=where)
        verb = "Purged"
    else:
        messages.error(request, "Choose redrive or purge.")
        return HttpResponseRedirect(request.path)
    described = ", ".join(f"{k}={v}" for k, v in where.as_dict().items()) or "all"
    model_admin.log_change(request, collection, f"{verb} {count} dead message(s) ({described})")
    messages.success(request, f"{verb} {count} dead message(s) of {collection}.")
    return HttpResponseRedirect(f"{request.path}?{request.POST.get('query', '')}")
