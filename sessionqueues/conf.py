"""Typed settings of the session queues' blocked-heads view, with their
defaults (read once, forgotten when a setting changes, like
``queueproject.conf``). Kept beside the app so the shared settings module only
reads them from the environment."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings as dj
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True)
class BlockedSettings:
    # A session whose agent has not been ready for this long, with entries
    # waiting, is listed as blocked (``agent_not_ready``).
    not_ready_seconds: float
    # A reservation held this long is listed as stuck (``reservation_stuck``).
    reservation_deadline_seconds: float


@functools.cache
def blocked_settings() -> BlockedSettings:
    """The current settings (cached until a setting changes)."""
    return BlockedSettings(
        not_ready_seconds=float(getattr(dj, "SESSIONQUEUES_BLOCKED_NOT_READY_SECONDS", 1800.0)),
        reservation_deadline_seconds=float(
            getattr(dj, "SESSIONQUEUES_RESERVATION_DEADLINE_SECONDS", 300.0)
        ),
    )


@receiver(setting_changed)
def _forget_blocked_settings(**kwargs: Any) -> None:
    if str(kwargs.get("setting", "")).startswith("SESSIONQUEUES_"):
        blocked_settings.cache_clear()
