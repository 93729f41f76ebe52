"""Reads of the session queues: status snapshots, pending moves, counts, and
the blocked heads an operator looks at."""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import (
    BooleanField,
    Case,
    Count,
    DateTimeField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Least

from principals.models import App
from queueproject import clock
from queueproject.conf import product_settings
from sessionqueues import exceptions as err
from sessionqueues.conf import blocked_settings
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


def count_pending_by_tasks(*, task_ids: Iterable[Any], app: App | None = None) -> dict[str, int]:
    """Visible entries per task id (zero for tasks without any; with ``app``,
    zero for tasks of other apps too, so a count reveals nothing outside it)."""
    wanted = [str(pk) for pk in task_ids]
    rows = QueuedMessage.objects.filter(task_id__in=wanted)
    if app is not None:
        rows = rows.filter(task__app=app)
    counts = rows.visible().values("task_id").annotate(n=Count("id"))
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


def pending_moves_of(*, app: App) -> QuerySet[PendingMove]:
    """The armed moves of the app's sessions, oldest first (for sweeps over
    REST; pass one back to delete-if-match)."""
    return (
        PendingMove.objects.filter(session__task__app=app)
        .select_related("session")
        .order_by("queued_at", "session_id")
    )


# --- blocked heads -----------------------------------------------------------


class BlockedReason(enum.StrEnum):
    """Why a session's head cannot move (each with the time it began)."""

    AUTO_RUN_PAUSED = "auto_run_paused"  # auto-run off with entries waiting
    AGENT_NOT_READY = "agent_not_ready"  # auto-run on, entries waiting, agent busy too long
    DELIVERY_FAILING = "delivery_failing"  # the last delivery failed; the dispatcher backs off
    RESERVATION_STUCK = "reservation_stuck"  # a reservation held past the deadline


MAX_MIN_AGE = 10 * 365 * 86400  # seconds (ten years): the largest age a caller may ask for


@dataclass(frozen=True)
class BlockedAges:
    """How old each reason must be before it counts (seconds)."""

    paused: float
    not_ready: float
    failing: float
    stuck: float

    @classmethod
    def configured(cls, min_age: float | None = None) -> BlockedAges:
        """The settings' ages (paused and failing count at once), or ``min_age``
        for every reason."""
        if min_age is not None:
            return cls(min_age, min_age, min_age, min_age)
        conf = blocked_settings()
        return cls(0.0, conf.not_ready_seconds, 0.0, conf.reservation_deadline_seconds)


# The annotation of each reason's flag and of the time it began.
_FLAGS = {
    BlockedReason.AUTO_RUN_PAUSED: ("is_paused", "paused_since"),
    BlockedReason.AGENT_NOT_READY: ("is_not_ready", "not_ready_since"),
    BlockedReason.DELIVERY_FAILING: ("is_failing", "failing_since"),
    BlockedReason.RESERVATION_STUCK: ("is_stuck", "stuck_since"),
}
_NEVER = datetime(9999, 12, 31, tzinfo=UTC)


def _flag(condition: Q) -> ExpressionWrapper:
    return ExpressionWrapper(condition, output_field=BooleanField())


def blocked_sessions(
    *,
    sessions: QuerySet[Session],
    reason: BlockedReason | None = None,
    ages: BlockedAges | None = None,
    now: datetime | None = None,
) -> QuerySet[Session]:
    """The sessions of ``sessions`` (tasks not archived) whose head cannot move,
    longest blocked first, each annotated with ``is_<reason>`` flags, the time
    each began (``<reason>_since``), ``blocked_since``, ``waiting`` (visible
    entries) and ``head_id``. ``reason``: only sessions blocked for it."""
    now = now or clock.now()
    ages = ages or BlockedAges.configured()
    waiting = QueuedMessage.objects.filter(session=OuterRef("pk"), reservation_id__isnull=True)
    reserved = QueuedMessage.objects.filter(session=OuterRef("pk"), reservation_id__isnull=False)
    count = waiting.order_by().values("session").annotate(n=Count("pk")).values("n")
    qs = sessions.filter(task__archived=False).annotate(
        has_waiting=Exists(waiting),
        paused_since=Coalesce("auto_run_changed_at", "created_at"),
        not_ready_since=Coalesce("agent_ready_changed_at", "created_at"),
        failing_since=F("delivery_failure__first_failed_at"),
        stuck_since=Subquery(reserved.order_by("reserved_at").values("reserved_at")[:1]),
    )
    qs = qs.annotate(
        is_paused=_flag(
            Q(auto_run=False, has_waiting=True, paused_since__lte=_ago(now, ages.paused))
        ),
        is_not_ready=_flag(
            Q(auto_run=True, agent_ready=False, has_waiting=True)
            & Q(not_ready_since__lte=_ago(now, ages.not_ready))
        ),
        is_failing=_flag(Q(has_waiting=True, failing_since__lte=_ago(now, ages.failing))),
        is_stuck=_flag(Q(stuck_since__lte=_ago(now, ages.stuck))),
    )
    wanted = [reason] if reason is not None else list(BlockedReason)
    qs = qs.filter(functools.reduce(operator.or_, (Q(**{_FLAGS[r][0]: True}) for r in wanted)))
    return (
        qs.annotate(
            blocked_since=Least(*(_since_if(*_FLAGS[r]) for r in BlockedReason)),
            waiting=Coalesce(Subquery(count), 0),
            head_id=Subquery(waiting.order_by("position").values("pk")[:1]),
        )
        .select_related("task__app", "delivery_failure")
        .order_by("blocked_since", "pk")
    )


def _ago(now: datetime, seconds: float) -> datetime:
    return now - timedelta(seconds=seconds)


def _since_if(flag: str, since: str) -> Case:
    return Case(
        When(**{flag: True}, then=F(since)), default=Value(_NEVER), output_field=DateTimeField()
    )


@dataclass(frozen=True)
class Blocker:
    """One reason a head cannot move, since when, and what the operator needs
    to act on it (a stuck reservation's id, the failure count and error)."""

    reason: BlockedReason
    since: datetime
    age_seconds: float
    details: dict[str, Any]


@dataclass(frozen=True)
class BlockedHead:
    """A blocked session as the operator sees it."""

    session: Session
    head: QueuedMessage | None
    waiting: int
    blockers: list[Blocker]
    since: datetime
    age_seconds: float


def blocked_heads(
    *, page: Sequence[Any], ages: BlockedAges | None = None, now: datetime | None = None
) -> list[BlockedHead]:
    """The rows of a page of :func:`blocked_sessions` with their heads and stuck
    reservations (two more queries for the whole page)."""
    now = now or clock.now()
    ages = ages or BlockedAges.configured()
    heads = QueuedMessage.objects.in_bulk([s.head_id for s in page if s.head_id])
    stuck: dict[Any, list[QueuedMessage]] = {}
    held = QueuedMessage.objects.filter(
        session__in=[s.pk for s in page if s.is_stuck],
        reservation_id__isnull=False,
        reserved_at__lte=_ago(now, ages.stuck),
    ).order_by("reserved_at")
    for row in held:
        stuck.setdefault(row.session_id, []).append(row)
    return [_blocked_head(s, heads.get(s.head_id), stuck.get(s.pk, []), now) for s in page]


def _blocked_head(
    session: Any, head: QueuedMessage | None, stuck: list[QueuedMessage], now: datetime
) -> BlockedHead:
    blockers = [
        Blocker(
            reason=reason,
            since=getattr(session, since),
            age_seconds=max(0.0, (now - getattr(session, since)).total_seconds()),
            details=_details(reason, session, stuck),
        )
        for reason, (flag, since) in _FLAGS.items()
        if getattr(session, flag)
    ]
    return BlockedHead(
        session=session,
        head=head,
        waiting=session.waiting,
        blockers=blockers,
        since=session.blocked_since,
        age_seconds=max(0.0, (now - session.blocked_since).total_seconds()),
    )


def _details(reason: BlockedReason, session: Any, stuck: list[QueuedMessage]) -> dict[str, Any]:
    if reason is BlockedReason.DELIVERY_FAILING:
        failure = session.delivery_failure
        return {
            "failures": failure.failures,
            "last_error": failure.last_error,
            "last_failed_at": failure.last_failed_at,
            "retry_at": failure.retry_at,
        }
    if reason is BlockedReason.RESERVATION_STUCK:
        return {
            "reservations": [
                {
                    "reservation_id": row.reservation_id,
                    "entry_id": row.pk,
                    "position": row.position,
                    "reserved_at": row.reserved_at,
                    "delivery_attempted": row.delivery_attempted,
                }
                for row in stuck
            ]
        }
    return {}


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
