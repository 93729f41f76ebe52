"""``X-Session-Incarnation`` is ``format: uuid`` in the schema: a header that is
present but empty, or a UUID in a non-canonical spelling, is refused (400), not
taken as "no identity given"."""

from __future__ import annotations

import pytest

from principals.models import Role
from sessionqueues import services
from tests.conftest import bearer
from tests.factories import make_token, member

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(tree):
    _, secret = make_token(user=member(tree["child"], Role.EDITOR), scopes=["session:write"])
    return bearer(secret)


@pytest.fixture
def session(tree):
    return services.session_create(task=services.task_create(app=tree["app_child"], title="t"))


@pytest.mark.parametrize("header", ["", "{%s}", "urn:uuid:%s", "bare"])
def test_a_malformed_incarnation_header_is_400(client, session, header):
    incarnation = session.incarnation_id
    value = incarnation.hex if header == "bare" else header.replace("%s", str(incarnation))
    response = client.put(
        f"/api/sessions/{session.pk}/queue/auto-run/",
        {"enabled": False},
        format="json",
        HTTP_X_SESSION_INCARNATION=value,
    )
    assert response.status_code == 400
    assert "X-Session-Incarnation" in response.json()["error"]["details"]


def test_the_canonical_incarnation_is_accepted(client, session):
    response = client.put(
        f"/api/sessions/{session.pk}/queue/auto-run/",
        {"enabled": False},
        format="json",
        HTTP_X_SESSION_INCARNATION=str(session.incarnation_id).upper(),
    )
    assert response.status_code == 200
