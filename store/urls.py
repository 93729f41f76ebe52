"""Store-primitive routes of SPEC §6 (``{g}`` a group slug or id)."""

from django.urls import URLPattern, path

from store import channel_views as cv
from store import lock_views, stream_views
from store import schedule_views as sv

L = "groups/<api_segment:g>/locks/<api_segment:name>/"
S = "groups/<api_segment:g>/schedules/<api_segment:name>/"
C = "groups/<api_segment:g>/channels/<api_segment:c>/"

urlpatterns: list[URLPattern] = [
    path(L, lock_views.LockView.as_view(), name="store-lock"),
    path(L + "renew/", lock_views.LockRenewView.as_view(), name="store-lock-renew"),
    path("groups/<api_segment:g>/schedules/", sv.SchedulesView.as_view(), name="st-schedules"),
    path(S, sv.ScheduleView.as_view(), name="st-schedule"),
    path(S + "pause/", sv.PauseView.as_view(), name="st-schedule-pause"),
    path(S + "resume/", sv.ResumeView.as_view(), name="st-schedule-resume"),
    path(S + "run-now/", sv.RunNowView.as_view(), name="st-schedule-run-now"),
    path("groups/<api_segment:g>/channels/", cv.ChannelsView.as_view(), name="st-channels"),
    path(C, cv.ChannelView.as_view(), name="st-channel"),
    path(C + "messages/", cv.PublishView.as_view(), name="st-channel-publish"),
    path(C + "events/", cv.channel_events, name="st-channel-events"),
    path(C + "purge/", cv.PurgeView.as_view(), name="st-channel-purge"),
]

# Streams (store.stream_views): topics, entries, consumers.
T = "groups/<api_segment:g>/topics/<api_segment:t>/"
SC = T + "consumers/<api_segment:consumer>/"
urlpatterns += [
    path("groups/<api_segment:g>/topics/", stream_views.TopicsView.as_view(), name="st-topics"),
    path(T, stream_views.TopicView.as_view(), name="st-topic"),
    path(T + "entries/", stream_views.entries, name="st-topic-entries"),
    path(T + "purge/", stream_views.PurgeView.as_view(), name="st-topic-purge"),
    path(T + "consumers/", stream_views.ConsumersView.as_view(), name="st-consumers"),
    path(SC, stream_views.ConsumerView.as_view(), name="st-consumer"),
    path(SC + "entries/", stream_views.consumer_entries, name="st-consumer-entries"),
    path(SC + "commit/", stream_views.CommitView.as_view(), name="st-consumer-commit"),
    path(SC + "reset/", stream_views.ResetView.as_view(), name="st-consumer-reset"),
    path(SC + "events/", stream_views.consumer_events, name="st-consumer-events"),
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
