"""Fixtures for session queue tests: a task with two sessions and helpers to queue."""

from __future__ import annotations

from typing import Any

import pytest

from sessionqueues import services
from sessionqueues.models import QueuedMessage, Session, Task
from sessionqueues.services import NewEntry
from tests.factories import AppFactory


def entry(content: str = "hello", queued_by: str = "user:1", **kwargs: Any) -> NewEntry:
    return NewEntry(content=content, queued_by=queued_by, **kwargs)


def put(
    session: Session, content: str = "hello", queued_by: str = "user:1", **kwargs: Any
) -> QueuedMessage:
    """Insert one entry (auto-merge off unless the session says otherwise)."""
    return services.entry_insert(
        session_id=session.pk, entry=entry(content, queued_by, **kwargs)
    ).entry


def contents(session: Session) -> list[str]:
    from sessionqueues.selectors import visible_entries

    return [row.content for row in visible_entries(session)]


@pytest.fixture
def task(db: None) -> Task:
    return services.task_create(app=AppFactory(slug="sq-app"), title="Work")


@pytest.fixture
def session(task: Task) -> Session:
    """A session with auto-merge explicitly off, so entries stay separate."""
    created = services.session_create(task=task)
    return services.session_set_auto_merge(session_id=created.pk, enabled=False)


@pytest.fixture
def other_session(task: Task) -> Session:
    created = services.session_create(task=task)
    return services.session_set_auto_merge(session_id=created.pk, enabled=False)
