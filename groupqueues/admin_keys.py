"""The admin's ordering-key page of one queue (SPEC §7): every key with live
messages, or only the blocked ones, with its head message, why the head holds
the key back and how many of the key's messages wait behind it.

The rows come from ``selectors.ordering_key_heads``, the selector behind
``GET …/keys/?blocked=``, so the page and the API agree on what "blocked"
means. Reading needs QUEUE_READ on the queue's group (the capability
function, as everywhere); the page changes nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from groupqueues import selectors
from groupqueues.excerpts import payload_excerpt
from groupqueues.models import Collection, Message, MessageState
from principals.authz import Capability
from queueproject import clock

PER_PAGE = 100
# The ``blocked`` query parameter as the REST endpoint spells it.
BLOCKED_CHOICES = {"true": True, "false": False}


def why_blocked(head: Message, now: datetime) -> str:
    """Why ``head`` holds its key back ("" when it is claimable now): claimed
    (by whom, until when; a lapsed lease is claimable again but still holds
    the key until then), waiting for a retry, or delayed."""
    when = "%Y-%m-%d %H:%M:%S"
    if head.state == MessageState.CLAIMED:
        lease = head.lease_expires_at
        if lease is not None and lease <= now:
            return f"claimed by {head.claimed_by}, lease lapsed at {lease:{when}} (claimable again)"
        until = f" until {lease:{when}}" if lease is not None else ""
        return f"claimed by {head.claimed_by}{until}"
    if head.deliver_after > now:
        waits = "retry" if head.attempt > 0 else "delayed"
        return f"{waits}: due at {head.deliver_after:{when}}"
    return ""


def ordering_keys_view(
    model_admin: Any, request: HttpRequest, collection: Collection
) -> HttpResponse:
    """GET ``?blocked=true|false`` (anything else: every key) ``&page=n``."""
    if not model_admin._may(request, Capability.QUEUE_READ, collection):
        raise PermissionDenied
    chosen = request.GET.get("blocked")
    blocked = BLOCKED_CHOICES.get(chosen or "")
    heads = selectors.ordering_key_heads(collection=collection, blocked=blocked)
    page = Paginator(heads, PER_PAGE).get_page(request.GET.get("page"))
    now = clock.now()
    # rows annotated with ``blocked`` and ``waiting`` (selectors.ordering_key_heads)
    heads_shown: list[Any] = list(page)
    rows = [
        (h, why_blocked(h, now) if h.blocked else "", h.waiting - 1, payload_excerpt(h.payload))
        for h in heads_shown
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Ordering keys of {collection}",
        "opts": Collection._meta,
        "collection": collection,
        "blocked": chosen if blocked is not None else "",
        "page": page,
        "rows": rows,
    }
    return TemplateResponse(request, "admin/groupqueues/collection/ordering_keys.html", context)
