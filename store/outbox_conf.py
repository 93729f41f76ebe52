"""Typed outbox settings with their defaults (read once, forgotten when a
setting changes, like ``queueproject.conf``). Kept beside the outbox so the
shared settings module stays untouched."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings as dj
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True)
class OutboxSettings:
    max_attempts: int  # attempts before a row is dead (publish may override)
    backoff_base: float  # seconds before the first retry; doubles per attempt
    backoff_max: float  # cap of the retry delay
    lease_seconds: float  # how long a relay holds a claimed row
    batch: int  # rows per relay claim
    poll_interval: float  # relay sleep when nothing is due
    done_retention: float  # delivered rows are pruned after this many seconds
    max_payload_bytes: int  # UTF-8 JSON size limit of a payload
    relay_in_worker: bool  # queue_worker runs a relay thread


@functools.cache
def outbox_settings() -> OutboxSettings:
    """The current outbox settings (cached until a setting changes)."""
    return OutboxSettings(
        max_attempts=int(getattr(dj, "OUTBOX_MAX_ATTEMPTS", 10)),
        backoff_base=float(getattr(dj, "OUTBOX_BACKOFF_BASE", 1.0)),
        backoff_max=float(getattr(dj, "OUTBOX_BACKOFF_MAX", 300.0)),
        lease_seconds=float(getattr(dj, "OUTBOX_LEASE_SECONDS", 60.0)),
        batch=int(getattr(dj, "OUTBOX_BATCH", 100)),
        poll_interval=float(getattr(dj, "OUTBOX_POLL_INTERVAL", 0.5)),
        done_retention=float(getattr(dj, "OUTBOX_DONE_RETENTION", 86400.0)),
        max_payload_bytes=int(getattr(dj, "OUTBOX_MAX_PAYLOAD_BYTES", 256 * 1024)),
        relay_in_worker=bool(getattr(dj, "OUTBOX_RELAY_IN_WORKER", True)),
    )


@receiver(setting_changed)
def _forget_outbox_settings(**kwargs: Any) -> None:
    if str(kwargs.get("setting", "")).startswith("OUTBOX_"):
        outbox_settings.cache_clear()
