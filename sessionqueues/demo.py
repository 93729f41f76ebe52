"""Demo session queue for ``seed_demo``: a task of app ``storefront`` with one
session and a few queued entries (idempotent)."""

from typing import Any

from principals.models import App
from sessionqueues import services
from sessionqueues.models import Task

# After the principals demo, whose app ``storefront`` owns the task.
DEMO_ORDER = 30

DEMO_TITLE = "Demo: checkout redesign"
DEMO_ENTRIES = [
    ("Summarise the open checkout bugs.", "user:demo"),
    ("Draft a plan for the new payment step.", "user:demo"),
    ("CI failed on main: look at the flaky cart test.", "server"),
]


def seed(*, admin_user: Any, log: Any) -> None:
    app = App.objects.filter(slug="storefront").first()
    if app is None or Task.objects.filter(app=app, title=DEMO_TITLE).exists():
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
