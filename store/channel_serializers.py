"""Request and response shapes of the notify channel API (SPEC §6). Bodies are
strict (unknown fields are a 400 naming them, SPEC §8); query parameters of
the events endpoint too."""

from __future__ import annotations

from rest_framework import serializers

from queueproject.serializers import StrictCharField, StrictSerializer
from store.channels import IDEMPOTENCY_KEY_MAX
from store.models import Channel, Notification

CURSOR_MAX = 2**63 - 1
TIMEOUT_MAX = 300.0
LONG_POLL_DEFAULT = 30.0


class ChannelCreateSerializer(StrictSerializer):
    name = StrictCharField(
        max_length=64, help_text="1-64 letters, digits, dots, underscores, hyphens."
    )


class PublishSerializer(StrictSerializer):
    """POST messages/: a JSON payload and an optional idempotency key."""

    payload = serializers.JSONField(help_text="Any JSON value (NOTIFY_MAX_PAYLOAD_BYTES at most).")
    idempotency_key = StrictCharField(
        required=False, min_length=1, max_length=IDEMPOTENCY_KEY_MAX, trim_whitespace=False,
        help_text="A repeat with the same key while the first is retained returns the first "
        "notification and publishes nothing.",
    )  # fmt: skip


class EventsQuerySerializer(StrictSerializer):
    """GET events/ query parameters."""

    after = serializers.IntegerField(
        required=False, min_value=0, max_value=CURSOR_MAX,
        help_text="Resume after this notification id (long-poll; SSE uses Last-Event-ID). "
        "Without it the listener attaches now: only later notifications arrive.",
    )  # fmt: skip
    last_event_id = serializers.IntegerField(
        required=False, min_value=0, max_value=CURSOR_MAX,
        help_text="SSE resume for clients that cannot send the Last-Event-ID header.",
    )  # fmt: skip
    timeout = serializers.FloatField(
        required=False, min_value=0, max_value=TIMEOUT_MAX,
        help_text="Long-poll: wait up to this long for a notification (30 s). SSE: end the "
        "stream after this long (SSE_MAX_STREAM_SECONDS, 300 s); clients reconnect.",
    )  # fmt: skip


class ChannelSerializer(serializers.ModelSerializer[Channel]):
    """A channel: ``head`` is the id of its latest notification (0: none yet)."""

    group = serializers.CharField(source="group.slug")
    head = serializers.IntegerField(source="last_seq")

    class Meta:
        model = Channel
        fields = ["name", "group", "head", "created_at"]


class NotificationSerializer(serializers.ModelSerializer[Notification]):
    """A notification; ``id`` grows by one per publish on its channel (the SSE
    event id)."""

    id = serializers.IntegerField(source="seq")
    payload = serializers.JSONField(allow_null=True)

    class Meta:
        model = Notification
        fields = ["id", "payload", "published_at"]


class LongPollSerializer(serializers.Serializer):
    """The JSON long-poll answer: pass ``last_event_id`` as ``after`` next time."""

    notifications = NotificationSerializer(many=True)
    last_event_id = serializers.IntegerField()


class PurgedSerializer(serializers.Serializer):
    deleted = serializers.IntegerField()
