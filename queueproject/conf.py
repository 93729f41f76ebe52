"""Typed product settings with their defaults, in one place.

Each value is read from ``django.conf.settings`` and falls back to the default
here. ``settings.py`` fills the Django settings from the environment. The values
are read once and kept until a setting changes (``override_settings`` and
pytest-django's ``settings`` fixture send ``setting_changed``): the hot paths
ask on every call, and a dozen lazy-settings lookups cost more than their SQL
statement's parameter binding.
"""

import functools
from dataclasses import dataclass
from typing import Any

from django.conf import settings as dj
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True)
class ProductSettings:
    api_max_body_bytes: int
    json_max_depth: int
    session_max_per_session: int
    session_auto_merge_default: bool
    session_manual_merge_enabled: bool
    worker_poll_interval: float
    listen_notify_enabled: bool
    queue_prepared_statements: bool
    queue_async_commit_claims: bool
    worker_grace_seconds: float
    maintenance_interval: float
    maintenance_lease_ttl: float
    # Seconds between two advances of a collection's claim floor by its
    # claimers (PostgreSQL; groupqueues.services.claim_floor); 0: off.
    claim_floor_interval: float = 0.5
    # Observability (docs/observability.md).
    worker_registry: bool = True
    worker_heartbeat_seconds: float = 5.0
    worker_expire_seconds: float = 60.0
    metrics_allowed_networks: tuple[str, ...] = ("127.0.0.0/8", "::1/128")
    metrics_require_token: bool = True
    health_leader_max_age: float = 60.0
    health_require_leader: bool = True
    metrics_dead_refresh_seconds: float = 60.0
    # The worker's slots and its connection budget (README, "Database connections").
    worker_concurrency: int = 4
    worker_max_connections: int = 32
    # DATABASE_URL names a pooler in transaction mode (docs/production.md).
    transaction_pooler: bool = False


@functools.cache
def product_settings() -> ProductSettings:
    """The current product settings (cached until a setting changes)."""
    return ProductSettings(
        api_max_body_bytes=getattr(dj, "DATA_UPLOAD_MAX_MEMORY_SIZE", 2 * 1024 * 1024),
        json_max_depth=getattr(dj, "API_JSON_MAX_DEPTH", 64),
        session_max_per_session=getattr(dj, "SESSIONQUEUES_MAX_PER_SESSION", 10),
        session_auto_merge_default=getattr(dj, "SESSIONQUEUES_AUTO_MERGE", True),
        session_manual_merge_enabled=getattr(dj, "SESSIONQUEUES_MANUAL_MERGE", True),
        worker_poll_interval=getattr(dj, "QUEUE_WORKER_POLL_INTERVAL", 0.5),
        listen_notify_enabled=getattr(dj, "QUEUE_LISTEN_NOTIFY", True),
        # Server-side prepared statements for the raw SQL run through
        # queueproject.rawsql (PostgreSQL): the group-queue hot paths, the
        # throttle, leases, wake-ups. Turn off behind a pooler that cannot
        # keep them (PgBouncer in transaction mode before 1.21).
        queue_prepared_statements=getattr(dj, "QUEUE_PREPARED_STATEMENTS", True),
        # Commit autocommit group-queue claims without waiting for the WAL
        # flush (PostgreSQL). A claim lost in a server crash returns its
        # message to ready without counting the attempt, and the holder's ack
        # then answers lease_lost: still at-least-once. Off by default.
        queue_async_commit_claims=getattr(dj, "QUEUE_ASYNC_COMMIT_CLAIMS", False),
        worker_grace_seconds=getattr(dj, "QUEUE_WORKER_GRACE_SECONDS", 30.0),
        maintenance_interval=getattr(dj, "QUEUE_MAINTENANCE_INTERVAL", 10.0),
        maintenance_lease_ttl=getattr(dj, "QUEUE_MAINTENANCE_LEASE_TTL", 30.0),
        claim_floor_interval=getattr(dj, "QUEUE_CLAIM_FLOOR_INTERVAL", 0.5),
        worker_registry=getattr(dj, "QUEUE_WORKER_REGISTRY", True),
        worker_heartbeat_seconds=getattr(dj, "QUEUE_WORKER_HEARTBEAT_SECONDS", 5.0),
        worker_expire_seconds=getattr(dj, "QUEUE_WORKER_EXPIRE_SECONDS", 60.0),
        metrics_allowed_networks=tuple(
            getattr(dj, "METRICS_ALLOWED_NETWORKS", ("127.0.0.0/8", "::1/128"))
        ),
        metrics_require_token=getattr(dj, "METRICS_REQUIRE_TOKEN", True),
        health_leader_max_age=getattr(dj, "HEALTH_LEADER_MAX_AGE", 60.0),
        health_require_leader=getattr(dj, "HEALTH_REQUIRE_LEADER", True),
        metrics_dead_refresh_seconds=getattr(dj, "QUEUE_METRICS_DEAD_REFRESH_SECONDS", 60.0),
        # Slot threads of a queue_worker without --concurrency, whatever the
        # number of consumers it serves.
        worker_concurrency=int(getattr(dj, "QUEUE_WORKER_CONCURRENCY", 4)),
        # A queue_worker whose settings need more database connections than
        # this refuses to start (0: no limit).
        worker_max_connections=int(getattr(dj, "QUEUE_WORKER_MAX_CONNECTIONS", 32)),
        # Behind a transaction pooler a session SET would stay on the server
        # connection for its next client: none is made (session limits,
        # plan_cache_mode).
        transaction_pooler=bool(getattr(dj, "DATABASE_TRANSACTION_POOLER", False)),
    )


@receiver(setting_changed, dispatch_uid="product-settings-cache")
def _forget_product_settings(**kwargs: Any) -> None:
    product_settings.cache_clear()
