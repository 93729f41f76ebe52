"""Request validation and response shapes of the session queue API (no logic)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from principals.models import App
from queueproject.serializers import (
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictSerializer,
    StrictUUIDField,
)
from sessionqueues.models import PendingMove, QueuedMessage, Session, Task
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
