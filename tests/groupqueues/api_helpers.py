"""Helpers of the group-queue API tests: principals, clients and URLs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.models import User
from rest_framework.test import APIClient

from principals.models import App, Group, Role
from tests.conftest import ApiResponse, bearer, with_bearer
from tests.factories import UserFactory, make_token, member

ALL_QUEUE_SCOPES = ["queue:read", "queue:write", "queue:consume", "queue:admin"]


class UserClient(APIClient):
    """A bearer client that also says which user it acts for."""

    user: User


def user_client(
    group: Group, role: Role | None, scopes: Iterable[str] = ALL_QUEUE_SCOPES
) -> UserClient:
    """A bearer client of a new user holding ``role`` on ``group`` (no role: None)."""
    user = member(group, role) if role is not None else UserFactory()
    _, secret = make_token(user=user, scopes=list(scopes))
    client = with_bearer(UserClient(), secret)
    client.user = user
    return client


def app_client(app: App, *scopes: str) -> APIClient:
    _, secret = make_token(app=app, scopes=list(scopes))
    return bearer(secret)


def q_url(group: Group, name: str = "jobs", rest: str = "") -> str:
    return f"/api/groups/{group.slug}/queues/{name}/{rest}"


def assert_error(response: ApiResponse, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]


EDITOR, VIEWER, ADMIN = Role.EDITOR, Role.VIEWER, Role.ADMIN
