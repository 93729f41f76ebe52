"""Store-primitive routes of SPEC §6 (``{g}`` a group slug or id)."""

from django.urls import URLPattern, path

from groupqueues import urls as _segment  # noqa: F401  registers the gq_segment converter
from store import schedule_views as sv

S = "groups/<gq_segment:g>/schedules/<gq_segment:name>/"

urlpatterns: list[URLPattern] = [
    path("groups/<gq_segment:g>/schedules/", sv.SchedulesView.as_view(), name="st-schedules"),
    path(S, sv.ScheduleView.as_view(), name="st-schedule"),
    path(S + "pause/", sv.PauseView.as_view(), name="st-schedule-pause"),
    path(S + "resume/", sv.ResumeView.as_view(), name="st-schedule-resume"),
    path(S + "run-now/", sv.RunNowView.as_view(), name="st-schedule-run-now"),
]
