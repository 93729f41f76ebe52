from django.urls import path

from sessionqueues import views as v

Q = "sessions/<api_id:session_id>/queue/"

urlpatterns = [
    path("apps/<str:app>/tasks/", v.AppTaskListView.as_view(), name="sq-task-create"),
    path("tasks/<api_id:task_id>/", v.TaskDetailView.as_view(), name="sq-task"),
    path("tasks/<api_id:task_id>/sessions/", v.TaskSessionListView.as_view(), name="sq-sessions"),
    path("tasks/<api_id:task_id>/archive/", v.TaskArchiveView.as_view(), name="sq-task-archive"),
    path("tasks/<api_id:task_id>/purge/", v.TaskPurgeView.as_view(), name="sq-task-purge"),
    path(Q, v.QueueStatusView.as_view(), name="sq-queue"),
    path(f"{Q}messages/", v.MessageListView.as_view(), name="sq-messages"),
    path(f"{Q}messages/<api_id:message_id>/", v.MessageDetailView.as_view(), name="sq-message"),
    path(f"{Q}messages/<api_id:message_id>/merge-up/", v.MergeUpView.as_view(), name="sq-merge-up"),
    path(f"{Q}reorder/", v.ReorderView.as_view(), name="sq-reorder"),
    path(f"{Q}send-now/", v.SendNowView.as_view(), name="sq-send-now"),
    path(
        f"{Q}send-now/<api_id:claim_id>/restore/",
        v.SendNowRestoreView.as_view(),
        name="sq-send-now-restore",
    ),
    path(
        f"{Q}send-now/<api_id:claim_id>/acknowledge/",
        v.SendNowAcknowledgeView.as_view(),
        name="sq-send-now-ack",
    ),
    path(f"{Q}auto-run/", v.AutoRunView.as_view(), name="sq-auto-run"),
    path(f"{Q}auto-merge/", v.AutoMergeView.as_view(), name="sq-auto-merge"),
    path(f"{Q}reserve/", v.ReserveView.as_view(), name="sq-reserve"),
    path(
        f"{Q}reservations/<api_id:reservation_id>/ack/",
        v.ReservationAckView.as_view(),
        name="sq-reservation-ack",
    ),
    path(
        f"{Q}reservations/<api_id:reservation_id>/release/",
        v.ReservationReleaseView.as_view(),
        name="sq-reservation-release",
    ),
    path(f"{Q}transfer/", v.TransferView.as_view(), name="sq-transfer"),
    path(
        "sessions/<api_id:session_id>/pending-move/",
        v.PendingMoveView.as_view(),
        name="sq-pending-move",
    ),
    path(
        "sessions/<api_id:session_id>/agent-ready/",
        v.AgentReadyView.as_view(),
        name="sq-agent-ready",
    ),
]
