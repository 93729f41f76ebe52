"""Demo session queue for ``seed_demo``: a task of app ``storefront`` with one
session, a few queued entries and a pending workflow move (idempotent)."""

from typing import Any

from principals.models import App
from sessionqueues import services
from sessionqueues.models import PendingMove, Session, Task

# After the principals demo, whose app ``storefront`` owns the task.
DEMO_ORDER = 30

DEMO_TITLE = "Demo: checkout redesign"
DEMO_ENTRIES = [
    ("Summarise the open checkout bugs.", "user:demo"),
    ("Draft a plan for the new payment step.", "user:demo"),
    ("CI failed on main: look at the flaky cart test.", "server"),
]


DEMO_MOVE = {
    "move_id": "demo-move-1",
    "workflow_id": "checkout-redesign",
    "workflow_step_id": "review",
    "actor": "user:demo",
}


def seed(*, admin_user: Any, log: Any) -> None:
    app = App.objects.filter(slug="storefront").first()
    if app is None:
        return
    if Task.objects.filter(app=app, title=DEMO_TITLE).exists():
        _pending_move(log)
        return
    task = services.task_create(app=app, title=DEMO_TITLE)
    session = services.session_create(task=task)
    services.session_set_auto_merge(session_id=session.pk, enabled=False)
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    for content, owner in DEMO_ENTRIES:
        services.entry_insert(
            session_id=session.pk, entry=services.NewEntry(content=content, queued_by=owner)
        )
    log(f"task {task.pk} with session {session.pk} (3 queued entries, auto-run paused)")
    _pending_move(log)


def _pending_move(log: Any) -> None:
    """The demo session's deferred workflow move, unless it has one."""
    session = Session.objects.filter(task__title=DEMO_TITLE, task__app__slug="storefront").first()
    if session is None or PendingMove.objects.filter(session=session).exists():
        return
    services.pending_move_set(session_id=session.pk, move=DEMO_MOVE)
    log(f"a pending move on session {session.pk}")
