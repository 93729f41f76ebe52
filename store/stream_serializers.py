"""Request and response shapes of the stream API (SPEC §6). Requests check
types and ranges (strict JSON types, unknown fields refused: 400 naming the
field); the rules (offsets against the head, retention, payload size) are the
services'."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from groupqueues.serializers import PayloadField, validate_entries
from groupqueues.settings_ranges import MAX_PAYLOAD_BYTES_MAX
from queueproject.serializers import (
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
)
from store import streams
from store.models import STREAM_KEY_MAX, StreamConsumer, StreamEntry, Topic
from store.streams import APPEND_MAX, MAX_ENTRIES_MAX, READ_DEFAULT, READ_MAX, WAIT_MAX

OFFSET_MAX = 2**63 - 1

# ------------------------------------------------------------------ topics


class TopicChangeSerializer(StrictSerializer):
    """PATCH: any subset of the settings."""

    retention_seconds = StrictFloatField(
        min_value=1, max_value=10 * 365 * 24 * 3600, allow_null=True,
        help_text="Entries older than this are pruned (null: no age limit).",
    )  # fmt: skip
    max_entries = StrictIntegerField(
        min_value=1, max_value=MAX_ENTRIES_MAX, allow_null=True,
        help_text="Only the newest this many entries are kept (null: no count limit).",
    )  # fmt: skip
    max_payload_bytes = StrictIntegerField(
        min_value=1, max_value=MAX_PAYLOAD_BYTES_MAX,
        help_text="Largest entry payload (UTF-8 JSON bytes); larger is 413.",
    )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False


class TopicCreateSerializer(TopicChangeSerializer):
    name = StrictCharField(
        min_length=1, max_length=64, help_text="1-64 letters, digits, dots, underscores, hyphens."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].required = True


class TopicSerializer(serializers.Serializer):
    """A topic: its settings, its offsets and how many entries it keeps."""

    name = serializers.CharField()
    head_offset = serializers.IntegerField(help_text="The last offset appended (0: none yet).")
    first_offset = serializers.IntegerField(
        help_text="The first offset still available (head_offset + 1 when none is)."
    )
    retained = serializers.SerializerMethodField(help_text="Entries currently kept.")
    retention_seconds = serializers.FloatField(allow_null=True)
    max_entries = serializers.IntegerField(allow_null=True)
    max_payload_bytes = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    def get_retained(self, topic: Topic) -> int:
        return topic.head_offset - topic.pruned_through


class TopicDetailSerializer(TopicSerializer):
    consumers = serializers.SerializerMethodField()

    def get_consumers(self, topic: Topic) -> list[dict[str, Any]]:
        found = streams.consumers_of(topic=topic)
        return [dict(ConsumerSerializer(c).data) for c in found]


# ------------------------------------------------------------------ entries


class AppendSerializer(StrictSerializer):
    """One entry."""

    payload = PayloadField(help_text="Any JSON value but null.")
    idempotency_key = StrictCharField(
        min_length=1, max_length=STREAM_KEY_MAX, required=False, allow_null=True,
        trim_whitespace=False,
        help_text="Unique per topic while its entry is retained: a repeat answers 200 with "
        "the existing offset and appends nothing.",
    )  # fmt: skip

    @staticmethod
    def entry(data: dict[str, Any]) -> streams.StreamEntryIn:
        return streams.StreamEntryIn(data["payload"], data.get("idempotency_key"))


class AppendBatchSerializer(StrictSerializer):
    entries = serializers.ListField(
        child=serializers.JSONField(), min_length=1,
        help_text=f"1 to {APPEND_MAX} entries, appended all or nothing at consecutive offsets.",
    )  # fmt: skip

    def validate_entries(self, value: list[Any]) -> list[streams.StreamEntryIn]:
        checked = validate_entries(value, AppendSerializer, field="entries", limit=APPEND_MAX)
        return [AppendSerializer.entry(e) for e in checked]


class AppendedSerializer(serializers.Serializer):
    offset = serializers.IntegerField()


class AppendedBatchSerializer(serializers.Serializer):
    offsets = serializers.ListField(child=serializers.IntegerField())


class ReadQuerySerializer(StrictSerializer):
    """Query parameters of a read (strings, as a query string gives them)."""

    since = serializers.IntegerField(min_value=0, max_value=OFFSET_MAX, required=False, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=READ_MAX, required=False,
                                     default=READ_DEFAULT)  # fmt: skip
    wait_seconds = serializers.FloatField(min_value=0, max_value=WAIT_MAX, required=False,
                                          default=0.0)  # fmt: skip


class ConsumerReadQuerySerializer(ReadQuerySerializer):
    since = None  # type: ignore[assignment]  # a consumer reads from its saved offset


class EntrySerializer(serializers.Serializer):
    offset = serializers.IntegerField()
    payload = serializers.JSONField()
    idempotency_key = serializers.CharField(allow_null=True)
    appended_at = serializers.DateTimeField()


class PageSerializer(serializers.Serializer):
    """A read: entries after ``since`` in offset order; read on from ``next_since``."""

    since = serializers.IntegerField()
    next_since = serializers.IntegerField(help_text="The last offset returned (since if none).")
    head_offset = serializers.IntegerField()
    first_offset = serializers.IntegerField()
    entries = EntrySerializer(many=True)


def page_body(page: streams.StreamPage) -> dict[str, Any]:
    entries: list[StreamEntry] = page.entries
    return {
        "since": page.since, "next_since": page.next_since, "head_offset": page.head_offset,
        "first_offset": page.first_offset, "entries": EntrySerializer(entries, many=True).data,
    }  # fmt: skip


# ------------------------------------------------------------------ consumers


class CommitSerializer(StrictSerializer):
    offset = StrictIntegerField(
        min_value=0, max_value=OFFSET_MAX,
        help_text="The last offset processed; at least the saved one, at most the head.",
    )  # fmt: skip


class ResetSerializer(StrictSerializer):
    schema_rules = {"oneOf": [{"required": ["offset"]}, {"required": ["to"]}]}

    offset = StrictIntegerField(
        min_value=0, max_value=OFFSET_MAX, required=False,
        help_text="Any offset from 0 to the head (backwards too).",
    )  # fmt: skip
    to = serializers.ChoiceField(
        choices=["earliest", "latest"], required=False,
        help_text="The first retained entry, or the head.",
    )  # fmt: skip

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if ("offset" in data) == ("to" in data):
            raise serializers.ValidationError({"offset": ["Give exactly one of offset and to."]})
        return data


class ConsumerSerializer(serializers.Serializer):
    name = serializers.CharField()
    committed_offset = serializers.IntegerField(help_text="The last offset processed (0: none).")
    committed_at = serializers.DateTimeField(allow_null=True)
    lag = serializers.SerializerMethodField(help_text="head_offset - committed_offset.")
    created_at = serializers.DateTimeField()

    def get_lag(self, consumer: StreamConsumer) -> int:
        return streams.consumer_lag(consumer)


class EventsQuerySerializer(StrictSerializer):
    """GET consumers/{consumer}/events/ query parameters (SSE)."""

    last_event_id = serializers.IntegerField(
        required=False, min_value=0, max_value=OFFSET_MAX,
        help_text="Resume after this offset, for clients that cannot send Last-Event-ID.",
    )  # fmt: skip
    timeout = serializers.FloatField(
        required=False, min_value=0, max_value=300,
        help_text="End the stream after this many seconds (default 300; reconnect to go on).",
    )  # fmt: skip
