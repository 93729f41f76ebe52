"""Store-primitive routes of SPEC §6 (``{g}`` a group slug or id)."""

from django.urls import URLPattern, path

from store import lock_views
from store import schedule_views as sv

L = "groups/<api_segment:g>/locks/<api_segment:name>/"
S = "groups/<api_segment:g>/schedules/<api_segment:name>/"

urlpatterns: list[URLPattern] = [
    path(L, lock_views.LockView.as_view(), name="store-lock"),
    path(L + "renew/", lock_views.LockRenewView.as_view(), name="store-lock-renew"),
    path("groups/<api_segment:g>/schedules/", sv.SchedulesView.as_view(), name="st-schedules"),
    path(S, sv.ScheduleView.as_view(), name="st-schedule"),
    path(S + "pause/", sv.PauseView.as_view(), name="st-schedule-pause"),
    path(S + "resume/", sv.ResumeView.as_view(), name="st-schedule-resume"),
    path(S + "run-now/", sv.RunNowView.as_view(), name="st-schedule-run-now"),
]

# --- the outbox (issue 15) ------------------------------------------------------
from store import outbox_views as ov  # noqa: E402

OB = "groups/<api_segment:g>/outbox/"
urlpatterns += [
    path(OB, ov.OutboxListView.as_view(), name="st-outbox"),
    path(OB + "stats/", ov.OutboxStatsView.as_view(), name="st-outbox-stats"),
    path(OB + "redrive/", ov.OutboxRedriveView.as_view(), name="st-outbox-redrive"),
    path(OB + "purge/", ov.OutboxPurgeView.as_view(), name="st-outbox-purge"),
    path(OB + "<api_id:id>/", ov.OutboxMessageView.as_view(), name="st-outbox-message"),
]
