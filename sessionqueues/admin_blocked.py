"""The admin's blocked-heads page: the sessions (of groups the staff user can
read) whose head cannot move, with each reason and its age
(``selectors.blocked_sessions``), and per session the operator's actions —
release a stuck reservation, skip the head, resume auto-run — through the
audited services (``services.blocked``).

Reading needs SESSION_READ on the task's app; releasing a reservation
SESSION_CONSUME, skipping the head and resuming auto-run SESSION_EDIT (the
capability function, as over REST). Each action writes its audit record and,
as every admin action, an admin log entry on the session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from principals.admin import admin_principal
from principals.authz import Capability, has_capability
from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import selectors, services
from sessionqueues.models import AuditRecord, AuditVia, Session

SHOWN = 200  # sessions listed on the page, longest blocked first

ACTIONS: dict[str, Capability] = {
    "release": Capability.SESSION_CONSUME,
    "skip": Capability.SESSION_EDIT,
    "resume": Capability.SESSION_EDIT,
}


class BlockedFilterForm(forms.Form):
    reason = forms.ChoiceField(
        choices=[("", "any"), *((r.value, r.value) for r in selectors.BlockedReason)],
        required=False,
    )
    min_age = forms.IntegerField(
        required=False, min_value=0, max_value=selectors.MAX_MIN_AGE,
        help_text="seconds each reason must have lasted (empty: the settings)",
    )  # fmt: skip


class ActionForm(forms.Form):
    session = forms.UUIDField()
    do = forms.ChoiceField(choices=[(name, name) for name in ACTIONS])
    reservation_id = forms.UUIDField(required=False)
    head_id = forms.UUIDField(required=False)
    note = forms.CharField(required=False, max_length=2000)


def blocked_view(model_admin: Any, request: HttpRequest) -> HttpResponse:
    """GET: the blocked heads by filter; POST: one action on one session."""
    sessions = model_admin.get_queryset(request)
    if request.method == "POST":
        return _act(model_admin, request, sessions)
    form = BlockedFilterForm(request.GET or None)
    valid = form.is_valid() if form.is_bound else True
    data = form.cleaned_data if form.is_bound and valid else {}
    reason = selectors.BlockedReason(data["reason"]) if data.get("reason") else None
    ages = selectors.BlockedAges.configured(data.get("min_age"))
    now = clock.now()
    found = selectors.blocked_sessions(sessions=sessions, reason=reason, ages=ages, now=now)
    rows = list(found[:SHOWN]) if valid else []
    principal = admin_principal(request)
    shown = [
        (head, {name: has_capability(principal, cap, head.session.task.app)
                for name, cap in ACTIONS.items()})
        for head in selectors.blocked_heads(page=rows, ages=ages, now=now)
    ]  # fmt: skip
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Blocked session heads",
        "opts": Session._meta,
        "form": form,
        "shown": shown,
        "shown_max": SHOWN,
        "query": request.GET.urlencode(),
    }
    return TemplateResponse(request, "admin/sessionqueues/session/blocked.html", context)


def _act(model_admin: Any, request: HttpRequest, sessions: Any) -> HttpResponse:
    back = HttpResponseRedirect(f"{request.path}?{request.POST.get('query', '')}")
    form = ActionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not an action: {form.errors.as_text()}")
        return back
    data = form.cleaned_data
    session = sessions.filter(pk=data["session"]).select_related("task__app").first()
    if session is None:
        messages.error(request, "No such session.")
        return back
    if not has_capability(admin_principal(request), ACTIONS[data["do"]], session.task.app):
        raise PermissionDenied
    actor = services.Actor(label=admin_principal(request).label, via=AuditVia.ADMIN)
    try:
        record = _PERFORM[data["do"]](session, data, actor)
    except err.SessionQueueError as exc:
        messages.error(request, f"{session}: {exc.message}")
        return back
    text = f"{record.get_action_display().capitalize()}: {record.details}"
    model_admin.log_change(request, session, text)
    messages.success(request, f"{session}: {text}")
    return back


def _release(session: Session, data: dict[str, Any], actor: services.Actor) -> AuditRecord:
    if data["reservation_id"] is None:
        raise err.InvalidSessionInput("Choose the reservation to release.")
    return services.reservation_release_stuck(
        session_id=session.pk, reservation_id=data["reservation_id"], actor=actor,
        note=data["note"],
    )  # fmt: skip


def _skip(session: Session, data: dict[str, Any], actor: services.Actor) -> AuditRecord:
    return services.queue_skip_head(
        session_id=session.pk, head_id=data["head_id"], actor=actor, note=data["note"]
    )


def _resume(session: Session, data: dict[str, Any], actor: services.Actor) -> AuditRecord:
    return services.session_resume_auto_run(session_id=session.pk, actor=actor, note=data["note"])


_PERFORM: dict[str, Callable[[Session, dict[str, Any], services.Actor], AuditRecord]] = {
    "release": _release,
    "skip": _skip,
    "resume": _resume,
}
