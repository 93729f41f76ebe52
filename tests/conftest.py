"""Shared fixtures: API clients, principals, and the environment for subprocesses."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import pytest
from django.db import connection
from rest_framework.response import Response
from rest_framework.test import APIClient

from principals.models import ApiToken, App
from tests.factories import AppFactory, GroupFactory, make_token

if TYPE_CHECKING:
    from rest_framework.response import _MonkeyPatchedResponse

    # What APIClient's requests return: a Response with the test client's extras
    # (``json()``); the stubs name it privately and it does not exist at run time.
    ApiResponse: TypeAlias = _MonkeyPatchedResponse
else:
    ApiResponse = Response

_Client = TypeVar("_Client", bound=APIClient)

ROOT = Path(__file__).resolve().parent.parent


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.postgres`` tests run in the PostgreSQL pass only."""
    if item.get_closest_marker("postgres") and not is_postgres():
        pytest.skip("needs PostgreSQL (runs in the PostgreSQL pass of the test command)")
    _drop_a_broken_connection()


def _drop_a_broken_connection() -> None:
    """A test that left this process's connection broken (the server ended
    it) fails alone: the next test starts on a new connection instead of
    erroring on "the connection is closed" in its set-up and teardown, as
    every later test of the pytest worker otherwise would."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        raw = conn.connection
        if raw is not None and getattr(raw, "closed", False):
            conn.in_atomic_block = False
            conn.savepoint_ids = []
            conn.atomic_blocks = []
            conn.needs_rollback = False
            conn.close()


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a ``manage.py`` subprocess that talks to the test database."""
    settings = connection.settings_dict
    env = dict(os.environ)
    if connection.vendor == "postgresql":
        user = settings.get("USER") or "postgres"
        host = settings.get("HOST") or "127.0.0.1"
        port = settings.get("PORT") or 5432
        password = settings.get("PASSWORD") or ""
        auth = f"{user}:{password}@" if password else f"{user}@"
        env["DATABASE_URL"] = f"postgresql://{auth}{host}:{port}/{settings['NAME']}"
    else:
        env["DATABASE_URL"] = f"sqlite:///{settings['NAME']}"
    env["DJANGO_SETTINGS_MODULE"] = "queueproject.settings_test"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def manage_cmd(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def bearer(secret: str) -> APIClient:
    return with_bearer(APIClient(), secret)


def with_bearer(client: _Client, secret: str) -> _Client:
    """``client`` (an APIClient of any class) sending ``secret`` as its bearer token."""
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def tree(db):
    """root -> child -> grandchild, a sibling of child, and an app in each leaf."""
    root = GroupFactory(slug="root")
    child = GroupFactory(slug="child", parent=root)
    grandchild = GroupFactory(slug="grandchild", parent=child)
    sibling = GroupFactory(slug="sibling", parent=root)
    return {
        "root": root,
        "child": child,
        "grandchild": grandchild,
        "sibling": sibling,
        "app_child": AppFactory(slug="app-child", group=child),
        "app_grandchild": AppFactory(slug="app-grandchild", group=grandchild),
        "app_sibling": AppFactory(slug="app-sibling", group=sibling),
    }


@pytest.fixture
def app_token() -> Callable[..., tuple[ApiToken, str]]:
    def _make(app: App, *scopes: str) -> tuple[ApiToken, str]:
        return make_token(app=app, scopes=list(scopes))

    return _make


@pytest.fixture(autouse=True)
def _real_clock():
    """Every test starts and ends on real time."""
    from queueproject import clock

    clock.reset()
    yield
    clock.reset()


@pytest.fixture(autouse=True)
def _stop_listener():
    """Close the LISTEN connection a test may have opened (it would block
    dropping the test database)."""
    yield
    from queueproject import notify

    notify.shutdown()


@pytest.fixture(autouse=True)
def _fresh_throttle_counts():
    """Every test starts with no request counted in this process (the
    throttle keeps counts in memory; the test's database rows roll back)."""
    from principals import throttling

    throttling.reset()
    yield
