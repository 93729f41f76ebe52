"""create_task / create_session / seed_demo: effects and clear errors."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from principals.models import App
from sessionqueues.models import QueuedMessage, Session, Task
from tests.factories import AppFactory

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
