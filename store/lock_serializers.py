"""Request and response shapes of the lock API (SPEC §6). Requests check types
and ranges only (the services decide the rest); a field the endpoint does not
know is a 400 naming it (SPEC §8)."""

from __future__ import annotations

from rest_framework import serializers

from queueproject.serializers import StrictCharField, StrictFloatField, StrictSerializer
from store.locks import OWNER_MAX, TTL_MAX, TTL_MIN


def owner_field() -> StrictCharField:
    return StrictCharField(
        min_length=1, max_length=OWNER_MAX, trim_whitespace=False,
        help_text="Who holds the lock: any string naming the holder (1-128 characters).",
    )  # fmt: skip


class LockOwnerSerializer(StrictSerializer):
    owner = owner_field()


class LockTakeSerializer(StrictSerializer):
    """PUT (acquire) and POST renew/."""

    owner = owner_field()
    ttl_seconds = StrictFloatField(
        min_value=TTL_MIN, max_value=TTL_MAX, help_text="Held for this long unless renewed."
    )


class LockSerializer(serializers.Serializer):
    """A lock: ``owner`` and ``expires_at`` are null while it is free (never
    taken, released or expired); ``fencing_token`` is the last one handed out
    (0 when never taken) and grows with every new acquisition."""

    name = serializers.CharField()
    owner = serializers.CharField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    fencing_token = serializers.IntegerField()
