"""The principal commands: effects, and a clear error with non-zero exit on bad input."""

import subprocess

import pytest
from django.core.management import CommandError, call_command

from principals.models import ApiToken, App, Group, Membership, Role
from principals.tokens import hash_secret
from tests.conftest import manage_cmd, subprocess_env
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def run(*args):
    from io import StringIO

    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_group_app_and_grant():
    run("create_group", "acme", "--name", "Acme")
    run("create_group", "acme-web", "--parent", "acme")
    run("create_app", "shop", "--group", "acme-web")
    UserFactory(username="ann")
    run("grant_role", "ann", "acme", "editor")
    parent = Group.objects.get(slug="acme-web").parent
    assert parent is not None
    assert parent.slug == "acme"
    assert App.objects.get(slug="shop").group.slug == "acme-web"
    assert Membership.objects.get(user__username="ann").role == Role.EDITOR


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create_group", "x", "--parent", "missing"), "No group"),
        (("create_app", "a", "--group", "missing"), "No group"),
        (("grant_role", "nobody", "g", "viewer"), "No user"),
        (("grant_role", "ann", "g", "emperor"), "unknown role"),
        (("create_token", "--user", "ann", "--scopes", "queue:fly"), "Unknown scope"),
        (("create_token", "--app", "missing", "--scopes", "queue:read"), "No app"),
        (("revoke_token", "nothing-like-this"), "No live token"),
        (("create_group", "g"), "already exists"),
        (("create_group", "Not A Slug"), "Invalid slug"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    Group.objects.create(slug="g", name="g")
    UserFactory(username="ann")
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_create_token_prints_the_secret_alone_on_the_last_line():
    UserFactory(username="ann")
    out = run(
        "create_token",
        "--user",
        "ann",
        "--scopes",
        "queue:read,queue:write",
        "--expires-in",
        "3600",
    )
    secret = out.strip().splitlines()[-1]
    token = ApiToken.objects.get()
    assert token.secret_hash == hash_secret(secret)
    assert token.expires_at is not None
    assert token.scopes == ["queue:read", "queue:write"]


def test_revoke_token():
    UserFactory(username="ann")
    run("create_token", "--user", "ann", "--scopes", "queue:read", "--name", "ci")
    run("revoke_token", "ci")
    assert ApiToken.objects.get().revoked


def test_seed_demo_is_idempotent():
    run("seed_demo")
    counts = (Group.objects.count(), App.objects.count())
    run("seed_demo")
    assert (Group.objects.count(), App.objects.count()) == counts
    assert counts[0] >= 2 and counts[1] >= 1


@pytest.mark.django_db(transaction=True)
def test_command_exits_non_zero_with_a_clear_message():
    result = subprocess.run(
        manage_cmd("create_group", "x", "--parent", "missing"),
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "No group 'missing'" in result.stderr
