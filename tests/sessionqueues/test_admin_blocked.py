"""The admin's blocked-heads page: what it lists, who may act, and that each
action goes through the audited services and the admin log."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client

from principals.models import Role
from sessionqueues import services
from sessionqueues.models import AuditRecord, AuditVia, Session
from tests.factories import UserFactory, member
from tests.sessionqueues.conftest import contents, entry

pytestmark = pytest.mark.django_db

PAGE = "/admin/sessionqueues/session/blocked/"


def staff(user: User) -> Client:
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def session(tree):
    task = services.task_create(app=tree["app_child"], title="Admin task")
    created = services.session_set_auto_merge(
        session_id=services.session_create(task=task).pk, enabled=False
    )
    for text in ["first", "second"]:
        services.entry_insert(session_id=created.pk, entry=entry(text))
    services.session_set_agent_ready(session_id=created.pk, ready=True)
    services.session_set_auto_run(session_id=created.pk, enabled=False)
    return created


def post(client: Client, session: Session, do: str, **fields: str) -> Any:
    return client.post(PAGE, {"session": str(session.pk), "do": do, **fields}, follow=True)


def test_page_lists_the_blocked_session_with_its_reason(tree, session):
    client = staff(member(tree["child"], Role.VIEWER))
    page = client.get(PAGE)
    assert page.status_code == 200
    text = page.content.decode()
    assert str(session.pk) in text and "auto_run_paused" in text and "first" in text
    assert 'value="resume"' not in text  # a viewer gets no action buttons
    crumbs = text.split('<div class="breadcrumbs">')[1].split("</div>")[0]
    assert "/admin/sessionqueues/session/" in crumbs and "&rsaquo; Blocked heads" in crumbs
    changelist = client.get("/admin/sessionqueues/session/").content.decode()
    assert PAGE in changelist


def test_page_filters_by_reason_and_refuses_bad_filters(tree, session):
    client = staff(member(tree["child"], Role.VIEWER))
    assert str(session.pk) not in client.get(f"{PAGE}?reason=agent_not_ready").content.decode()
    bad = client.get(f"{PAGE}?min_age=-3")
    assert bad.status_code == 200 and str(session.pk) not in bad.content.decode()


def test_editor_resumes_and_skips_audited_and_logged(tree, session):
    editor = member(tree["child"], Role.EDITOR)
    client = staff(editor)
    assert 'value="resume"' in client.get(PAGE).content.decode()
    assert post(client, session, "resume", note="back on").status_code == 200
    assert Session.objects.get(pk=session.pk).auto_run is True
    head = session.messages.get(content="first")
    post(client, session, "skip", head_id=str(head.pk))
    assert contents(session) == ["second", "first"]
    records = list(AuditRecord.objects.order_by("id"))
    assert [(r.action, r.via, r.actor) for r in records] == [
        ("resume_auto_run", AuditVia.ADMIN, f"user:{editor.pk}"),
        ("skip_head", AuditVia.ADMIN, f"user:{editor.pk}"),
    ]
    assert records[0].note == "back on"
    assert LogEntry.objects.filter(object_id=str(session.pk)).count() == 2


def test_release_of_a_stuck_reservation(tree, session):
    client = staff(member(tree["child"], Role.EDITOR))
    services.session_set_auto_run(session_id=session.pk, enabled=True)
    row, _ = services.reservation_reserve_for_delivery(session_id=session.pk)
    assert row is not None
    assert str(row.reservation_id) in client.get(f"{PAGE}?min_age=0").content.decode()
    post(client, session, "release", reservation_id=str(row.reservation_id))
    assert contents(session) == ["first", "second"]
    assert AuditRecord.objects.get().action == "release_reservation"
    # Released already: a clear message, nothing recorded.
    page = post(client, session, "release", reservation_id=str(row.reservation_id))
    assert "no longer open" in page.content.decode()
    assert AuditRecord.objects.count() == 1


def test_a_viewer_cannot_act(tree, session):
    client = staff(member(tree["child"], Role.VIEWER))
    assert post(client, session, "resume").status_code == 403
    assert Session.objects.get(pk=session.pk).auto_run is False
    assert not AuditRecord.objects.exists() and not LogEntry.objects.exists()


def test_sessions_of_groups_the_user_cannot_read_are_not_there(tree, session):
    other = staff(member(tree["sibling"], Role.ADMIN))
    assert str(session.pk) not in other.get(PAGE).content.decode()
    page = post(other, session, "resume")
    assert "No such session" in page.content.decode()
    assert Session.objects.get(pk=session.pk).auto_run is False
    assert staff(UserFactory()).get(PAGE).status_code == 403


def test_audit_records_are_listed_for_readers_of_the_group(tree, session):
    services.session_resume_auto_run(
        session_id=session.pk, actor=services.Actor("cli:ops", AuditVia.COMMAND)
    )
    reader = staff(member(tree["child"], Role.VIEWER))
    listing = reader.get("/admin/sessionqueues/auditrecord/").content.decode()
    assert "cli:ops" in listing
    outsider = staff(member(tree["sibling"], Role.VIEWER))
    assert "cli:ops" not in outsider.get("/admin/sessionqueues/auditrecord/").content.decode()
