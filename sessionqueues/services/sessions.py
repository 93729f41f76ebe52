"""Tasks and sessions: create, archive, reincarnate, and the per-session policy
(auto-run, auto-merge override, agent readiness) (SPEC §3)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from principals.models import App
from queueproject import clock
from sessionqueues import positions
from sessionqueues.models import Session, Task
from sessionqueues.services.common import (
    SessionIdentity,
    bump_generation,
    lock_session,
    lock_task,
    wake,
)


@transaction.atomic
def task_create(*, app: App, title: str = "") -> Task:
    """Create a task of ``app``."""
    return Task.objects.create(app=app, title=title)


@transaction.atomic
def task_archive(*, task_id: Any) -> Task:
    """Mark the task archived: lifecycle inserts are refused from now on."""
    task = lock_task(task_id)
    if not task.archived:
        task.archived = True
        task.save(update_fields=["archived"])
    return task


@transaction.atomic
def session_create(*, task: Task) -> Session:
    """Create a session of ``task`` (auto-run on, a fresh incarnation)."""
    return Session.objects.create(task=task)


@transaction.atomic
def session_reincarnate(*, session_id: Any) -> Session:
    """Re-create the session's identity: a new incarnation id, so stale callers
    holding the old identity get SessionIdentityMismatch."""
    session = lock_session(session_id)
    session.incarnation_id = uuid.uuid4()
    session.save(update_fields=["incarnation_id"])
    bump_generation(session)
    return session


@transaction.atomic
def session_set_auto_run(
    *, session_id: Any, enabled: bool, identity: SessionIdentity | None = None
) -> Session:
    """Persist the automatic-drain policy (independent of queue contents)."""
    session = lock_session(session_id, identity)
    session.save(update_fields=session.set_auto_run(enabled, clock.now()))
    if enabled:
        wake(session)
    return session


@transaction.atomic
def session_pause_auto_run_if_pending(
    *, session_id: Any, identity: SessionIdentity | None = None
) -> bool:
    """Set auto-run OFF only when a visible entry exists (reserved ones do not
    count). Returns whether it paused."""
    session = lock_session(session_id, identity)
    if not positions.rows(session).visible().exists():
        return False
    session.save(update_fields=session.set_auto_run(False, clock.now()))
    return True


@transaction.atomic
def session_set_auto_merge(
    *, session_id: Any, enabled: bool | None, identity: SessionIdentity | None = None
) -> Session:
    """Set the auto-merge override (None inherits the global setting) and
    advance its revision."""
    session = lock_session(session_id, identity)
    session.auto_merge = enabled
    session.auto_merge_revision += 1
    session.save(update_fields=["auto_merge", "auto_merge_revision"])
    return session


@transaction.atomic
def session_set_agent_ready(
    *, session_id: Any, ready: bool, identity: SessionIdentity | None = None
) -> Session:
    """Record whether the session's agent can take an entry (the dispatcher
    delivers only to ready agents)."""
    session = lock_session(session_id, identity)
    session.save(update_fields=session.set_agent_ready(ready, clock.now()))
    if ready:
        wake(session)
    return session
