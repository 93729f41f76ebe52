"""``/healthz`` and ``/readyz``: unauthenticated, cheap probes for a load
balancer or an orchestrator.

- ``/healthz`` answers 200 while the process serves requests; it touches
  nothing else (a liveness probe must not fail because the database did).
- ``/readyz`` answers 200 when the database answers ``SELECT 1``, every
  migration is applied (checked until it first holds, then remembered: a
  running process's code does not change) and a maintenance leader held its
  lease within ``HEALTH_LEADER_MAX_AGE`` seconds (``HEALTH_REQUIRE_LEADER``
  off skips this); otherwise 503. The body names each check's result.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

from queueproject import clock
from queueproject.conf import product_settings
from queueproject.models import Lease

_migrated = False  # set once every migration was seen applied


@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is up."""
    return JsonResponse({"status": "ok"})


@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    """200 when ready to serve (see the module docstring), else 503."""
    checks: dict[str, str] = {}
    try:
        checks["database"] = _database()
        checks["migrations"] = _migrations()
        checks["maintenance_leader"] = _leader()
    except DatabaseError as exc:
        checks["database"] = f"unreachable: {type(exc).__name__}"
        connection.close()  # the next probe reconnects
    ready = all(value == "ok" for value in checks.values()) and len(checks) == 3
    body: dict[str, Any] = {"status": "ready" if ready else "unavailable", "checks": checks}
    return JsonResponse(body, status=200 if ready else 503)


def _database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return "ok"


def _migrations() -> str:
    global _migrated
    if not _migrated:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if plan:
            return f"{len(plan)} unapplied"
        _migrated = True
    return "ok"


def _leader() -> str:
    conf = product_settings()
    if not conf.health_require_leader:
        return "ok"
    since = clock.now() - timedelta(seconds=conf.health_leader_max_age)
    name = settings.HEALTH_LEADER_LEASE
    if Lease.objects.filter(name=name, expires_at__gte=since).exists():
        return "ok"
    return f"no leader of {name} within {conf.health_leader_max_age:g}s"
