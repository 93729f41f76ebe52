"""Request and response shapes of the group-queue API (SPEC §4).

Request serializers check types and ranges only, so a bad field is a 400 with
that field in ``details``; the services decide everything else. Numbers are
strict: a JSON string or boolean where a number is expected is refused rather
than coerced, so the API accepts exactly what its OpenAPI schema describes.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from groupqueues import validation as check
from groupqueues.dead_filters import (
    DEAD_FILTER_LIMIT_MAX,
    ERROR_CONTAINS_MAX,
    DeadFilter,
    dead_filter,
)
from groupqueues.exceptions import InvalidQueueInput
from groupqueues.models import (
    COLLECTION_NAME_VALIDATOR,
    MAX_IN_FLIGHT_PER_KEY_HELP,
    Collection,
    CollectionKind,
    DeadReason,
    Fairness,
    Message,
)
from groupqueues.selectors import QueueStats
from groupqueues.services import (
    MAX_ACK_BATCH,
    MAX_BATCH,
    MAX_CLAIM,
    AckBatchResult,
    ClaimedMessage,
    NewMessage,
)
from groupqueues.services.collections import parse_rate_limit
from groupqueues.settings_ranges import SETTING_RANGES
from principals.models import Group
from queueproject.ids import parse_id
from queueproject.serializers import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
    StrictUUIDField,
    api_datetime,
    not_both,
)

WAIT_SECONDS_MAX = 20
MAX_REDRIVE_IDS = 1000

# ------------------------------------------------------------- strict fields


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date-time with a time zone (a JSON string): a naive one is
    refused rather than read as UTC, and so is one outside the representable
    range once in UTC."""

    default_error_messages = {"naive": "Give a time zone, e.g. 2030-01-01T00:00:00Z."}

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str):
            self.fail("invalid", format="ISO 8601 with a time zone")
        try:
            parsed = parse_datetime(value)
            if parsed is not None and parsed.tzinfo is None:
                self.fail("naive")
            return super().to_internal_value(value)
        except (ValueError, OverflowError):
            self.fail("invalid", format="ISO 8601 with a time zone")


def moment(help_text: str) -> AwareDateTimeField:
    return AwareDateTimeField(required=False, allow_null=True, help_text=help_text)


def seconds(*, required: bool = False, **kwargs: Any) -> StrictFloatField:
    """A duration in seconds, 0 … ten years (null = not given)."""
    return StrictFloatField(
        min_value=0, max_value=check.DURATION_MAX, required=required, allow_null=not required,
        **kwargs,
    )  # fmt: skip


def visibility_timeout(*, required: bool) -> StrictIntegerField:
    return StrictIntegerField(
        min_value=check.VISIBILITY_TIMEOUT_MIN, max_value=check.VISIBILITY_TIMEOUT_MAX,
        required=required, allow_null=not required,
    )  # fmt: skip


def message_id() -> StrictUUIDField:
    return StrictUUIDField(format="hex_verbose")


@extend_schema_field(
    {
        "description": "Any JSON value but null.",
        "anyOf": [
            {"type": "object", "additionalProperties": True},
            {"type": "array", "items": {}},
            {"type": "string"},
            {"type": "number"},
            {"type": "boolean"},
        ],
    }
)
class PayloadField(serializers.JSONField):
    """A message payload: any JSON value but null (the parser already refused
    what a database cannot store)."""


# ---------------------------------------------------------------- collections


class QueueStatsSerializer(serializers.Serializer):
    depth = serializers.IntegerField(help_text="Ready + claimed messages.")
    depth_pending = serializers.IntegerField(help_text="Ready, due and not expired.")
    delayed = serializers.IntegerField(help_text="Ready but not yet due.")
    in_flight = serializers.IntegerField(help_text="Claimed.")
    dead = serializers.IntegerField()
    oldest_pending_age_seconds = serializers.FloatField(allow_null=True)
    waiting_behind_key = serializers.IntegerField(
        help_text="Ready and due, but behind the head of their ordering key."
    )
    waiting_behind_limit = serializers.IntegerField(
        help_text="Ready and due heads held back because max_in_flight is reached."
    )

    @staticmethod
    def of(stats: QueueStats) -> dict[str, Any]:
        return QueueStatsSerializer(stats).data


def setting_field(name: str, **kwargs: Any) -> serializers.Field:
    """The field of collection setting ``name``, ranged by ``SETTING_RANGES``."""
    r = SETTING_RANGES[name]
    if r.nullable:
        kwargs["allow_null"] = True
    if r.seconds:
        return StrictFloatField(min_value=r.low, max_value=r.high, **kwargs)
    # An integer setting's range is integral (``SettingRange``).
    return StrictIntegerField(min_value=int(r.low), max_value=int(r.high), **kwargs)


class CollectionSettingsSerializer(StrictSerializer):
    """The settings of a collection (PATCH: any subset)."""

    max_payload_bytes = setting_field("max_payload_bytes")
    default_max_attempts = setting_field("default_max_attempts")
    visibility_timeout = setting_field("visibility_timeout")
    retry_backoff_base = setting_field("retry_backoff_base")
    retry_backoff_max = setting_field("retry_backoff_max")
    dead_retention = setting_field("dead_retention")
    max_depth = setting_field("max_depth", help_text="null: no limit.")
    paused = StrictBooleanField(help_text="Claims answer nothing while paused.")
    fairness = serializers.ChoiceField(
        choices=Fairness.choices,
        help_text="none: claim order; enqueuer / ordering_key: round-robin across them.",
    )
    max_in_flight = setting_field("max_in_flight", help_text="Claimed at once; null: no limit.")
    max_in_flight_per_key = setting_field(
        "max_in_flight_per_key",
        help_text=MAX_IN_FLIGHT_PER_KEY_HELP,
    )
    rate_limit = StrictCharField(
        allow_null=True, max_length=20,
        help_text='Claims per interval: "100/s", "1000/min", "10/h"; null: none.',
    )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False

    def validate_rate_limit(self, value: str | None) -> str | None:
        try:
            parse_rate_limit(value)
        except InvalidQueueInput as exc:
            raise serializers.ValidationError(exc.details["rate_limit"]) from exc
        return value


class CollectionCreateSerializer(CollectionSettingsSerializer):
    name = StrictCharField(min_length=1, max_length=64)
    kind = serializers.ChoiceField(choices=[CollectionKind.QUEUE], default=CollectionKind.QUEUE)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].required = True

    def validate_name(self, value: str) -> str:
        if not re.match(COLLECTION_NAME_VALIDATOR.regex, value):
            raise serializers.ValidationError(str(COLLECTION_NAME_VALIDATOR.message))
        return value


class CollectionSerializer(serializers.ModelSerializer):
    """A collection: its settings at the top level (durations in seconds) and
    its ``stats`` (pass ``context={"stats": {pk: QueueStats}}``)."""

    group: serializers.SlugRelatedField[Group] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    stats = serializers.SerializerMethodField()

    class Meta:
        model = Collection
        fields = [
            "name", "kind", "group", "max_payload_bytes", "default_max_attempts",
            "visibility_timeout", "retry_backoff_base", "retry_backoff_max", "dead_retention",
            "max_depth", "paused", "fairness", "max_in_flight", "max_in_flight_per_key",
            "rate_limit", "created_at", "stats",
        ]  # fmt: skip
        read_only_fields = fields

    rate_limit = serializers.CharField(
        read_only=True, allow_null=True, help_text='e.g. "100/s"; null: none.'
    )

    @extend_schema_field(QueueStatsSerializer)
    def get_stats(self, obj: Collection) -> dict[str, Any]:
        return QueueStatsSerializer.of(self.context["stats"][obj.pk])


# ------------------------------------------------------------------- enqueue


def validate_entries(
    value: list[Any], entry: type[serializers.Serializer], *, field: str, limit: int
) -> list[dict[str, Any]]:
    """Validate each entry of a batch; the first bad one (or the first one over
    ``limit``) rejects the batch with its ``index`` in the details."""
    if len(value) > limit:
        raise InvalidQueueInput(
            f"Give at most {limit} {field}.",
            details={"index": limit, field: [f"Give at most {limit} entries."]},
        )
    out = []
    for index, data in enumerate(value):
        serializer = entry(data=data)
        if not serializer.is_valid():
            raise InvalidQueueInput(
                f"Entry {index} of {field} is not valid.",
                details={"index": index, field: {str(index): serializer.errors}},
            )
        out.append(serializer.validated_data)
    return out


class EnqueueSerializer(StrictSerializer):
    schema_rules = {
        "allOf": [
            not_both(
                "delay_seconds", "deliver_after", delay_seconds="number", deliver_after="string"
            ),
            not_both(
                "expires_in_seconds", "expires_at", expires_in_seconds="number", expires_at="string"
            ),
        ]
    }

    payload = PayloadField()
    priority = StrictIntegerField(
        min_value=check.PRIORITY_MIN, max_value=check.PRIORITY_MAX, default=0,
        help_text="Higher first.",
    )  # fmt: skip
    delay_seconds = seconds(help_text="Not claimable before now + this.")
    deliver_after = moment("Not claimable before this moment (not with delay_seconds).")
    expires_in_seconds = seconds(help_text="Dies (expired) if not done by now + this.")
    expires_at = moment("Dies (expired) if not done by this moment (not with expires_in_seconds).")
    max_attempts = StrictIntegerField(
        min_value=1, max_value=check.MAX_ATTEMPTS_MAX, required=False, allow_null=True,
        help_text="Default: the collection's default_max_attempts.",
    )  # fmt: skip
    idempotency_key = StrictCharField(
        min_length=1, max_length=check.IDEMPOTENCY_KEY_MAX, required=False, allow_null=True,
        trim_whitespace=False,
        help_text="While a message with this key exists in the collection, the same "
        "key answers that message's id (200) and inserts nothing.",
    )  # fmt: skip
    ordering_key = StrictCharField(
        min_length=1, max_length=check.IDEMPOTENCY_KEY_MAX, required=False, allow_null=True,
        trim_whitespace=False,
        help_text="Messages with one ordering key are handed out one at a time, in enqueue "
        "order (a retry keeps its place at the head).",
    )  # fmt: skip
    on_conflict = serializers.ChoiceField(
        choices=["replace"], required=False, allow_null=True,
        help_text='"replace" (with idempotency_key): a waiting message holding the key takes '
        "this payload and options in its place (same id and position).",
    )  # fmt: skip
    debounce_seconds = seconds(
        help_text="Due this long after now, i.e. after the last replace (not with delay_seconds)."
    )

    @staticmethod
    def new_message(data: dict[str, Any]) -> NewMessage:
        return NewMessage(
            payload=data["payload"], priority=data.get("priority", 0),
            delay_seconds=data.get("delay_seconds"), deliver_after=data.get("deliver_after"),
            expires_in_seconds=data.get("expires_in_seconds"), expires_at=data.get("expires_at"),
            max_attempts=data.get("max_attempts"), idempotency_key=data.get("idempotency_key"),
            ordering_key=data.get("ordering_key"), on_conflict=data.get("on_conflict"),
            debounce_seconds=data.get("debounce_seconds"),
        )  # fmt: skip


@extend_schema_field(EnqueueSerializer(many=True))
class EnqueueEntriesField(serializers.ListField):
    """The entries of a batch (validated one by one, for the index)."""


class EnqueueBatchSerializer(StrictSerializer):
    messages = EnqueueEntriesField(
        child=serializers.JSONField(), min_length=1,
        help_text=f"1 to {MAX_BATCH} messages, enqueued all or nothing.",
    )  # fmt: skip

    def validate_messages(self, value: list[Any]) -> list[NewMessage]:
        entries = validate_entries(value, EnqueueSerializer, field="messages", limit=MAX_BATCH)
        return [EnqueueSerializer.new_message(e) for e in entries]


class EnqueuedSerializer(serializers.Serializer):
    id = serializers.UUIDField()


class EnqueuedBatchSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.UUIDField())


# --------------------------------------------------------------------- claim


class ClaimSerializer(StrictSerializer):
    worker_id = StrictCharField(min_length=1, max_length=check.WORKER_ID_MAX, trim_whitespace=False)
    max_messages = StrictIntegerField(
        default=1, help_text=f"≤ 0: nothing is claimed; more than {MAX_CLAIM}: {MAX_CLAIM}."
    )
    visibility_timeout = visibility_timeout(required=False)
    wait_seconds = StrictFloatField(
        min_value=0, max_value=WAIT_SECONDS_MAX, default=0,
        help_text="Long poll: wait up to this long for a claimable message.",
    )  # fmt: skip

    def validate_max_messages(self, value: int) -> int:
        return max(0, min(value, MAX_CLAIM))


class ClaimedMessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    payload = serializers.JSONField()
    priority = serializers.IntegerField()
    attempt = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    claim_token = serializers.UUIDField()
    lease_expires_at = serializers.DateTimeField()
    enqueued_at = serializers.DateTimeField()


class ClaimedSerializer(serializers.Serializer):
    messages = ClaimedMessageSerializer(many=True)

    @staticmethod
    def of(messages: list[ClaimedMessage]) -> dict[str, Any]:
        """What ``ClaimedSerializer({"messages": messages}).data`` renders,
        built directly: the serializer spent more CPU than the claim itself
        (bench/README.md, issue 21; tests/groupqueues/test_api_fast_bodies.py
        pins the two equal)."""
        return {
            "messages": [
                {
                    "id": str(m.id), "payload": m.payload, "priority": m.priority,
                    "attempt": m.attempt, "max_attempts": m.max_attempts,
                    "claim_token": str(m.claim_token),
                    "lease_expires_at": api_datetime(m.lease_expires_at),
                    "enqueued_at": api_datetime(m.enqueued_at),
                }
                for m in messages
            ]
        }  # fmt: skip


# ------------------------------------------------------ actions of the holder


class HeldSerializer(StrictSerializer):
    id = message_id()
    claim_token = message_id()


@extend_schema_field(HeldSerializer(many=True))
class AckEntriesField(serializers.ListField):
    """The entries of a batch ack (validated one by one, for the index)."""


class AckSerializer(StrictSerializer):
    acks = AckEntriesField(
        child=serializers.JSONField(), help_text=f"At most {MAX_ACK_BATCH} (id, claim_token)."
    )

    def validate_acks(self, value: list[Any]) -> list[tuple[Any, Any]]:
        pairs = plain_pairs(value) if len(value) <= MAX_ACK_BATCH else None
        if pairs is not None:
            return pairs
        entries = validate_entries(value, HeldSerializer, field="acks", limit=MAX_ACK_BATCH)
        return [(e["id"], e["claim_token"]) for e in entries]


def plain_pairs(entries: list[Any]) -> list[tuple[uuid.UUID, uuid.UUID]] | None:
    """The (id, claim_token) pairs of ack entries that are each exactly
    ``{"id": …, "claim_token": …}`` with two valid ids, as ``HeldSerializer``
    would validate them, without a serializer per entry (ten of them cost more
    CPU than the ack's statement); None when any entry is not, and the
    serializers then name what is wrong with which."""
    pairs = []
    for entry in entries:
        if type(entry) is not dict or len(entry) != 2:
            return None
        try:
            pairs.append((parse_id(entry["id"]), parse_id(entry["claim_token"])))
        except (KeyError, ValueError):
            return None
    return pairs


class AckResultSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    acked = serializers.BooleanField()
    reason = serializers.CharField(
        allow_null=True,
        help_text="When not acked: lease_lost, or duplicate for a pair named earlier in the batch.",
    )


class AckedSerializer(serializers.Serializer):
    acked = serializers.IntegerField()
    results = AckResultSerializer(many=True)

    @staticmethod
    def of(result: AckBatchResult) -> dict[str, Any]:
        """What ``AckedSerializer(result).data`` renders, built directly (as
        ``ClaimedSerializer.of``)."""
        return {
            "acked": result.acked,
            "results": [
                {"id": str(r.id), "acked": r.acked, "reason": r.reason} for r in result.results
            ],
        }


class NackSerializer(HeldSerializer):
    delay_seconds = seconds(help_text="Omitted or null: the collection's backoff; 0: at once.")
    error = StrictCharField(
        required=False, allow_null=True, allow_blank=True, trim_whitespace=False
    )


class FailSerializer(HeldSerializer):
    error = StrictCharField(
        required=False, allow_null=True, allow_blank=True, trim_whitespace=False
    )


class ExtendSerializer(HeldSerializer):
    visibility_timeout = visibility_timeout(required=True)


class MessageSerializer(serializers.ModelSerializer):
    """A message as ``get`` shows it (dead ones included; never its claim token)."""

    group: serializers.SlugRelatedField[Group] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    collection: serializers.SlugRelatedField[Collection] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )

    class Meta:
        model = Message
        fields = [
            "id", "group", "collection", "payload", "priority", "state", "attempt",
            "max_attempts", "enqueued_at", "deliver_after", "expires_at", "claimed_by",
            "claimed_at", "lease_expires_at", "last_error", "dead_reason", "died_at",
            "enqueued_by", "idempotency_key", "ordering_key", "died_key_head",
        ]  # fmt: skip
        read_only_fields = fields


class OrderingKeySerializer(serializers.Serializer):
    """An ordering key with live messages: its head and how many wait."""

    ordering_key = serializers.CharField()
    blocked = serializers.BooleanField(
        help_text="The head is claimed or waiting for a retry: the key's next messages wait."
    )
    waiting = serializers.IntegerField(help_text="Live messages of the key, the head included.")
    head = MessageSerializer()


# ------------------------------------------------------------------- manage


class DeadFilterSerializer(StrictSerializer):
    """Which dead messages (``groupqueues.dead_filters``): validates to a
    ``DeadFilter``; every field optional, an empty object selects all."""

    reason = serializers.ListField(
        child=serializers.ChoiceField(choices=DeadReason.choices), required=False,
        min_length=1, max_length=len(DeadReason.values),
        help_text="Dead for one of these reasons.",
    )  # fmt: skip
    since = AwareDateTimeField(required=False, help_text="Died at or after this time.")
    until = AwareDateTimeField(required=False, help_text="Died before this time (after since).")
    error_contains = StrictCharField(
        required=False, min_length=1, max_length=ERROR_CONTAINS_MAX, trim_whitespace=False,
        help_text="The last error contains this text (case-insensitive).",
    )  # fmt: skip
    limit = StrictIntegerField(
        required=False, min_value=1, max_value=DEAD_FILTER_LIMIT_MAX,
        help_text="At most this many, most recent death first.",
    )  # fmt: skip

    def validate(self, data: dict[str, Any]) -> DeadFilter:
        try:
            return dead_filter(**data)
        except InvalidQueueInput as exc:
            raise serializers.ValidationError(exc.details) from exc


_ALL_FALSE = {"all": {"allOf": [{"enum": [False]}]}}


class RedriveSerializer(StrictSerializer):
    # Exactly one of: "ids", "all": true, "filter" ("all" absent or false
    # otherwise). (The enums sit in an allOf so that drf-spectacular's enum
    # hook leaves them inline.)
    schema_rules = {
        "oneOf": [
            {"required": ["ids"], "properties": _ALL_FALSE, "not": {"required": ["filter"]}},
            {
                "required": ["all"],
                "properties": {"all": {"allOf": [{"enum": [True]}]}},
                "not": {"anyOf": [{"required": ["ids"]}, {"required": ["filter"]}]},
            },
            {"required": ["filter"], "properties": _ALL_FALSE, "not": {"required": ["ids"]}},
        ]
    }

    ids = serializers.ListField(
        child=message_id(), required=False, max_length=MAX_REDRIVE_IDS,
        help_text="Dead messages to redrive.",
    )  # fmt: skip
    all = StrictBooleanField(default=False, help_text="Redrive every dead message.")
    filter = DeadFilterSerializer(required=False, help_text="Redrive the dead messages it selects.")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if sum(("ids" in data, bool(data["all"]), "filter" in data)) != 1:
            raise serializers.ValidationError(
                {"ids": ['Give "ids", "all": true or "filter" (one of them).']}
            )
        return data


class PurgeSerializer(StrictSerializer):
    schema_rules = {"not": {"required": ["include_dead", "filter"]}}

    include_dead = StrictBooleanField(
        default=False, help_text="Delete the dead messages too (all of them)."
    )
    filter = DeadFilterSerializer(
        required=False,
        help_text="Delete only the dead messages it selects (ready ones are kept).",
    )

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if "filter" in data and "include_dead" in self.initial_data:
            raise serializers.ValidationError(
                {"filter": ['Give "include_dead" or "filter", not both.']}
            )
        return data


class CountSerializer(serializers.Serializer):
    count = serializers.IntegerField()
