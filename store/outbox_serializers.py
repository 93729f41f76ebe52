"""Outbox API shapes (issue 15). Rows are written by ``outbox.publish`` in
the caller's own transaction, never over REST; the API lists and inspects
them and redrives or purges (the queue API's redrive and purge bodies)."""

from __future__ import annotations

from rest_framework import serializers

from store.models import OutboxState, OutboxTargetKind


class OutboxMessageSerializer(serializers.Serializer):
    """An outbox row. ``state``: pending (waiting for its next attempt at
    ``deliver_after``), claimed (a relay holds it until ``lease_expires_at``),
    done, or dead (out of attempts; redrive brings it back)."""

    id = serializers.UUIDField()
    target_kind = serializers.ChoiceField(choices=OutboxTargetKind.choices)
    target_name = serializers.CharField(help_text="Queue, topic or channel name; app slug.")
    target = serializers.SerializerMethodField(help_text="The target in its text form.")
    payload = serializers.JSONField(allow_null=True)
    key = serializers.CharField(allow_null=True, help_text="The publisher's de-duplication key.")
    state = serializers.ChoiceField(choices=OutboxState.choices)
    attempt = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    deliver_after = serializers.DateTimeField()
    claimed_by = serializers.CharField(allow_blank=True)
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    done_at = serializers.DateTimeField(allow_null=True)
    dead_at = serializers.DateTimeField(allow_null=True)

    def get_target(self, obj: object) -> str:
        from store.outbox_targets import target_of

        return str(target_of(obj))  # type: ignore[arg-type]


class OutboxStatsSerializer(serializers.Serializer):
    pending = serializers.IntegerField()
    in_flight = serializers.IntegerField(help_text="Claimed by a relay.")
    done = serializers.IntegerField()
    dead = serializers.IntegerField()
    oldest_pending_age_seconds = serializers.FloatField(allow_null=True)
