"""``create_user``: the README's way to make a login (issue 17 point 1)."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


def _run(*args: str) -> list[str]:
    out = StringIO()
    call_command("create_user", *args, stdout=out)
    return out.getvalue().splitlines()


def test_create_user__prints_a_generated_password_alone_on_the_last_line(monkeypatch):
    monkeypatch.delenv("QUEUE_USER_PASSWORD", raising=False)
    lines = _run("alice", "--email", "alice@example.com", "--staff")
    user = get_user_model().objects.get(username="alice")
    assert user.check_password(lines[-1]) and user.is_staff and not user.is_superuser
    assert user.email == "alice@example.com"


def test_create_user__takes_the_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("QUEUE_USER_PASSWORD", "correct-horse-battery")
    lines = _run("bob")
    user = get_user_model().objects.get(username="bob")
    assert user.check_password("correct-horse-battery") and not user.is_staff
    assert "correct-horse-battery" not in "\n".join(lines)


@pytest.mark.parametrize(
    ("setup", "args", "password", "message"),
    [
        (True, ["alice"], "correct-horse-battery", "already exists"),
        (False, ["carol"], "short", "too short"),
        (False, [" "], "correct-horse-battery", "must not be empty"),
    ],
)
def test_create_user__refuses_with_a_clear_message(monkeypatch, setup, args, password, message):
    monkeypatch.setenv("QUEUE_USER_PASSWORD", password)
    if setup:
        _run("alice")
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert get_user_model().objects.count() == (1 if setup else 0)
