import pytest
from rest_framework.test import APIClient

from principals.models import ApiToken, Role
from tests.conftest import bearer
from tests.factories import UserFactory, make_token, member

pytestmark = pytest.mark.django_db


def slugs(response):
    assert response.status_code == 200, response.content
    return [g["slug"] for g in response.json()["results"]]


def test_groups_lists_what_a_user_can_read(tree):
    user = member(tree["child"], Role.VIEWER)
    client = APIClient()
    client.force_login(user)
    assert slugs(client.get("/api/groups/")) == ["child", "grandchild"]
    body = client.get("/api/groups/").json()["results"][0]
    assert body["path"] == "root/child" and body["parent"] == "root"


def test_groups_for_an_app_token_are_its_chain(tree):
    _, secret = make_token(app=tree["app_grandchild"], scopes=["queue:read"])
    assert slugs(bearer(secret).get("/api/groups/")) == ["child", "grandchild", "root"]


def test_groups_for_a_user_without_roles_is_empty(tree):
    _, secret = make_token(user=UserFactory(), scopes=["queue:read"])
    assert slugs(bearer(secret).get("/api/groups/")) == []


def test_bearer_use_records_last_used(tree):
    user = member(tree["root"], Role.VIEWER)
    token, secret = make_token(user=user, scopes=["queue:read"])
    assert token.last_used_at is None
    bearer(secret).get("/api/groups/")
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None


def test_schema_and_docs_are_public(api):
    schema = api.get("/api/schema/")
    assert schema.status_code == 200
    assert b"bearerAuth" in schema.content
    assert b"/api/groups/" in schema.content
    assert api.get("/api/docs/").status_code == 200
