"""create_task / create_session / seed_demo: effects and clear errors."""

import json
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from principals.models import App
from sessionqueues import services
from sessionqueues.models import AuditRecord, QueuedMessage, Session, Task
from tests.factories import AppFactory
from tests.sessionqueues.conftest import entry

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_task_and_session_print_the_id_last():
    AppFactory(slug="shop")
    task_id = run("create_task", "--app", "shop", "--title", "T").strip().splitlines()[-1]
    assert Task.objects.get(pk=task_id).title == "T"
    session_id = run("create_session", "--task", task_id).strip().splitlines()[-1]
    assert Session.objects.get(pk=session_id).task_id == Task.objects.get(pk=task_id).pk


@pytest.mark.parametrize(
    "args",
    [("create_task", "--app", "missing"), ("create_session", "--task", "not-a-uuid")],
)
def test_commands_refuse_bad_arguments(args):
    with pytest.raises(CommandError):
        run(*args)


def test_seed_demo_is_idempotent():
    run("seed_demo")
    run("seed_demo")
    app = App.objects.get(slug="storefront")
    assert Task.objects.filter(app=app).count() == 1
    assert QueuedMessage.objects.filter(task__app=app).count() == 3


# --- session_blocked (issue 20 point 4) -------------------------------------------


@pytest.fixture
def paused_session():
    task = services.task_create(app=AppFactory(slug="ops-app"), title="T")
    session = services.session_create(task=task)
    services.session_set_auto_merge(session_id=session.pk, enabled=False)
    for text in ["first", "second"]:
        services.entry_insert(session_id=session.pk, entry=entry(text))
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    return session


def test_session_blocked__lists_text_and_json(paused_session):
    text = run("session_blocked")
    assert str(paused_session.pk) in text and "auto_run_paused" in text and "ops-app" in text
    (row,) = json.loads(run("session_blocked", "--json", "--app", "ops-app"))
    assert row["session"] == str(paused_session.pk)
    assert row["reasons"][0]["reason"] == "auto_run_paused"
    assert json.loads(run("session_blocked", "--json", "--reason", "agent_not_ready")) == []
    assert "No blocked" in run("session_blocked", "--reason", "reservation_stuck")


def test_session_blocked__actions_are_audited_as_the_command(paused_session):
    pk = str(paused_session.pk)
    skipped = json.loads(run("session_blocked", "--session", pk, "--skip-head", "--json"))
    assert skipped["action"] == "skip_head" and skipped["via"] == "command"
    assert skipped["actor"].startswith("cli:")
    out = run("session_blocked", "--session", pk, "--resume-auto-run", "--note", "ok")
    assert "Resume auto-run" in out
    assert Session.objects.get(pk=pk).auto_run is True
    row, _ = services.reservation_reserve_for_delivery(session_id=pk)
    assert row is not None
    run("session_blocked", "--session", pk, "--release-reservation", str(row.reservation_id))
    assert list(AuditRecord.objects.order_by("id").values_list("action", flat=True)) == [
        "skip_head",
        "resume_auto_run",
        "release_reservation",
    ]
    assert AuditRecord.objects.get(action="resume_auto_run").note == "ok"


@pytest.mark.parametrize(
    "args",
    [
        ("--skip-head",),  # no session
        ("--session", "x", "--resume-auto-run"),  # not a session id
        ("--note", "n"),  # a note without an action
        ("--app", "missing"),
    ],
)
def test_session_blocked__refuses_bad_arguments(paused_session, args):
    with pytest.raises(CommandError):
        run("session_blocked", *args)


def test_session_blocked__a_closed_reservation_is_a_clear_error(paused_session):
    with pytest.raises(CommandError, match="no longer open"):
        run(
            "session_blocked",
            "--session",
            str(paused_session.pk),
            "--release-reservation",
            str(uuid.uuid4()),
        )
