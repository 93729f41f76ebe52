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
    # The remaining operations (issue 20 point 2).
    path(f"{Q}take-head/", v.TakeHeadView.as_view(), name="sq-take-head"),
    path(f"{Q}restore/", v.RestoreView.as_view(), name="sq-restore"),
    path(f"{Q}requeue/", v.RequeueView.as_view(), name="sq-requeue"),
    path(f"{Q}lifecycle/", v.LifecycleView.as_view(), name="sq-lifecycle"),
    path(f"{Q}replace/", v.ReplaceView.as_view(), name="sq-replace"),
    path(f"{Q}purge/", v.SessionPurgeView.as_view(), name="sq-session-purge"),
    path(
        f"{Q}messages/<api_id:message_id>/acknowledge/",
        v.AcknowledgeByIdView.as_view(),
        name="sq-acknowledge-by-id",
    ),
    path(
        f"{Q}messages/<api_id:message_id>/auto-merge/",
        v.AutoMergeUpView.as_view(),
        name="sq-auto-merge-up",
    ),
    path(
        "sessions/<api_id:session_id>/pending-move/take/",
        v.PendingMoveTakeView.as_view(),
        name="sq-pending-move-take",
    ),
    path(
        "sessions/<api_id:session_id>/pending-move/delete-if-match/",
        v.PendingMoveDeleteIfMatchView.as_view(),
        name="sq-pending-move-delete-if-match",
    ),
    path(
        "apps/<str:app>/sessions/pending-moves/",
        v.AppPendingMovesView.as_view(),
        name="sq-app-pending-moves",
    ),
    path(
        "apps/<str:app>/sessions/pending-counts/",
        v.AppPendingCountsView.as_view(),
        name="sq-app-pending-counts",
    ),
    # Blocked heads (issue 20 point 4).
    path(
        "apps/<str:app>/sessions/blocked/",
        v.AppBlockedSessionsView.as_view(),
        name="sq-app-blocked",
    ),
    path(
        f"{Q}unblock/release-reservation/",
        v.ReleaseStuckView.as_view(),
        name="sq-unblock-release",
    ),
    path(f"{Q}unblock/skip-head/", v.SkipHeadView.as_view(), name="sq-unblock-skip"),
    path(
        f"{Q}unblock/resume-auto-run/",
        v.ResumeAutoRunView.as_view(),
        name="sq-unblock-resume",
    ),
]
