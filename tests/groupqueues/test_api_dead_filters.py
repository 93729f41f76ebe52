"""REST redrive and purge take the dead-message filter (``"filter": {…}``):
strict bodies, 400 naming the field, the same matches as the services."""

from datetime import timedelta

import pytest

from groupqueues import services
from queueproject import clock
from tests.groupqueues.api_helpers import ADMIN, EDITOR, assert_error, q_url, user_client
from tests.groupqueues.dead_helpers import a_mix, states

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs")


@pytest.fixture
def admin(tree):
    return user_client(tree["child"], ADMIN)


def post(client, group, rest, body):
    return client.post(q_url(group, rest=rest), body, format="json")


def test_redrive__by_filter(tree, queue, admin, frozen):
    ids = a_mix(queue)
    since = (clock.now() - timedelta(hours=1)).isoformat()
    body = {"filter": {"reason": ["failed", "exhausted"], "since": since, "error_contains": "TIME"}}
    response = post(admin, tree["child"], "redrive/", body)
    assert response.status_code == 200, response.content
    assert response.json() == {"count": 1}
    assert states(queue)[ids["exhausted"]] == "ready"
    response = post(admin, tree["child"], "redrive/", {"filter": {"limit": 2}})
    assert response.json() == {"count": 2}
    assert list(states(queue).values()).count("dead") == 1


def test_redrive__empty_filter_is_every_dead_message(tree, queue, admin, frozen):
    a_mix(queue)
    assert post(admin, tree["child"], "redrive/", {"filter": {}}).json() == {"count": 4}


def test_purge__by_filter_deletes_only_matching_dead(tree, queue, admin, frozen):
    ids = a_mix(queue)
    response = post(admin, tree["child"], "purge/", {"filter": {"reason": ["expired"]}})
    assert response.status_code == 200 and response.json() == {"count": 1}
    left = states(queue)
    assert ids["expired"] not in left and left[ids["ready"]] == "ready" and len(left) == 4


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"filter": {"reason": ["lost"]}}, "filter"),
        ({"filter": {"reason": "failed"}}, "filter"),
        ({"filter": {"since": "2026-01-01T00:00:00"}}, "filter"),
        ({"filter": {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}}, "filter"),
        ({"filter": {"limit": 0}}, "filter"),
        ({"filter": {"limit": "5"}}, "filter"),
        ({"filter": {"error_contains": ""}}, "filter"),
        ({"filter": {"colour": "red"}}, "filter"),
        ({"filter": []}, "filter"),
        ({"filter": {}, "all": True}, "ids"),
        ({"filter": {}, "ids": []}, "ids"),
    ],
)
def test_redrive__bad_filter_is_400_naming_the_field(tree, queue, admin, body, field):
    error = assert_error(post(admin, tree["child"], "redrive/", body), 400, "invalid")
    assert field in error["details"]


def test_redrive__bad_filter_names_the_inner_field(tree, queue, admin):
    body = {"filter": {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}}
    error = assert_error(post(admin, tree["child"], "redrive/", body), 400, "invalid")
    assert "until" in error["details"]["filter"]


@pytest.mark.parametrize(
    "body",
    [
        {"filter": {"reason": ["nope"]}},
        {"filter": {"limit": 10_001}},
        {"filter": {}, "include_dead": False},
        {"filter": None},
    ],
)
def test_purge__bad_filter_is_400(tree, queue, admin, body, frozen):
    a_mix(queue)
    error = assert_error(post(admin, tree["child"], "purge/", body), 400, "invalid")
    assert "filter" in error["details"]
    assert len(states(queue)) == 5


def test_redrive_by_filter__editor_is_403(tree, queue):
    editor = user_client(tree["child"], EDITOR)
    response = post(editor, tree["child"], "redrive/", {"filter": {}})
    assert_error(response, 403, "permission_denied")
