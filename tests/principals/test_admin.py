"""Admin for principals: staff see and change only what their role allows."""

import re

import pytest
from django.test import Client

from principals.models import ApiToken, Group, Role
from principals.tokens import hash_secret
from tests.factories import UserFactory, make_token, member

pytestmark = pytest.mark.django_db


def staff_client(user):
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser_client():
    su = UserFactory(username="su", is_superuser=True, is_staff=True)
    client = Client()
    client.force_login(su)
    return client


def test_group_list_shows_full_path(superuser_client, tree):
    response = superuser_client.get("/admin/principals/group/")
    assert response.status_code == 200
    assert b"root/child/grandchild" in response.content


def test_parent_chooser_refuses_a_cycle(superuser_client, tree):
    root = tree["root"]
    response = superuser_client.post(
        f"/admin/principals/group/{root.pk}/change/",
        {
            "slug": "root",
            "name": "Root",
            "parent": str(tree["grandchild"].pk),
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert b"cannot be its own ancestor" in response.content
    root.refresh_from_db()
    assert root.parent is None


def test_token_creation_shows_the_secret_once(superuser_client, tree):
    response = superuser_client.post(
        "/admin/principals/apitoken/add/",
        {
            "name": "deploy",
            "app": str(tree["app_child"].pk),
            "scopes": ["queue:read", "queue:write"],
        },
        follow=True,
    )
    assert response.status_code == 200
    match = re.search(rb"(dq_[A-Za-z0-9_-]{43})", response.content)
    assert match, response.content[:2000]
    token = ApiToken.objects.get(name="deploy")
    assert token.secret_hash == hash_secret(match.group(1).decode())
    again = superuser_client.get(f"/admin/principals/apitoken/{token.pk}/change/")
    assert match.group(1) not in again.content


def test_revoke_action(superuser_client, tree):
    token, _ = make_token(app=tree["app_child"], scopes=["queue:read"])
    response = superuser_client.post(
        "/admin/principals/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [str(token.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    token.refresh_from_db()
    assert token.revoked


def test_group_admin_manages_its_subtree_only(tree):
    client = staff_client(member(tree["child"], Role.ADMIN))
    listing = client.get("/admin/principals/group/")
    assert listing.status_code == 200
    assert b"root/child/grandchild" in listing.content
    assert b"root/sibling" not in listing.content
    assert client.get(f"/admin/principals/group/{tree['sibling'].pk}/change/").status_code in (
        302,
        403,
        404,
    )
    assert client.get(f"/admin/principals/group/{tree['child'].pk}/change/").status_code == 200


def test_viewer_can_look_but_not_change(tree):
    client = staff_client(member(tree["child"], Role.VIEWER))
    page = client.get(f"/admin/principals/group/{tree['child'].pk}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    response = client.post(
        f"/admin/principals/group/{tree['child'].pk}/change/",
        {
            "slug": "renamed",
            "name": "x",
            "parent": str(tree["root"].pk),
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 403
    assert Group.objects.filter(slug="child").exists()


def test_admin_cannot_grant_owner(tree):
    admin_user = member(tree["child"], Role.ADMIN)
    client = staff_client(admin_user)
    target = UserFactory()
    response = client.post(
        f"/admin/principals/group/{tree['child'].pk}/change/",
        {
            "slug": "child",
            "name": "Child",
            "parent": str(tree["root"].pk),
            "memberships-TOTAL_FORMS": "2",
            "memberships-INITIAL_FORMS": "1",
            "memberships-0-id": str(admin_user.memberships.get().pk),
            "memberships-0-group": str(tree["child"].pk),
            "memberships-0-user": str(admin_user.pk),
            "memberships-0-role": str(int(Role.ADMIN)),
            "memberships-1-group": str(tree["child"].pk),
            "memberships-1-user": str(target.pk),
            "memberships-1-role": str(int(Role.OWNER)),
        },
    )
    assert response.status_code == 200
    assert b"Only an owner may grant the owner role" in response.content
    assert not target.memberships.exists()


def test_staff_without_any_role_sees_nothing(tree):
    client = staff_client(UserFactory())
    assert client.get("/admin/principals/group/").status_code == 403
