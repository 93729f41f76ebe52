"""Schedule API bodies (SPEC §6). Types are checked here (strict JSON types,
unknown fields refused); the rules (expression, time zone, ranges, the
collection) are the services' and answer the same 400 ``invalid`` with the
field."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from groupqueues import validation as check
from principals.models import Group
from queueproject.serializers import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSerializer,
)
from store.models import CATCH_UP_MAX, Schedule


class ScheduleChangeSerializer(StrictSerializer):
    """PATCH: any subset of the settable fields."""

    collection = StrictCharField(
        max_length=64,
        help_text="A queue name, resolved from the group: its own, else the nearest ancestor's.",
    )
    schedule = StrictCharField(
        max_length=200, source="expression",
        help_text="Cron (5 fields, or 6 with leading seconds; @hourly @daily @weekly @monthly "
        "@yearly) or '@every <duration>' (30s, 5m, 1h30m).",
    )  # fmt: skip
    timezone = StrictCharField(max_length=64, help_text="IANA zone of the cron fields (UTC).")
    payload = serializers.JSONField(allow_null=True, help_text="Each fired message's payload.")
    priority = StrictIntegerField(min_value=check.PRIORITY_MIN, max_value=check.PRIORITY_MAX)
    max_attempts = StrictIntegerField(min_value=1, max_value=check.MAX_ATTEMPTS_MAX,
                                      allow_null=True)  # fmt: skip
    expires_in_seconds = StrictFloatField(min_value=0, max_value=check.DURATION_MAX,
                                          allow_null=True)  # fmt: skip
    catch_up = StrictIntegerField(
        min_value=1, max_value=CATCH_UP_MAX,
        help_text="How many missed boundaries (the latest) fire after downtime.",
    )  # fmt: skip
    paused = StrictBooleanField()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False


class ScheduleCreateSerializer(ScheduleChangeSerializer):
    name = StrictCharField(min_length=1, max_length=64)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("name", "collection", "schedule"):
            self.fields[name].required = True


class ScheduleSerializer(serializers.ModelSerializer):
    group: serializers.SlugRelatedField[Group] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    schedule = serializers.CharField(source="expression")
    upcoming = serializers.SerializerMethodField(help_text="The next 5 boundaries.")

    class Meta:
        model = Schedule
        fields = ["name", "group", "collection", "schedule", "timezone", "payload", "priority",
                  "max_attempts", "expires_in_seconds", "catch_up", "paused", "declared_in_code",
                  "last_fired_at", "next_at", "upcoming", "last_error", "created_at",
                  "updated_at"]  # fmt: skip
        read_only_fields = fields

    def get_upcoming(self, schedule: Schedule) -> list[str]:
        from store.schedules import schedule_upcoming

        if schedule.paused:
            return []
        return [b.isoformat() for b in schedule_upcoming(schedule=schedule)]


class RunNowSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The message enqueued.")
