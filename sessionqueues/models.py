"""Session queues (SPEC §3): tasks, their sessions, and each session's ordered
queue of entries, plus pending workflow moves and send-now claims.

The Session row is the per-session lock row: every write to a session's queue
locks it first (``select_for_update`` on PostgreSQL; SQLite's IMMEDIATE write
transactions serialise writers anyway), so caps, positions and reservations
hold under concurrency.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.db import models

from principals.models import App
from queueproject import notify
from queueproject.conf import product_settings

RESERVED_OWNERS = frozenset({"agent", "workflow", "server"})
PENDING_MOVE_STALE_AFTER = timedelta(hours=24)


def _empty_list() -> list[Any]:
    return []


def _empty_dict() -> dict[str, Any]:
    return {}


class Task(models.Model):
    """A unit of work of an app; sessions belong to it. ``generation`` is bumped by
    every purge so stale lifecycle retries of an older generation are refused."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="tasks")
    title = models.CharField(max_length=200, blank=True)
    archived = models.BooleanField(default=False)
    generation = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints: ClassVar = [
            models.CheckConstraint(condition=models.Q(generation__gte=0), name="task_gen_gte_0"),
        ]

    def __str__(self) -> str:
        return self.title or str(self.pk)


# Dispatchers of every session wait on this channel (one place for the names).
ANY_SESSION_CHANNEL = notify.channel("sq", "any")


def session_channel(session_id: object) -> str:
    """The notify channel a dispatcher of one session waits on."""
    return notify.channel("sq", session_id)


class Session(models.Model):
    """An agent session of a task and its queue's policy; also the queue's lock row.

    (task, id, incarnation_id) is the session identity; ``generation`` is bumped
    by every destructive mutation (delete, merge, purge, transfer, replace) and
    fences send-now restores. ``auto_merge`` None inherits the global setting.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="sessions")
    incarnation_id = models.UUIDField(default=uuid.uuid4)
    auto_run = models.BooleanField(default=True)
    auto_merge = models.BooleanField(null=True, blank=True, default=None)
    auto_merge_revision = models.BigIntegerField(default=0)
    generation = models.BigIntegerField(default=0)
    agent_ready = models.BooleanField(default=False)
    # When a dispatcher last reserved an entry of this session: a dispatcher's
    # pass skips sessions another one served since the pass began (fairness
    # across dispatcher processes; docs/session-dispatch.md).
    dispatched_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When auto_run / agent_ready last changed (null: not since the session was
    # created): how long a head has been held back (the blocked-heads view).
    auto_run_changed_at = models.DateTimeField(null=True, blank=True)
    agent_ready_changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        indexes: ClassVar = [
            models.Index(
                fields=["agent_ready"],
                name="session_dispatchable",
                condition=models.Q(auto_run=True, agent_ready=True),
            ),
        ]

    def __str__(self) -> str:
        return str(self.pk)

    def set_auto_run(self, enabled: bool, at: datetime) -> list[str]:
        """Set the auto-run policy, stamping the time when it changes; returns
        the fields to save."""
        if self.auto_run != enabled:
            self.auto_run, self.auto_run_changed_at = enabled, at
        return ["auto_run", "auto_run_changed_at"]

    def set_agent_ready(self, ready: bool, at: datetime) -> list[str]:
        """Set the agent's readiness, stamping the time when it changes; returns
        the fields to save."""
        if self.agent_ready != ready:
            self.agent_ready, self.agent_ready_changed_at = ready, at
        return ["agent_ready", "agent_ready_changed_at"]

    @property
    def auto_merge_enabled(self) -> bool:
        """The effective auto-merge policy: the session's override when set,
        else the global setting (read at each call)."""
        if self.auto_merge is not None:
            return bool(self.auto_merge)
        return product_settings().session_auto_merge_default


class QueuedMessageQuerySet(models.QuerySet["QueuedMessage"]):
    def visible(self) -> QueuedMessageQuerySet:
        """Entries not reserved in flight (what listings, counts and edits see)."""
        return self.filter(reservation_id__isnull=True)

    def reserved(self) -> QueuedMessageQuerySet:
        return self.filter(reservation_id__isnull=False)

    def in_order(self) -> QueuedMessageQuerySet:
        return self.order_by("position")


class QueuedMessage(models.Model):
    """One queue entry (the model keeps its historical name, and so its table).
    Lower ``position`` is nearer the head; positions are
    positive and unique per session. A reserved entry (``reservation_id`` set) is
    in flight: invisible to listings, counts, edits, reorder and merge."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No single-column FK indexes: qm_session_position and qm_task_session lead
    # with these columns, and every insert would maintain two more indexes.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    position = models.PositiveIntegerField()
    content = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    plan_mode = models.BooleanField(default=False)
    attachments = models.JSONField(default=_empty_list, blank=True)
    metadata = models.JSONField(default=_empty_dict, blank=True)
    queued_by = models.CharField(max_length=150)
    queued_at = models.DateTimeField()
    coalesce_key = models.CharField(max_length=200, blank=True)
    durable = models.BooleanField(default=False)
    lifecycle_generation = models.BigIntegerField(null=True, blank=True)
    reservation_id = models.UUIDField(null=True, blank=True)
    reservation_owner = models.UUIDField(null=True, blank=True)
    reserved_at = models.DateTimeField(null=True, blank=True)
    # Who holds the reservation: a dispatcher's worker id (its registry row
    # says whether it lives; docs/session-dispatch.md), "" for a REST consumer,
    # a send-now claim or a Python caller (bound to the session incarnation only).
    reserved_by = models.CharField(max_length=128, blank=True, default="")
    delivery_attempted = models.BooleanField(default=False)

    objects = QueuedMessageQuerySet.as_manager()

    class Meta:
        ordering = ["session_id", "position"]
        constraints: ClassVar = [
            models.CheckConstraint(condition=models.Q(position__gt=0), name="qm_position_gt_0"),
            models.UniqueConstraint(fields=["session", "position"], name="qm_session_position"),
        ]
        indexes: ClassVar = [
            models.Index(fields=["reservation_id"], name="qm_reservation"),
            models.Index(fields=["task", "session"], name="qm_task_session"),
        ]

    def __str__(self) -> str:
        return f"#{self.position} {self.content[:40]}"

    @property
    def reserved(self) -> bool:
        return self.reservation_id is not None


class PendingMove(models.Model):
    """The deferred workflow move of a session (at most one); stale after 24 h."""

    session = models.OneToOneField(
        Session, primary_key=True, on_delete=models.CASCADE, related_name="pending_move"
    )
    move_id = models.CharField(max_length=200)
    workflow_id = models.CharField(max_length=200, blank=True)
    workflow_step_id = models.CharField(max_length=200, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    queued_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"move {self.move_id} of {self.session_id}"

    def is_stale(self, now: datetime) -> bool:
        return self.queued_at <= now - PENDING_MOVE_STALE_AFTER

    def as_record(self) -> dict[str, Any]:
        return {
            "session_id": str(self.session_id),
            "move_id": self.move_id,
            "workflow_id": self.workflow_id,
            "workflow_step_id": self.workflow_step_id,
            "actor": self.actor,
            "queued_at": self.queued_at.isoformat(),
        }


class SendNowClaim(models.Model):
    """An open send-now claim: the exact claimed sources (snapshots in queue
    order) and the session generation at claim time, so restore and acknowledge
    work across requests and are refused after a destructive change."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="send_now_claims")
    generation = models.BigIntegerField()
    sources = models.JSONField(default=_empty_list)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"send-now {self.pk}"


class DeliveryFailure(models.Model):
    """The current run of failed deliveries of a session: written by the
    dispatcher when a delivery fails (``failures`` in a row, when the next try
    is due) and deleted by its next successful delivery. What the blocked-heads
    view reads as "the last delivery failed and the dispatcher is backing off"."""

    session = models.OneToOneField(
        Session, primary_key=True, on_delete=models.CASCADE, related_name="delivery_failure"
    )
    failures = models.PositiveIntegerField(default=1)
    first_failed_at = models.DateTimeField()
    last_failed_at = models.DateTimeField()
    retry_at = models.DateTimeField()
    last_error = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.failures} failed deliveries to {self.session_id}"


class AuditAction(models.TextChoices):
    RELEASE_RESERVATION = "release_reservation", "release a stuck reservation"
    SKIP_HEAD = "skip_head", "skip the head"
    RESUME_AUTO_RUN = "resume_auto_run", "resume auto-run"


class AuditVia(models.TextChoices):
    REST = "rest", "REST API"
    ADMIN = "admin", "admin"
    COMMAND = "command", "management command"


class AuditRecord(models.Model):
    """Who did what to which session, when, and through which door: one row per
    operator action on a blocked head, written in the action's transaction (a
    record exists exactly when the action happened). ``actor`` is a principal
    label (``user:<id>``, ``app:<slug>``) or ``cli:<login>`` for commands.
    Session, task and entry are plain ids so the record outlives them."""

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    via = models.CharField(max_length=16, choices=AuditVia.choices)
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    # Indexed by sq_audit_app_at (app first), so no index of its own.
    app = models.ForeignKey(
        App, on_delete=models.CASCADE, related_name="session_audit", db_index=False
    )
    task_id = models.UUIDField()
    session_id = models.UUIDField()
    entry_id = models.UUIDField(null=True, blank=True)
    note = models.TextField(blank=True)
    details = models.JSONField(default=_empty_dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes: ClassVar = [
            models.Index(fields=["session_id", "at"], name="sq_audit_session_at"),
            models.Index(fields=["app", "at"], name="sq_audit_app_at"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.session_id}"
