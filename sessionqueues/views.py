"""Session queue REST API (SPEC §4). Views authorise with ``principals.permissions
.require`` against the task's app, validate with serializers and call services;
errors are domain exceptions mapped by the one exception handler."""

from __future__ import annotations

import re
import uuid
from datetime import UTC
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues.openapi import PAGE_PARAMETERS, paginated
from principals.authz import Capability, Principal
from principals.models import App
from principals.permissions import require
from principals.services import app_get
from queueproject import clock
from queueproject.api import TakesNoBody, validated
from queueproject.ids import parse_id
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES, error
from sessionqueues import exceptions as err
from sessionqueues import selectors, services
from sessionqueues import serializers as s
from sessionqueues.models import AuditRecord, AuditVia, Session, Task
from sessionqueues.services import NewEntry, SendNowExpectation, SessionIdentity
from sessionqueues.services.common import from_snapshot

DIGITS = re.compile(r"[0-9]+\Z")

CONFLICT = {409: error("conflict: see the code (queue_full, queue_changed, claim_changed, …)")}
ERRORS = {**ERROR_RESPONSES, **CONFLICT}
INCARNATION_HEADER = "X-Session-Incarnation"
INCARNATION = OpenApiParameter(
    INCARNATION_HEADER,
    OpenApiTypes.UUID,
    location=OpenApiParameter.HEADER,
    required=False,
    description="The session incarnation the caller knows; a stale one answers 409 "
    "session_identity_mismatch.",
)


class TaskView(APIView):
    """Base: the task in the URL, authorised against its app."""

    def task(self, request: Request, task_id: uuid.UUID, capability: Capability) -> Task:
        task = selectors.task_get(task_id=task_id)
        require(request, capability, task.app, not_found=err.SessionQueueNotFound)
        return task


class SessionView(APIView):
    """Base: the session in the URL, authorised against its task's app, and the
    optional identity header."""

    def session(
        self, request: Request, session_id: uuid.UUID, capability: Capability
    ) -> tuple[Session, Principal]:
        session = selectors.session_get(session_id=session_id)
        principal = require(
            request, capability, session.task.app, not_found=err.SessionQueueNotFound
        )
        return session, principal

    def identity(self, request: Request, session: Session) -> SessionIdentity | None:
        raw = request.headers.get(INCARNATION_HEADER)
        if raw is None:  # an empty header is given, and not a UUID
            return None
        try:
            incarnation = parse_id(raw)  # the canonical form only, as format: uuid says
        except ValueError as exc:
            raise err.InvalidSessionInput(
                details={INCARNATION_HEADER: ["Must be a UUID."]}
            ) from exc
        return SessionIdentity(session.task_id, session.pk, incarnation)

    def status_response(self, session: Session, code: int = 200) -> Response:
        session.refresh_from_db()
        data = s.QueueStatusSerializer(selectors.queue_status(session=session)).data
        return Response(data, status=code)


# --- tasks and sessions -----------------------------------------------------


class AppTaskListView(APIView):
    @extend_schema(
        request=s.TaskCreateSerializer, responses={201: s.TaskSerializer, **ERROR_RESPONSES}
    )
    def post(self, request: Request, app: str) -> Response:
        """Create a task of the app."""
        target = app_get(ref=app)
        require(request, Capability.SESSION_CREATE, target, not_found=err.SessionQueueNotFound)
        data = validated(s.TaskCreateSerializer, request.data)
        task = services.task_create(app=target, title=data["title"])
        return Response(s.TaskSerializer(task).data, status=status.HTTP_201_CREATED)


class TaskDetailView(TaskView):
    @extend_schema(responses={200: s.TaskDetailSerializer, **ERROR_RESPONSES})
    def get(self, request: Request, task_id: uuid.UUID) -> Response:
        """The task with its sessions."""
        task = self.task(request, task_id, Capability.SESSION_READ)
        return Response(s.TaskDetailSerializer(task).data)


class TaskSessionListView(TakesNoBody, TaskView):
    @extend_schema(request=None, responses={201: s.SessionSerializer, **ERROR_RESPONSES})
    def post(self, request: Request, task_id: uuid.UUID) -> Response:
        """Create a session of the task (auto-run on, a fresh incarnation)."""
        task = self.task(request, task_id, Capability.SESSION_CREATE)
        session = services.session_create(task=task)
        return Response(s.SessionSerializer(session).data, status=status.HTTP_201_CREATED)


class TaskArchiveView(TakesNoBody, TaskView):
    @extend_schema(request=None, responses={200: s.TaskSerializer, **ERROR_RESPONSES})
    def post(self, request: Request, task_id: uuid.UUID) -> Response:
        """Archive the task: lifecycle inserts are refused from now on (admin)."""
        task = self.task(request, task_id, Capability.TASK_ADMIN)
        task = services.task_archive(task_id=task.pk)
        return Response(s.TaskSerializer(task).data)


class TaskPurgeView(TakesNoBody, TaskView):
    @extend_schema(request=None, responses={200: s.PurgeResultSerializer, **ERROR_RESPONSES})
    def post(self, request: Request, task_id: uuid.UUID) -> Response:
        """Delete every entry of the task's sessions (reserved too) and bump its
        generation (admin)."""
        task = self.task(request, task_id, Capability.TASK_ADMIN)
        removed, generation = services.queue_purge_task(task_id=task.pk)
        return Response({"removed": removed, "generation": generation})


# --- the queue --------------------------------------------------------------


class QueueStatusView(SessionView):
    @extend_schema(responses={200: s.QueueStatusSerializer, **ERROR_RESPONSES})
    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        """Visible entries in order, count, cap, auto-run, merge settings, generations."""
        session, _ = self.session(request, session_id, Capability.SESSION_READ)
        return self.status_response(session)


class MessageListView(SessionView):
    @extend_schema(
        request=s.EntryCreateSerializer,
        parameters=[INCARNATION],
        responses={
            201: s.AdmissionSerializer,
            200: OpenApiResponse(s.AdmissionSerializer, "folded into an existing entry"),
            **ERRORS,
        },
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Queue an entry: insert at the tail (auto-merging when enabled), append
        to the tail (``append_to_tail``) or replace by ``coalesce_key``."""
        as_agent = isinstance(request.data, dict) and request.data.get("queued_by") == "agent"
        capability = Capability.SESSION_CONSUME if as_agent else Capability.SESSION_EDIT
        session, principal = self.session(request, session_id, capability)
        # The sender task is checked against the session's app (``validated``
        # takes no context): a token cannot probe other apps' task ids.
        serializer = s.EntryCreateSerializer(data=request.data, context={"app": session.task.app})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if as_agent and principal.app is None:
            raise err.InvalidSessionInput(
                details={"queued_by": ["Only an agent runtime's app token may queue as agent."]}
            )
        admission = self._admit(session, data, "agent" if as_agent else principal.label)
        code = status.HTTP_201_CREATED if _is_new(admission) else status.HTTP_200_OK
        return Response(_admission_data(admission), status=code)

    def _admit(self, session: Session, data: dict[str, Any], queued_by: str) -> Any:
        entry = NewEntry(
            content=data["content"],
            queued_by=queued_by,
            model=data["model"],
            plan_mode=data["plan_mode"],
            attachments=data.get("attachments", []),
            metadata=data["metadata"],
            coalesce_key=data["coalesce_key"],
        )
        identity = self.identity(self.request, session)
        pk = session.pk
        if entry.coalesce_key:
            return services.entry_upsert_by_coalesce_key(
                session_id=pk, entry=entry, identity=identity
            )
        if data["append_to_tail"]:
            return services.entry_append_or_insert_tail(
                session_id=pk, entry=entry, identity=identity
            )
        return services.entry_insert(session_id=pk, entry=entry, identity=identity)

    @extend_schema(
        operation_id="sessions_queue_messages_delete_all",
        parameters=[INCARNATION],
        responses={200: s.RemovedCountSerializer, **ERRORS},
    )
    def delete(self, request: Request, session_id: uuid.UUID) -> Response:
        """Delete every visible entry (reserved ones stay)."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        removed = services.queue_delete_all(
            session_id=session.pk, identity=self.identity(request, session)
        )
        return Response({"removed": removed})


def _is_new(admission: services.Admission) -> bool:
    return not (admission.merged or admission.appended or admission.replaced)


def _admission_data(admission: services.Admission) -> dict[str, Any]:
    return {
        **s.QueuedMessageSerializer(admission.entry).data,
        "merged": admission.merged,
        "appended": admission.appended,
        "replaced": admission.replaced,
    }


class MessageDetailView(SessionView):
    @extend_schema(
        request=s.EntryUpdateSerializer,
        parameters=[INCARNATION],
        responses={200: s.QueuedMessageSerializer, **ERRORS},
    )
    def patch(self, request: Request, session_id: uuid.UUID, message_id: uuid.UUID) -> Response:
        """Edit content / attachments / metadata of your own entry (a null metadata
        value removes that key). Another owner's or a reserved entry is 404."""
        session, principal = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.EntryUpdateSerializer, request.data)
        row = services.entry_edit(
            session_id=session.pk,
            entry_id=message_id,
            queued_by=principal.label,
            content=data.get("content"),
            attachments=data.get("attachments"),
            metadata_updates=data.get("metadata"),
            identity=self.identity(request, session),
        )
        return Response(s.QueuedMessageSerializer(row).data)

    @extend_schema(parameters=[INCARNATION], responses={204: None, **ERRORS})
    def delete(self, request: Request, session_id: uuid.UUID, message_id: uuid.UUID) -> Response:
        """Delete one visible entry of this session."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        services.entry_delete(
            session_id=session.pk, entry_id=message_id, identity=self.identity(request, session)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class MergeUpView(TakesNoBody, SessionView):
    @extend_schema(
        request=None, parameters=[INCARNATION], responses={200: s.QueuedMessageSerializer, **ERRORS}
    )
    def post(self, request: Request, session_id: uuid.UUID, message_id: uuid.UUID) -> Response:
        """Fold the entry into the one directly above it; answers the merged entry."""
        session, principal = self.session(request, session_id, Capability.SESSION_EDIT)
        target = services.entry_merge_up(
            session_id=session.pk,
            entry_id=message_id,
            queued_by=principal.label,
            identity=self.identity(request, session),
        )
        return Response(s.QueuedMessageSerializer(target).data)


class ReorderView(SessionView):
    @extend_schema(
        request=s.ReorderSerializer,
        parameters=[INCARNATION],
        responses={200: s.QueueStatusSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Reorder the visible entries: ``ids`` must be an exact permutation of them."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.ReorderSerializer, request.data)
        services.queue_reorder(
            session_id=session.pk, ordered_ids=data["ids"], identity=self.identity(request, session)
        )
        return self.status_response(session)


class SendNowView(SessionView):
    @extend_schema(
        request=s.SendNowSerializer,
        parameters=[INCARNATION],
        responses={200: s.SendNowResultSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Claim the selected entries (with the content you saw) as one dispatch."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.SendNowSerializer, request.data)
        expected = [SendNowExpectation(id=e["id"], content=e["content"]) for e in data["entries"]]
        claim, dispatch = services.queue_send_now_claim(
            session_id=session.pk, expected=expected, identity=self.identity(request, session)
        )
        return Response({"claim_id": str(claim.pk), "dispatch": dispatch})


class SendNowRestoreView(TakesNoBody, SessionView):
    @extend_schema(
        request=None, parameters=[INCARNATION], responses={200: s.QueueStatusSerializer, **ERRORS}
    )
    def post(self, request: Request, session_id: uuid.UUID, claim_id: uuid.UUID) -> Response:
        """Put every source of the claim back at its position, or nothing."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        services.queue_send_now_restore(
            session_id=session.pk, claim_id=claim_id, identity=self.identity(request, session)
        )
        return self.status_response(session)


class SendNowAcknowledgeView(TakesNoBody, SessionView):
    @extend_schema(
        request=None, parameters=[INCARNATION], responses={200: s.RemovedCountSerializer, **ERRORS}
    )
    def post(self, request: Request, session_id: uuid.UUID, claim_id: uuid.UUID) -> Response:
        """Close the claim after the dispatch was accepted (removes durable sources)."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        removed = services.queue_send_now_acknowledge(
            session_id=session.pk, claim_id=claim_id, identity=self.identity(request, session)
        )
        return Response({"removed": removed})


# --- policy -----------------------------------------------------------------


class AutoRunView(SessionView):
    @extend_schema(
        request=s.AutoRunSerializer,
        parameters=[INCARNATION],
        responses={200: s.SessionSerializer, **ERRORS},
    )
    def put(self, request: Request, session_id: uuid.UUID) -> Response:
        """Turn auto-run on or off."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.AutoRunSerializer, request.data)
        session = services.session_set_auto_run(
            session_id=session.pk, enabled=data["enabled"], identity=self.identity(request, session)
        )
        return Response(s.SessionSerializer(session).data)


class AutoMergeView(SessionView):
    @extend_schema(
        request=s.AutoMergeSerializer,
        parameters=[INCARNATION],
        responses={200: s.SessionSerializer, **ERRORS},
    )
    def put(self, request: Request, session_id: uuid.UUID) -> Response:
        """Override auto-merge for this session (null inherits the global setting)."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.AutoMergeSerializer, request.data)
        session = services.session_set_auto_merge(
            session_id=session.pk, enabled=data["enabled"], identity=self.identity(request, session)
        )
        return Response(s.SessionSerializer(session).data)


class AgentReadyView(SessionView):
    @extend_schema(
        request=s.AgentReadySerializer,
        parameters=[INCARNATION],
        responses={200: s.SessionSerializer, **ERRORS},
    )
    def put(self, request: Request, session_id: uuid.UUID) -> Response:
        """Mark the session's agent ready (or busy) for the dispatcher (consumer)."""
        session, _ = self.session(request, session_id, Capability.SESSION_CONSUME)
        data = validated(s.AgentReadySerializer, request.data)
        session = services.session_set_agent_ready(
            session_id=session.pk, ready=data["ready"], identity=self.identity(request, session)
        )
        return Response(s.SessionSerializer(session).data)


# --- consumer ---------------------------------------------------------------


class ReserveView(TakesNoBody, SessionView):
    @extend_schema(
        request=None,
        parameters=[INCARNATION],
        responses={
            200: s.ReservationSerializer,
            204: OpenApiResponse(description="empty"),
            **ERRORS,
        },
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Reserve the head entry for delivery (409 auto_run_paused when paused)."""
        session, _ = self.session(request, session_id, Capability.SESSION_CONSUME)
        row, auto_run = services.reservation_reserve_for_delivery(
            session_id=session.pk, identity=self.identity(request, session)
        )
        if not auto_run:
            raise err.AutoRunPaused()
        if row is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        body = {
            "reservation_id": str(row.reservation_id),
            "message": s.QueuedMessageSerializer(row).data,
        }
        return Response(body)


class ReservationAckView(TakesNoBody, SessionView):
    @extend_schema(request=None, parameters=[INCARNATION], responses={204: None, **ERRORS})
    def post(self, request: Request, session_id: uuid.UUID, reservation_id: uuid.UUID) -> Response:
        """Delete exactly the reserved entry (409 reservation_changed otherwise)."""
        session, _ = self.session(request, session_id, Capability.SESSION_CONSUME)
        services.reservation_acknowledge(
            session_id=session.pk,
            reservation_id=reservation_id,
            identity=self.identity(request, session),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class ReservationReleaseView(TakesNoBody, SessionView):
    @extend_schema(
        request=None, parameters=[INCARNATION], responses={200: s.ReleaseSerializer, **ERRORS}
    )
    def post(self, request: Request, session_id: uuid.UUID, reservation_id: uuid.UUID) -> Response:
        """Make the reserved entry visible again at its position (``released``
        false: its delivery was already attempted, so it was dropped)."""
        session, _ = self.session(request, session_id, Capability.SESSION_CONSUME)
        row, released = services.reservation_release(
            session_id=session.pk,
            reservation_id=reservation_id,
            identity=self.identity(request, session),
        )
        return Response({**s.QueuedMessageSerializer(row).data, "released": released})


# --- transfer and pending move ----------------------------------------------


class TransferView(SessionView):
    @extend_schema(
        request=s.TransferSerializer,
        parameters=[INCARNATION],
        responses={200: s.QueueStatusSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Move every entry and the pending move to another session of the same
        task (409 session_identity_mismatch across tasks). Answers the destination."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.TransferSerializer, request.data)
        destination, _ = self.session(request, data["to_session"], Capability.SESSION_EDIT)
        services.queue_transfer(
            source_id=session.pk,
            destination_id=destination.pk,
            source_identity=self.identity(request, session),
        )
        return self.status_response(destination)


class PendingMoveView(SessionView):
    def _data(self, move: Any) -> dict[str, Any]:
        return s.PendingMoveSerializer(move, context={"now": clock.now()}).data

    @extend_schema(responses={200: s.PendingMoveSerializer, 204: None, **ERROR_RESPONSES})
    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        """The session's deferred workflow move (204 when none)."""
        session, _ = self.session(request, session_id, Capability.SESSION_READ)
        move = selectors.pending_move_get(session=session)
        if move is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(self._data(move))

    @extend_schema(
        request=s.PendingMoveInSerializer,
        parameters=[INCARNATION],
        responses={200: s.PendingMoveSerializer, **ERRORS},
    )
    def put(self, request: Request, session_id: uuid.UUID) -> Response:
        """Set (replace) the session's deferred workflow move."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.PendingMoveInSerializer, request.data)
        move = services.pending_move_set(
            session_id=session.pk, move=data, identity=self.identity(request, session)
        )
        return Response(self._data(move))

    @extend_schema(parameters=[INCARNATION], responses={204: None, **ERRORS})
    def delete(self, request: Request, session_id: uuid.UUID) -> Response:
        """Remove the session's deferred move (204 whether or not one existed)."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        services.pending_move_delete(
            session_id=session.pk, identity=self.identity(request, session)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- the remaining operations (issue 20 point 2) -------------------------------
# Operations that carry an entry's owner in their body (restore, requeue,
# lifecycle insert, replace) and those of the dispatch path (take head,
# acknowledge by id) need the consume capability: the agent runtime's, which the
# SPEC trusts to set reserved owners. Pending moves and auto-merge are edits;
# purging a session is a task admin's; the batch count and the move list reads.


def _generations(data: dict[str, Any]) -> services.Generations | None:
    given = data.get("generations")
    if not given:
        return None
    return services.Generations(task=given.get("task"), session=given.get("session"))


def _new_entry(data: dict[str, Any], principal: Principal) -> NewEntry:
    return NewEntry(
        content=data["content"],
        queued_by=data.get("queued_by") or principal.label,
        model=data["model"],
        plan_mode=data["plan_mode"],
        attachments=data.get("attachments", []),
        metadata=data["metadata"],
        coalesce_key=data["coalesce_key"],
        durable=data.get("durable", False),
        lifecycle_generation=data.get("lifecycle_generation"),
    )


def _snapshot_data(data: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """A validated snapshot body as ``services.snapshot`` data (owner defaulted)."""
    queued_at = data.get("queued_at") or clock.now()
    return {
        "id": str(data["id"]),
        "position": data["position"],
        "content": data["content"],
        "model": data["model"],
        "plan_mode": data["plan_mode"],
        "attachments": data.get("attachments", []),
        "metadata": data["metadata"],
        "queued_by": data.get("queued_by") or principal.label,
        "queued_at": queued_at.isoformat(),
        "coalesce_key": data["coalesce_key"],
        "durable": data.get("durable", False),
        "lifecycle_generation": data.get("lifecycle_generation"),
    }


class TakeHeadView(TakesNoBody, SessionView):
    @extend_schema(
        request=None,
        parameters=[INCARNATION],
        responses={
            200: s.TakenSerializer,
            204: OpenApiResponse(description="empty"),
            **ERRORS,
        },
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Delete and return the head entry (consumer; auto-run is not consulted:
        use ``reserve/`` for that). Give ``message`` and ``generations`` back to
        ``restore/`` when the delivery fails."""
        session, _ = self.session(request, session_id, Capability.SESSION_CONSUME)
        row, generations = services.entry_take_head_with_generations(
            session_id=session.pk, identity=self.identity(request, session)
        )
        if row is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response({"message": services.snapshot(row), "generations": generations.as_dict()})


class RestoreView(SessionView):
    @extend_schema(
        request=s.RestoreSerializer,
        parameters=[INCARNATION],
        responses={200: s.QueuedMessageSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Put a taken entry back at its own position, keeping its id (the cap
        does not apply). Already stored here: unchanged; stored in another
        session: 409 already_exists; ``generations`` that moved: 409
        queue_changed (consumer)."""
        session, principal = self.session(request, session_id, Capability.SESSION_CONSUME)
        data = validated(s.RestoreSerializer, request.data)
        entry = from_snapshot(session, _snapshot_data(data, principal))
        row = services.entry_restore(
            session_id=session.pk,
            entry=entry,
            identity=self.identity(request, session),
            generations=_generations(data),
        )
        return Response(s.QueuedMessageSerializer(row).data)


class RequeueView(SessionView):
    @extend_schema(
        request=s.RequeueSerializer,
        parameters=[INCARNATION],
        responses={
            201: s.AdmissionSerializer,
            200: OpenApiResponse(s.AdmissionSerializer, "replaced the coalesce match in place"),
            **ERRORS,
        },
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Requeue preserving FIFO: replaces the owner's entry with the same
        ``coalesce_key`` in place, else inserts right before the current head
        (the cap does not apply; never auto-merged) (consumer)."""
        session, principal = self.session(request, session_id, Capability.SESSION_CONSUME)
        data = validated(s.RequeueSerializer, request.data)
        admission = services.entry_requeue(
            session_id=session.pk,
            entry=_new_entry(data, principal),
            identity=self.identity(request, session),
            generations=_generations(data),
        )
        code = status.HTTP_201_CREATED if _is_new(admission) else status.HTTP_200_OK
        return Response(_admission_data(admission), status=code)


class LifecycleView(SessionView):
    @extend_schema(
        request=s.LifecycleSerializer,
        parameters=[INCARNATION],
        responses={
            201: s.LifecycleResultSerializer,
            200: OpenApiResponse(
                s.LifecycleResultSerializer, "replaced in place, or refused (accepted: false)"
            ),
            **ERRORS,
        },
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Lifecycle insert: a durable coalesce upsert accepted only while the task
        exists, is not archived and is at ``generation``; otherwise ``accepted:
        false`` and nothing changes (not an error) (consumer)."""
        session, principal = self.session(request, session_id, Capability.SESSION_CONSUME)
        data = validated(s.LifecycleSerializer, request.data)
        result = services.entry_lifecycle_upsert(
            session_id=session.pk,
            entry=_new_entry(data, principal),
            generation=data["generation"],
            allow_insert=data["allow_insert"],
            identity=self.identity(request, session),
        )
        admission = result.admission
        body = {
            "accepted": result.accepted,
            "replaced": bool(admission and admission.replaced),
            "entry": s.QueuedMessageSerializer(admission.entry).data if admission else None,
        }
        created = admission is not None and not admission.replaced
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class ReplaceView(SessionView):
    @extend_schema(
        request=s.ReplaceSerializer,
        parameters=[INCARNATION],
        responses={200: s.QueueStatusSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Replace every entry (reserved ones too) and the pending move with a
        snapshot, keeping ids, positions and owners. A repeated id or position,
        or ``generations`` that moved: 409 queue_changed; an id stored in another
        session: 409 already_exists (consumer)."""
        session, principal = self.session(request, session_id, Capability.SESSION_CONSUME)
        data = validated(s.ReplaceSerializer, request.data)
        services.queue_replace(
            session_id=session.pk,
            entries=[_snapshot_data(e, principal) for e in data["entries"]],
            pending_move=data["pending_move"],
            identity=self.identity(request, session),
            generations=_generations(data),
        )
        return self.status_response(session)


class AcknowledgeByIdView(TakesNoBody, SessionView):
    @extend_schema(request=None, parameters=[INCARNATION], responses={204: None, **ERRORS})
    def post(self, request: Request, session_id: uuid.UUID, message_id: uuid.UUID) -> Response:
        """Delete the reserved entry whatever its reservation (409
        reservation_changed when it is not reserved here) (consumer)."""
        session, _ = self.session(request, session_id, Capability.SESSION_CONSUME)
        services.reservation_acknowledge_by_id(
            session_id=session.pk, entry_id=message_id, identity=self.identity(request, session)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class AutoMergeUpView(TakesNoBody, SessionView):
    @extend_schema(
        request=None,
        parameters=[INCARNATION],
        responses={200: s.AutoMergeResultSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID, message_id: uuid.UUID) -> Response:
        """Fold the entry into the one above when the auto-merge rule allows it,
        whatever the session's setting; ``merged: false`` (nothing changed) when
        it is missing, the head, or the pair is incompatible."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        target = services.entry_auto_merge_up(
            session_id=session.pk, entry_id=message_id, identity=self.identity(request, session)
        )
        entry = s.QueuedMessageSerializer(target).data if target is not None else None
        return Response({"merged": target is not None, "entry": entry})


class SessionPurgeView(TakesNoBody, SessionView):
    @extend_schema(
        request=None, parameters=[INCARNATION], responses={200: s.RemovedCountSerializer, **ERRORS}
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Remove every entry of the session (reserved ones too), its pending move
        and send-now claims; bumps the session generation (task admin)."""
        session, _ = self.session(request, session_id, Capability.TASK_ADMIN)
        removed = services.queue_purge_session(
            session_id=session.pk, identity=self.identity(request, session)
        )
        return Response({"removed": removed})


class PendingMoveTakeView(TakesNoBody, SessionView):
    @extend_schema(
        request=None,
        parameters=[INCARNATION],
        responses={200: s.PendingMoveSerializer, 204: None, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Return and remove the session's deferred move (204 when none; a stale
        one is removed and 204 answered)."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        move = services.pending_move_take(
            session_id=session.pk, identity=self.identity(request, session)
        )
        if move is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(s.PendingMoveSerializer(move, context={"now": clock.now()}).data)


class PendingMoveDeleteIfMatchView(SessionView):
    @extend_schema(
        request=s.DeleteIfMatchSerializer,
        parameters=[INCARNATION],
        responses={200: s.DeletedSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Remove the move only while it is exactly the one given (and, in the
        same transaction, ``handoff_entry_id``); ``deleted: false`` when it is
        gone or was replaced."""
        session, _ = self.session(request, session_id, Capability.SESSION_EDIT)
        data = validated(s.DeleteIfMatchSerializer, request.data)
        expected = {name: data[name] for name in services.PENDING_FIELDS}
        expected["session_id"] = str(session.pk)
        expected["queued_at"] = data["queued_at"].astimezone(UTC).isoformat()
        deleted = services.pending_move_delete_if_match(
            expected=expected,
            handoff_entry_id=data.get("handoff_entry_id"),
            identity=self.identity(request, session),
        )
        return Response({"deleted": deleted})


def _app_for(request: Request, ref: str, capability: Capability) -> App:
    target = app_get(ref=ref)
    require(request, capability, target, not_found=err.SessionQueueNotFound)
    return target


class AppPendingMovesView(APIView):
    @extend_schema(
        parameters=PAGE_PARAMETERS,
        responses={
            200: paginated("PaginatedPendingMoveList", s.PendingMoveRecordSerializer(many=True)),
            **ERROR_RESPONSES,
        },
    )
    def get(self, request: Request, app: str) -> Response:
        """Every armed deferred move of the app's sessions, oldest first."""
        target = _app_for(request, app, Capability.SESSION_READ)
        paginator = Pagination()
        page = paginator.paginate_queryset(selectors.pending_moves_of(app=target), request, self)
        body = s.PendingMoveRecordSerializer(page, many=True, context={"now": clock.now()}).data
        return paginator.get_paginated_response(body)


class AppPendingCountsView(APIView):
    @extend_schema(
        request=s.PendingCountsInSerializer,
        responses={200: s.PendingCountsSerializer, **ERROR_RESPONSES},
    )
    def post(self, request: Request, app: str) -> Response:
        """Visible entries per task (reserved ones excluded), for up to 100 task ids
        in one read; tasks of other apps count 0 (a read: session read)."""
        target = _app_for(request, app, Capability.SESSION_READ)
        data = validated(s.PendingCountsInSerializer, request.data)
        counts = selectors.count_pending_by_tasks(task_ids=data["tasks"], app=target)
        return Response({"counts": counts})


# --- blocked heads (issue 20 point 4) ------------------------------------------
# Reading the list needs session read; releasing a stuck reservation is a
# consumer's act (SPEC §1 puts release under consume); skipping the head (a
# reorder) and resuming auto-run are edits. Every action is audited.

REASON = OpenApiParameter(
    "reason",
    {"type": "string", "enum": [r.value for r in selectors.BlockedReason]},
    OpenApiParameter.QUERY,
    description="Only sessions blocked for this reason.",
)
MIN_AGE = OpenApiParameter(
    "min_age",
    {"type": "integer", "minimum": 0, "maximum": selectors.MAX_MIN_AGE},
    OpenApiParameter.QUERY,
    description="Seconds each reason must have lasted (default: auto-run paused and "
    "delivery failing at once, agent not ready after SESSIONQUEUES_BLOCKED_NOT_READY_SECONDS, "
    "reservations after SESSIONQUEUES_RESERVATION_DEADLINE_SECONDS).",
)


def _one_query_value(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise err.InvalidSessionInput(details={name: ["Give it once."]})
    return values[0] if values else None


def _blocked_query(request: Request) -> tuple[selectors.BlockedReason | None, int | None]:
    reason, min_age = _one_query_value(request, "reason"), _one_query_value(request, "min_age")
    if reason is not None and reason not in selectors.BlockedReason.__members__.values():
        raise err.InvalidSessionInput(details={"reason": ["Not a blocked reason."]})
    if min_age is not None and not (
        DIGITS.match(min_age) and int(min_age) <= selectors.MAX_MIN_AGE
    ):
        raise err.InvalidSessionInput(
            details={"min_age": [f"Seconds: 0 to {selectors.MAX_MIN_AGE}."]}
        )
    return (
        selectors.BlockedReason(reason) if reason is not None else None,
        int(min_age) if min_age is not None else None,
    )


class AppBlockedSessionsView(APIView):
    @extend_schema(
        parameters=[REASON, MIN_AGE, *PAGE_PARAMETERS],
        responses={
            200: paginated("PaginatedBlockedHeadList", s.BlockedHeadSerializer(many=True)),
            **ERROR_RESPONSES,
        },
    )
    def get(self, request: Request, app: str) -> Response:
        """Sessions of the app whose head cannot move, longest blocked first, each
        with its reasons and their ages (session read)."""
        target = _app_for(request, app, Capability.SESSION_READ)
        reason, min_age = _blocked_query(request)
        ages = selectors.BlockedAges.configured(min_age)
        now = clock.now()
        rows = selectors.blocked_sessions(
            sessions=Session.objects.filter(task__app=target), reason=reason, ages=ages, now=now
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(rows, request, self)
        heads = selectors.blocked_heads(page=page, ages=ages, now=now)
        return paginator.get_paginated_response(s.BlockedHeadSerializer(heads, many=True).data)


class UnblockView(SessionView):
    """Base of the operator's actions: the actor is the principal, over REST."""

    capability: Capability

    def act(self, request: Request, session_id: uuid.UUID, serializer: type) -> Response:
        session, principal = self.session(request, session_id, self.capability)
        data = validated(serializer, request.data)
        actor = services.Actor(label=principal.label, via=AuditVia.REST)
        record = self.perform(session, data, actor, self.identity(request, session))
        return Response(s.AuditRecordSerializer(record).data)

    def perform(
        self, session: Session, data: dict[str, Any], actor: Any, identity: Any
    ) -> AuditRecord:
        raise NotImplementedError


class ReleaseStuckView(UnblockView):
    capability = Capability.SESSION_CONSUME

    @extend_schema(
        request=s.ReleaseStuckSerializer,
        parameters=[INCARNATION],
        responses={200: s.AuditRecordSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Release a reservation whoever holds it: the entry is visible again at
        its position (``details.released``), or dropped when its delivery was
        marked attempted. 409 reservation_changed when it is not open. Audited."""
        return self.act(request, session_id, s.ReleaseStuckSerializer)

    def perform(
        self, session: Session, data: dict[str, Any], actor: Any, identity: Any
    ) -> AuditRecord:
        return services.reservation_release_stuck(
            session_id=session.pk,
            reservation_id=data["reservation_id"],
            actor=actor,
            note=data["note"],
            identity=identity,
        )


class SkipHeadView(UnblockView):
    capability = Capability.SESSION_EDIT

    @extend_schema(
        request=s.SkipHeadSerializer,
        parameters=[INCARNATION],
        responses={200: s.AuditRecordSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Move the head behind the next visible entry. 409 queue_changed when the
        head is not ``head_id`` or nothing is behind it. Audited."""
        return self.act(request, session_id, s.SkipHeadSerializer)

    def perform(
        self, session: Session, data: dict[str, Any], actor: Any, identity: Any
    ) -> AuditRecord:
        return services.queue_skip_head(
            session_id=session.pk,
            head_id=data.get("head_id"),
            actor=actor,
            note=data["note"],
            identity=identity,
        )


class ResumeAutoRunView(UnblockView):
    capability = Capability.SESSION_EDIT

    @extend_schema(
        request=s.ResumeAutoRunSerializer,
        parameters=[INCARNATION],
        responses={200: s.AuditRecordSerializer, **ERRORS},
    )
    def post(self, request: Request, session_id: uuid.UUID) -> Response:
        """Turn auto-run on (``details.changed`` false when it was on). Audited."""
        return self.act(request, session_id, s.ResumeAutoRunSerializer)

    def perform(
        self, session: Session, data: dict[str, Any], actor: Any, identity: Any
    ) -> AuditRecord:
        return services.session_resume_auto_run(
            session_id=session.pk, actor=actor, note=data["note"], identity=identity
        )
