"""Admin for tasks, sessions and entries: actions go through services, are
capability-checked and logged."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client

from principals.models import Role
from sessionqueues import services
from sessionqueues.models import QueuedMessage, Session, Task
from tests.factories import UserFactory, member
from tests.sessionqueues.conftest import contents, entry

pytestmark = pytest.mark.django_db


def staff(user: User) -> Client:
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser():
    client = Client()
    client.force_login(UserFactory(username="su", is_superuser=True, is_staff=True))
    return client


@pytest.fixture
def task(tree):
    return services.task_create(app=tree["app_child"], title="Admin task")


@pytest.fixture
def session(task):
    created = services.session_create(task=task)
    services.session_set_auto_merge(session_id=created.pk, enabled=False)
    for text in ["first", "second"]:
        services.entry_insert(session_id=created.pk, entry=entry(text))
    return created


def act(client: Client, model: str, action: str, ids: Iterable[object]) -> None:
    response = client.post(
        f"/admin/sessionqueues/{model}/",
        {"action": action, "_selected_action": [str(i) for i in ids], "index": 0},
        follow=True,
    )
    assert response.status_code == 200


def test_session_page_shows_the_queue_in_order_with_reserved_marked(superuser, session):
    services.reservation_reserve_for_delivery(session_id=session.pk)
    response = superuser.get(f"/admin/sessionqueues/session/{session.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert page.index("first") < page.index("second")
    assert "RESERVED" in page


def test_pause_and_resume_auto_run(superuser, session):
    act(superuser, "session", "pause_auto_run", [session.pk])
    assert Session.objects.get(pk=session.pk).auto_run is False
    act(superuser, "session", "resume_auto_run", [session.pk])
    assert Session.objects.get(pk=session.pk).auto_run is True
    assert LogEntry.objects.filter(change_message__contains="auto-run").count() == 2


def test_delete_entry(superuser, session):
    first = QueuedMessage.objects.get(session=session, content="first")
    act(superuser, "queuedmessage", "delete_entries", [first.pk])
    assert contents(session) == ["second"]
    assert LogEntry.objects.filter(change_message__contains="Deleted entry").exists()


def test_purge_task(superuser, session, task):
    act(superuser, "task", "purge_tasks", [task.pk])
    assert not QueuedMessage.objects.filter(task=task).exists()
    assert Task.objects.get(pk=task.pk).generation == 1


def test_viewer_sees_but_cannot_act(tree, session, task):
    client = staff(member(tree["child"], Role.VIEWER))
    assert client.get("/admin/sessionqueues/session/").status_code == 200
    act(client, "session", "pause_auto_run", [session.pk])
    first = QueuedMessage.objects.get(session=session, content="first")
    act(client, "queuedmessage", "delete_entries", [first.pk])
    assert Session.objects.get(pk=session.pk).auto_run is True
    assert contents(session) == ["first", "second"]
    assert not LogEntry.objects.exists()


def test_editor_cannot_purge(tree, session, task):
    client = staff(member(tree["child"], Role.EDITOR))
    act(client, "task", "purge_tasks", [task.pk])
    assert contents(session) == ["first", "second"]
    act(client, "session", "pause_auto_run", [session.pk])
    assert Session.objects.get(pk=session.pk).auto_run is False


def test_staff_without_a_role_sees_nothing(tree, session):
    client = staff(UserFactory())
    assert client.get("/admin/sessionqueues/session/").status_code == 403
    other = staff(member(tree["sibling"], Role.ADMIN))
    listing = other.get("/admin/sessionqueues/session/")
    assert str(session.pk) not in listing.content.decode()
    act(other, "session", "pause_auto_run", [session.pk])
    assert Session.objects.get(pk=session.pk).auto_run is True
