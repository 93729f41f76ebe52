"""Request validation and response shapes of the session queue API (no logic)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from groupqueues.serializers import AwareDateTimeField  # the one strict date-time field
from principals.models import App
from queueproject.serializers import (
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
    StrictUUIDField,
)
from sessionqueues.models import AuditRecord, PendingMove, QueuedMessage, Session, Task
from sessionqueues.selectors import BlockedReason
from sessionqueues.services import MAX_ATTACHMENTS, SENDER_TASK_KEY

MAX_CONTENT = 100_000


# --- responses --------------------------------------------------------------


class QueuedMessageSerializer(serializers.ModelSerializer):
    reserved = serializers.BooleanField(read_only=True)

    class Meta:
        model = QueuedMessage
        fields = [
            "id",
            "session",
            "task",
            "position",
            "content",
            "model",
            "plan_mode",
            "attachments",
            "metadata",
            "queued_by",
            "queued_at",
            "coalesce_key",
            "durable",
            "reserved",
            "delivery_attempted",
        ]
        read_only_fields = fields


class AdmissionSerializer(QueuedMessageSerializer):
    merged = serializers.BooleanField(read_only=True)
    appended = serializers.BooleanField(read_only=True)
    replaced = serializers.BooleanField(read_only=True)

    class Meta(QueuedMessageSerializer.Meta):
        fields = [*QueuedMessageSerializer.Meta.fields, "merged", "appended", "replaced"]
        read_only_fields = fields


class SessionSerializer(serializers.ModelSerializer):
    auto_merge_override = serializers.SerializerMethodField()

    class Meta:
        model = Session
        fields = [
            "id",
            "task",
            "incarnation_id",
            "auto_run",
            "auto_merge_override",
            "agent_ready",
            "generation",
            "created_at",
        ]
        read_only_fields = fields

    def get_auto_merge_override(self, obj: Session) -> dict[str, Any] | None:
        if obj.auto_merge is None:
            return None
        return {"enabled": obj.auto_merge, "revision": obj.auto_merge_revision}


class TaskSerializer(serializers.ModelSerializer):
    app: serializers.SlugRelatedField[App] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    class Meta:
        model = Task
        fields = ["id", "app", "title", "archived", "generation", "created_at"]
        read_only_fields = fields


class TaskDetailSerializer(TaskSerializer):
    sessions = SessionSerializer(many=True, read_only=True)

    class Meta(TaskSerializer.Meta):
        fields = [*TaskSerializer.Meta.fields, "sessions"]
        read_only_fields = fields


class GenerationsSerializer(serializers.Serializer):
    task = serializers.IntegerField(help_text="The task's lifecycle generation (bumped by purges).")
    session = serializers.IntegerField(
        help_text="The session generation (bumped by every destructive change)."
    )


class QueueStatusSerializer(serializers.Serializer):
    session = serializers.UUIDField(source="session.pk")
    task = serializers.UUIDField(source="session.task_id")
    incarnation_id = serializers.UUIDField(source="session.incarnation_id")
    entries = QueuedMessageSerializer(many=True)
    count = serializers.IntegerField()
    reserved = serializers.IntegerField()
    max = serializers.IntegerField()
    auto_run = serializers.BooleanField(source="session.auto_run")
    agent_ready = serializers.BooleanField(source="session.agent_ready")
    merge_enabled = serializers.BooleanField()
    auto_merge = serializers.BooleanField()
    auto_merge_override = serializers.SerializerMethodField()
    generation = serializers.IntegerField(source="session.generation")
    task_generation = serializers.IntegerField()
    generations = GenerationsSerializer()

    def get_auto_merge_override(self, obj: Any) -> dict[str, Any] | None:
        return SessionSerializer().get_auto_merge_override(obj.session)


class PendingMoveSerializer(serializers.ModelSerializer):
    stale = serializers.SerializerMethodField()

    class Meta:
        model = PendingMove
        fields = ["move_id", "workflow_id", "workflow_step_id", "actor", "queued_at", "stale"]
        read_only_fields = fields

    def get_stale(self, obj: PendingMove) -> bool:
        return obj.is_stale(self.context["now"])


class ReservationSerializer(serializers.Serializer):
    reservation_id = serializers.UUIDField()
    message = QueuedMessageSerializer()


class ReleaseSerializer(QueuedMessageSerializer):
    released = serializers.BooleanField(read_only=True)

    class Meta(QueuedMessageSerializer.Meta):
        fields = [*QueuedMessageSerializer.Meta.fields, "released"]
        read_only_fields = fields


class DispatchSerializer(serializers.Serializer):
    content = serializers.CharField()
    model = serializers.CharField(allow_blank=True)
    plan_mode = serializers.BooleanField()
    attachments = serializers.ListField(child=serializers.DictField())
    sources = serializers.ListField(child=serializers.UUIDField())


class SendNowResultSerializer(serializers.Serializer):
    claim_id = serializers.UUIDField()
    dispatch = DispatchSerializer()


class RemovedCountSerializer(serializers.Serializer):
    removed = serializers.IntegerField()


class PurgeResultSerializer(serializers.Serializer):
    removed = serializers.IntegerField()
    generation = serializers.IntegerField()


# --- requests ---------------------------------------------------------------


class TaskCreateSerializer(StrictSerializer):
    title = StrictCharField(max_length=200, allow_blank=True, required=False, default="")


class AttachmentSerializer(StrictSerializer):
    schema_rules = {"oneOf": [{"required": ["data"]}, {"required": ["reference"]}]}

    type = StrictCharField(max_length=50)
    # DRF's metaclass moves declared fields into _declared_fields; the stubs see this
    # class attribute as overriding Serializer.data.
    data = StrictCharField(  # type: ignore[assignment]
        required=False, max_length=MAX_CONTENT, trim_whitespace=False
    )
    reference = StrictCharField(required=False, max_length=2000)
    mime_type = StrictCharField(required=False, max_length=200, allow_blank=True)
    name = StrictCharField(required=False, max_length=500, allow_blank=True)
    size = StrictIntegerField(required=False, min_value=0)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("data" in attrs) == ("reference" in attrs):
            raise serializers.ValidationError("Give exactly one of data or reference.")
        return attrs


def _attachments_field() -> serializers.ListField:
    return serializers.ListField(
        child=AttachmentSerializer(), required=False, max_length=MAX_ATTACHMENTS
    )


class EntryCreateSerializer(StrictSerializer):
    """An entry to queue. An agent entry names its sender task either as the
    top-level ``sender_task_id`` (a UUID of a task of the session's app, given
    as ``context["app"]``) or as ``metadata.sender_task_id``; either way it is
    stored in the entry's metadata under ``sender_task_id`` (the top-level form
    as the UUID's canonical string), where merge-up and auto-merge compare it."""

    content = StrictCharField(max_length=MAX_CONTENT, trim_whitespace=False)
    model = StrictCharField(max_length=200, required=False, default="", allow_blank=True)
    plan_mode = StrictBooleanField(required=False, default=False)
    attachments = _attachments_field()
    metadata = serializers.DictField(required=False, default=dict)
    coalesce_key = StrictCharField(
        max_length=200, required=False, default="", allow_blank=True, help_text="Empty: none."
    )
    append_to_tail = StrictBooleanField(required=False, default=False)
    queued_by = serializers.ChoiceField(
        choices=["agent"],
        required=False,
        help_text='Only "agent", for app tokens with session:consume (needs '
        "sender_task_id); otherwise queued_by is the authenticated principal.",
    )
    sender_task_id = serializers.UUIDField(
        required=False,
        help_text='With queued_by "agent": the task the agent runtime queues for '
        "(stored as metadata.sender_task_id).",
    )

    def validate_sender_task_id(self, value: Any) -> Any:
        tasks = Task.objects.filter(pk=value)
        if "app" in self.context:
            tasks = tasks.filter(app=self.context["app"])
        if not tasks.exists():
            raise serializers.ValidationError("No such task.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["metadata"] = _with_sender_task(attrs)
        if attrs.get("queued_by") == "agent" and not attrs["metadata"].get(SENDER_TASK_KEY):
            raise serializers.ValidationError(
                {"metadata": ["sender_task_id is required when queued_by is agent."]}
            )
        if attrs["coalesce_key"] and attrs["append_to_tail"]:
            raise serializers.ValidationError(
                {"append_to_tail": ["Cannot be combined with coalesce_key."]}
            )
        return attrs


def _with_sender_task(attrs: dict[str, Any]) -> dict[str, Any]:
    """The metadata with the top-level sender task folded in (400 when it is
    given without queued_by agent, or disagrees with metadata's)."""
    metadata: dict[str, Any] = attrs["metadata"]
    if "sender_task_id" not in attrs:
        return metadata
    sender = str(attrs.pop("sender_task_id"))
    if attrs.get("queued_by") != "agent":
        raise serializers.ValidationError({"sender_task_id": ["Only with queued_by agent."]})
    if metadata.get(SENDER_TASK_KEY) not in (None, sender):
        raise serializers.ValidationError(
            {"sender_task_id": ["Disagrees with metadata.sender_task_id."]}
        )
    return {**metadata, SENDER_TASK_KEY: sender}


class EntryUpdateSerializer(StrictSerializer):
    min_fields = 1
    content = StrictCharField(max_length=MAX_CONTENT, trim_whitespace=False, required=False)
    attachments = _attachments_field()
    metadata = serializers.DictField(
        required=False, help_text="Key updates; a null value removes that key."
    )


class ReorderSerializer(StrictSerializer):
    ids = serializers.ListField(child=StrictUUIDField(), max_length=10_000)


class SendNowEntrySerializer(StrictSerializer):
    id = StrictUUIDField()
    content = StrictCharField(max_length=MAX_CONTENT, trim_whitespace=False, allow_blank=True)


class SendNowSerializer(StrictSerializer):
    entries = serializers.ListField(child=SendNowEntrySerializer(), min_length=1, max_length=1000)


class AutoRunSerializer(StrictSerializer):
    enabled = StrictBooleanField()


class AutoMergeSerializer(StrictSerializer):
    enabled = StrictBooleanField(allow_null=True)


class AgentReadySerializer(StrictSerializer):
    ready = StrictBooleanField()


class TransferSerializer(StrictSerializer):
    to_session = StrictUUIDField()


class PendingMoveInSerializer(StrictSerializer):
    move_id = StrictCharField(max_length=200)
    workflow_id = StrictCharField(max_length=200, required=False, allow_blank=True)
    workflow_step_id = StrictCharField(max_length=200, required=False, allow_blank=True)
    actor = StrictCharField(max_length=200, required=False, allow_blank=True)


# --- the remaining operations (issue 20 point 2) -------------------------------

MAX_POSITION = 500_000_000  # half of positions.PARK_OFFSET: moves never collide
MAX_COUNT_TASKS = 100
MAX_REPLACE_ENTRIES = 1000
MAX_GENERATION = 2**63 - 1  # a BigIntegerField


class EntrySnapshotSerializer(serializers.Serializer):
    """An entry as data (``services.snapshot``): what take-head answers, the
    webhook delivers as ``message``, and restore and replace take back."""

    id = serializers.UUIDField()
    position = serializers.IntegerField()
    content = serializers.CharField(allow_blank=True)
    model = serializers.CharField(allow_blank=True)
    plan_mode = serializers.BooleanField()
    attachments = serializers.ListField(child=serializers.DictField())
    metadata = serializers.DictField()
    queued_by = serializers.CharField()
    queued_at = serializers.DateTimeField()
    coalesce_key = serializers.CharField(allow_blank=True)
    durable = serializers.BooleanField()
    lifecycle_generation = serializers.IntegerField(allow_null=True)


class TakenSerializer(serializers.Serializer):
    message = EntrySnapshotSerializer()
    generations = GenerationsSerializer()


class LifecycleResultSerializer(serializers.Serializer):
    accepted = serializers.BooleanField(
        help_text="False: refused (the task is gone or archived, or its generation moved)."
    )
    replaced = serializers.BooleanField()
    entry = QueuedMessageSerializer(allow_null=True)


class AutoMergeResultSerializer(serializers.Serializer):
    merged = serializers.BooleanField()
    entry = QueuedMessageSerializer(
        allow_null=True, help_text="The entry it folded into; null when it was skipped."
    )


class PendingMoveRecordSerializer(PendingMoveSerializer):
    class Meta(PendingMoveSerializer.Meta):
        fields = ["session", *PendingMoveSerializer.Meta.fields]
        read_only_fields = fields


class DeletedSerializer(serializers.Serializer):
    deleted = serializers.BooleanField()


class PendingCountsSerializer(serializers.Serializer):
    counts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Visible entries per requested task id (0 for tasks of other apps).",
    )


class GenerationsInSerializer(StrictSerializer):
    """The generations the caller read; any that moved answers 409 queue_changed."""

    task = StrictIntegerField(min_value=0, max_value=MAX_GENERATION, required=False)
    session = StrictIntegerField(min_value=0, max_value=MAX_GENERATION, required=False)


class _EntryIn(StrictSerializer):
    """The fields of an entry a runtime hands back (its owner included)."""

    content = StrictCharField(max_length=MAX_CONTENT, trim_whitespace=False, allow_blank=True)
    model = StrictCharField(max_length=200, required=False, default="", allow_blank=True)
    plan_mode = StrictBooleanField(required=False, default=False)
    attachments = _attachments_field()
    metadata = serializers.DictField(required=False, default=dict)
    queued_by = StrictCharField(
        max_length=150,
        required=False,
        help_text="The entry's owner; default: the authenticated principal.",
    )
    coalesce_key = StrictCharField(max_length=200, required=False, default="", allow_blank=True)


class RequeueSerializer(_EntryIn):
    durable = StrictBooleanField(required=False, default=False)
    lifecycle_generation = StrictIntegerField(
        min_value=0, max_value=MAX_GENERATION, required=False, allow_null=True
    )
    generations = GenerationsInSerializer(required=False)


class EntrySnapshotInSerializer(RequeueSerializer):
    id = StrictUUIDField()
    position = StrictIntegerField(min_value=1, max_value=MAX_POSITION)
    queued_at = AwareDateTimeField(required=False, help_text="Default: now.")


class RestoreSerializer(EntrySnapshotInSerializer):
    """The taken entry (as take-head answered it) and, optionally, the
    generations take-head answered."""


class ReplaceEntrySerializer(EntrySnapshotInSerializer):
    generations = None  # type: ignore[assignment]  # per request, not per entry


class ReplaceSerializer(StrictSerializer):
    entries = serializers.ListField(child=ReplaceEntrySerializer(), max_length=MAX_REPLACE_ENTRIES)
    pending_move = PendingMoveInSerializer(required=False, allow_null=True, default=None)
    generations = GenerationsInSerializer(required=False)


class LifecycleSerializer(_EntryIn):
    coalesce_key = StrictCharField(max_length=200, help_text="Required: what a retry replaces.")
    generation = StrictIntegerField(
        min_value=0,
        max_value=MAX_GENERATION,
        help_text="The task's lifecycle generation the entry belongs to.",
    )
    allow_insert = StrictBooleanField(
        required=False, default=True, help_text="False: only replace an existing entry."
    )


class DeleteIfMatchSerializer(StrictSerializer):
    """The move exactly as it was read (``GET pending-move/`` without ``stale``)."""

    move_id = StrictCharField(max_length=200)
    workflow_id = StrictCharField(max_length=200, allow_blank=True)
    workflow_step_id = StrictCharField(max_length=200, allow_blank=True)
    actor = StrictCharField(max_length=200, allow_blank=True)
    queued_at = AwareDateTimeField()
    handoff_entry_id = StrictUUIDField(
        required=False, help_text="An entry of this session removed in the same transaction."
    )


class PendingCountsInSerializer(StrictSerializer):
    tasks = serializers.ListField(child=StrictUUIDField(), min_length=1, max_length=MAX_COUNT_TASKS)


# --- blocked heads (issue 20 point 4) ------------------------------------------


class BlockerSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=[r.value for r in BlockedReason])
    since = serializers.DateTimeField()
    age_seconds = serializers.FloatField()
    details = serializers.DictField(
        help_text="delivery_failing: failures, last_error, last_failed_at, retry_at; "
        "reservation_stuck: reservations [{reservation_id, entry_id, position, "
        "reserved_at, delivery_attempted}]; otherwise empty."
    )


class BlockedHeadSerializer(serializers.Serializer):
    session = serializers.UUIDField(source="session.pk")
    task = serializers.UUIDField(source="session.task_id")
    incarnation_id = serializers.UUIDField(source="session.incarnation_id")
    auto_run = serializers.BooleanField(source="session.auto_run")
    agent_ready = serializers.BooleanField(source="session.agent_ready")
    waiting = serializers.IntegerField(help_text="Visible entries.")
    head = QueuedMessageSerializer(allow_null=True)
    since = serializers.DateTimeField(help_text="When the oldest reason began.")
    age_seconds = serializers.FloatField()
    reasons = BlockerSerializer(many=True, source="blockers")


class AuditRecordSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditRecord
        fields = [
            "id",
            "at",
            "actor",
            "via",
            "action",
            "task_id",
            "session_id",
            "entry_id",
            "note",
            "details",
        ]
        read_only_fields = fields


MAX_NOTE = 2000


class ReleaseStuckSerializer(StrictSerializer):
    reservation_id = StrictUUIDField()
    note = StrictCharField(max_length=MAX_NOTE, required=False, default="", allow_blank=True)


class SkipHeadSerializer(StrictSerializer):
    head_id = StrictUUIDField(
        required=False, help_text="The head you saw; another head answers 409 queue_changed."
    )
    note = StrictCharField(max_length=MAX_NOTE, required=False, default="", allow_blank=True)


class ResumeAutoRunSerializer(StrictSerializer):
    note = StrictCharField(max_length=MAX_NOTE, required=False, default="", allow_blank=True)
