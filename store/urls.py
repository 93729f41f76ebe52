"""Store-primitive routes of SPEC §6 (``{g}`` a group slug or id)."""

from django.urls import URLPattern, path

from store import lock_views, stream_views
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

# Streams (store.stream_views): topics, entries, consumers.
T = "groups/<api_segment:g>/topics/<api_segment:t>/"
C = T + "consumers/<api_segment:c>/"
urlpatterns += [
    path("groups/<api_segment:g>/topics/", stream_views.TopicsView.as_view(), name="st-topics"),
    path(T, stream_views.TopicView.as_view(), name="st-topic"),
    path(T + "entries/", stream_views.EntriesView.as_view(), name="st-topic-entries"),
    path(T + "purge/", stream_views.PurgeView.as_view(), name="st-topic-purge"),
    path(T + "consumers/", stream_views.ConsumersView.as_view(), name="st-consumers"),
    path(C, stream_views.ConsumerView.as_view(), name="st-consumer"),
    path(C + "entries/", stream_views.ConsumerEntriesView.as_view(), name="st-consumer-entries"),
    path(C + "commit/", stream_views.CommitView.as_view(), name="st-consumer-commit"),
    path(C + "reset/", stream_views.ResetView.as_view(), name="st-consumer-reset"),
]
