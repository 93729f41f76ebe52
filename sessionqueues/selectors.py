"""Reads of the session queues: status snapshots, pending moves, counts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count, Exists, F, OuterRef, Q

from queueproject import clock
from queueproject.conf import product_settings
from sessionqueues import exceptions as err
from sessionqueues.models import PendingMove, QueuedMessage, Session, Task


def task_get(*, task_id: Any) -> Task:
    """The task with its app and group (raises SessionQueueNotFound)."""
    try:
        return Task.objects.select_related("app__group").get(pk=task_id)
    except (Task.DoesNotExist, ValidationError, ValueError) as exc:
        raise err.SessionQueueNotFound("No such task.") from exc


def session_get(*, session_id: Any) -> Session:
    """The session with its task, app and group (raises SessionQueueNotFound)."""
    try:
        return Session.objects.select_related("task__app__group").get(pk=session_id)
    except (Session.DoesNotExist, ValidationError, ValueError) as exc:
        raise err.SessionQueueNotFound("No such session.") from exc


def visible_entries(session: Session) -> list[QueuedMessage]:
    return list(QueuedMessage.objects.filter(session=session).visible().in_order())


@dataclass(frozen=True)
class QueueStatus:
    """One read of a session's queue and policy (counts exclude reserved entries)."""

    session: Session
    entries: list[QueuedMessage]
    reserved: int
    max: int
    merge_enabled: bool
    auto_merge: bool
    task_generation: int

    @property
    def count(self) -> int:
        return len(self.entries)

    @property
    def generations(self) -> dict[str, int]:
        """The fences a client compares across reads (SPEC §4): the task's
        lifecycle generation (bumped by purges) and the session generation
        (bumped by every destructive change)."""
        return {"task": self.task_generation, "session": self.session.generation}


def queue_status(*, session: Session) -> QueueStatus:
    """Visible entries in order, count, cap, auto-run, merge settings, generations."""
    settings = product_settings()
    rows = list(QueuedMessage.objects.filter(session=session).in_order())
    return QueueStatus(
        session=session,
        entries=[row for row in rows if not row.reserved],
        reserved=sum(1 for row in rows if row.reserved),
        max=settings.session_max_per_session,
        merge_enabled=settings.session_manual_merge_enabled,
        auto_merge=session.auto_merge_enabled,
        task_generation=Task.objects.values_list("generation", flat=True).get(pk=session.task_id),
    )


def pending_move_get(*, session: Session) -> PendingMove | None:
    """The session's deferred move, stale or not (see ``PendingMove.is_stale``)."""
    return PendingMove.objects.filter(session=session).first()


def pending_moves() -> list[dict[str, Any]]:
    """Every armed move as a record (for sweeps; pass one to delete-if-match)."""
    return [move.as_record() for move in PendingMove.objects.order_by("queued_at")]


def stale_pending_moves() -> list[dict[str, Any]]:
    now = clock.now()
    return [m.as_record() for m in PendingMove.objects.all() if m.is_stale(now)]


def count_pending_by_tasks(*, task_ids: Iterable[Any]) -> dict[str, int]:
    """Visible entries per task id (zero for tasks without any)."""
    wanted = [str(pk) for pk in task_ids]
    counts = (
        QueuedMessage.objects.filter(task_id__in=wanted)
        .visible()
        .values("task_id")
        .annotate(n=Count("id"))
    )
    result = dict.fromkeys(wanted, 0)
    for row in counts:
        result[str(row["task_id"])] = row["n"]
    return result


def dispatchable_sessions(*, session_id: Any = None) -> list[Session]:
    """Sessions with auto-run ON, a ready agent, a live task and a visible
    entry, and no dispatcher delivery in flight, in creation order."""
    qs = Session.objects.filter(auto_run=True, agent_ready=True, task__archived=False)
    entries = QueuedMessage.objects.filter(session=OuterRef("pk"))
    in_flight = entries.filter(reservation_id__isnull=False).exclude(reserved_by="")
    qs = qs.filter(Exists(entries.filter(reservation_id__isnull=True)), ~Exists(in_flight))
    if session_id is not None:
        qs = qs.filter(pk=session_id)
    return list(qs.select_related("task__app").order_by("created_at"))


def durable_lifecycle_entries() -> list[QueuedMessage]:
    """Every durable lifecycle entry (``entry_lifecycle_upsert``), reserved or
    not, across sessions, in FIFO order per session (the seed's
    ``ListDurableLifecycleEntries``), with their session and task (generations
    and incarnations to compare without a query per row)."""
    rows = QueuedMessage.objects.filter(durable=True, lifecycle_generation__isnull=False)
    return list(rows.select_related("session", "task").order_by("session_id", "position"))


def durable_delivery_entries() -> list[QueuedMessage]:
    """Every entry that stays stored until a delivery is settled, across
    sessions (the seed's ``ListDurableDeliveryEntries``): durable entries, and
    every entry reserved in flight (held by a dispatcher, a REST consumer or a
    send-now claim). FIFO order per session, with session and task."""
    rows = QueuedMessage.objects.filter(Q(durable=True) | Q(reservation_id__isnull=False))
    return list(rows.select_related("session", "task").order_by("session_id", "position"))


def recovery_candidates() -> list[QueuedMessage]:
    """The durable delivery entries a recovery pass may settle: every
    reservation, and every lifecycle entry behind its task's generation.
    Filtered in the database, so a pass (every 10 s in each dispatcher) reads
    those rows only, however many durable entries wait. Ordered by session,
    with session and task."""
    stale = Q(lifecycle_generation__lt=F("task__generation"))
    rows = QueuedMessage.objects.filter(Q(reservation_id__isnull=False) | stale)
    return list(rows.select_related("session", "task").order_by("session_id", "position"))


def reservation_session_id(*, reservation_id: Any, holder: str) -> Any:
    """The session whose queue now holds the reservation ``reservation_id`` of
    ``holder`` (a transfer moves reserved entries along), or None when it is
    closed (acknowledged, released, purged, recovered)."""
    return (
        QueuedMessage.objects.filter(reservation_id=reservation_id, reserved_by=holder)
        .values_list("session_id", flat=True)
        .first()
    )
