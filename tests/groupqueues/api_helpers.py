"""Helpers of the group-queue API tests: principals, clients and URLs."""

from __future__ import annotations

from principals.models import Role
from tests.conftest import bearer
from tests.factories import UserFactory, make_token, member

ALL_QUEUE_SCOPES = ["queue:read", "queue:write", "queue:consume", "queue:admin"]


def user_client(group, role, scopes=ALL_QUEUE_SCOPES):
    """A bearer client of a new user holding ``role`` on ``group`` (no role: None)."""
    user = member(group, role) if role is not None else UserFactory()
    _, secret = make_token(user=user, scopes=list(scopes))
    client = bearer(secret)
    client.user = user
    return client


def app_client(app, *scopes):
    _, secret = make_token(app=app, scopes=list(scopes))
    return bearer(secret)


def q_url(group, name="jobs", rest=""):
    return f"/api/groups/{group.slug}/queues/{name}/{rest}"


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]


EDITOR, VIEWER, ADMIN = Role.EDITOR, Role.VIEWER, Role.ADMIN
