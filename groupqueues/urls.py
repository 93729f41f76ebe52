"""Group-queue routes of SPEC §4 (``{g}`` a group slug or id, ``{q}`` a
collection name, ``{app}`` an app slug or id)."""

from django.urls import path

from groupqueues import views

Q = "groups/<api_segment:g>/queues/<api_segment:q>/"
A = "apps/<api_segment:app>/queues/<api_segment:name>/"

urlpatterns = [
    path("groups/<api_segment:g>/queues/", views.GroupQueuesView.as_view(), name="gq-collections"),
    path(Q, views.QueueView.as_view(), name="gq-collection"),
    path(Q + "messages/", views.MessagesView.as_view(), name="gq-messages"),
    path(Q + "messages/<api_id:id>/", views.MessageView.as_view(), name="gq-message"),
    path(Q + "claim/", views.claim, name="gq-claim"),
    path(Q + "ack/", views.AckView.as_view(), name="gq-ack"),
    path(Q + "nack/", views.NackView.as_view(), name="gq-nack"),
    path(Q + "fail/", views.FailView.as_view(), name="gq-fail"),
    path(Q + "extend/", views.ExtendView.as_view(), name="gq-extend"),
    path(Q + "release/", views.ReleaseView.as_view(), name="gq-release"),
    path(Q + "stats/", views.StatsView.as_view(), name="gq-stats"),
    path(Q + "dead/", views.DeadView.as_view(), name="gq-dead"),
    path(Q + "keys/", views.KeysView.as_view(), name="gq-keys"),
    path(Q + "redrive/", views.RedriveView.as_view(), name="gq-redrive"),
    path(Q + "purge/", views.PurgeView.as_view(), name="gq-purge"),
    path(A + "messages/", views.AppMessagesView.as_view(), name="gq-app-messages"),
    path(A + "stats/", views.AppStatsView.as_view(), name="gq-app-stats"),
]  # fmt: skip
