"""The lock API (SPEC §6): status codes, bodies, bad input and who may call it.

The lock belongs to group ``child`` (root ⊃ child ⊃ grandchild, root ⊃ sibling).
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from queueproject.models import Lease
from tests.conftest import bearer
from tests.groupqueues.api_helpers import (
    ADMIN,
    EDITOR,
    VIEWER,
    app_client,
    assert_error,
    user_client,
)

pytestmark = pytest.mark.django_db

TAKE = {"owner": "a", "ttl_seconds": 30}


def url(group, name="report", rest=""):
    return f"/api/groups/{group.slug}/locks/{name}/{rest}"


def put(client, group, body=TAKE, name="report"):
    return client.put(url(group, name), body, format="json")


def test_put__free_lock_is_200_with_owner_expiry_and_token(tree, editor):
    response = put(editor, tree["child"])
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"name", "owner", "expires_at", "fencing_token"}
    assert (body["name"], body["owner"], body["fencing_token"]) == ("report", "a", 1)
    assert editor.get(url(tree["child"])).json() == body


def test_put__same_owner_again_is_200_without_extending(tree, editor):
    first = put(editor, tree["child"]).json()
    again = put(editor, tree["child"], {"owner": "a", "ttl_seconds": 3000})
    assert again.status_code == 200 and again.json() == first


def test_put__another_owner_is_409_lock_held_with_the_holders_expiry(tree, editor):
    held = put(editor, tree["child"]).json()
    error = assert_error(put(editor, tree["child"], {**TAKE, "owner": "b"}), 409, "lock_held")
    assert error["details"]["owner"] == "a"
    assert error["details"]["expires_at"]
    assert Lease.objects.get().expires_at.isoformat() == error["details"]["expires_at"]
    assert editor.get(url(tree["child"])).json() == held


def test_renew__owner_extends_keeping_the_token_others_get_409_lock_lost(tree, editor):
    held = put(editor, tree["child"], {"owner": "a", "ttl_seconds": 5}).json()
    response = editor.post(url(tree["child"], rest="renew/"), TAKE, format="json")
    assert response.status_code == 200, response.content
    renewed = response.json()
    assert renewed["fencing_token"] == held["fencing_token"]
    assert renewed["expires_at"] > held["expires_at"]
    other = editor.post(url(tree["child"], rest="renew/"), {**TAKE, "owner": "b"}, format="json")
    assert_error(other, 409, "lock_lost")
    never = editor.post(url(tree["child"], "never", "renew/"), TAKE, format="json")
    assert_error(never, 409, "lock_lost")


def test_delete__owner_releases_204_others_409_lock_lost(tree, editor):
    put(editor, tree["child"])
    assert_error(editor.delete(url(tree["child"]) + "?owner=b"), 409, "lock_lost")
    response = editor.delete(url(tree["child"]) + "?owner=a")
    assert response.status_code == 204 and response.content == b""
    assert_error(editor.delete(url(tree["child"]) + "?owner=a"), 409, "lock_lost")
    free = editor.get(url(tree["child"])).json()
    assert free == {"name": "report", "owner": None, "expires_at": None, "fencing_token": 1}
    assert put(editor, tree["child"], {**TAKE, "owner": "b"}).json()["fencing_token"] == 2


def test_delete__without_owner_is_400_naming_it(tree, editor):
    put(editor, tree["child"])
    error = assert_error(editor.delete(url(tree["child"])), 400, "invalid")
    assert set(error["details"]) == {"owner"}


def test_get__never_taken_is_200_free_with_token_0(tree, editor):
    response = editor.get(url(tree["child"], "never"))
    assert response.status_code == 200
    assert response.json() == {"name": "never", "owner": None, "expires_at": None,
                               "fencing_token": 0}  # fmt: skip


def test_locks__of_two_groups_never_meet(tree):
    child = user_client(tree["child"], EDITOR)
    sibling = user_client(tree["sibling"], EDITOR)
    assert put(child, tree["child"]).status_code == 200
    assert put(sibling, tree["sibling"], {**TAKE, "owner": "b"}).status_code == 200


@pytest.mark.parametrize(
    "body, field",
    [
        ({"ttl_seconds": 30}, "owner"),
        ({"owner": "", "ttl_seconds": 30}, "owner"),
        ({"owner": "o" * 129, "ttl_seconds": 30}, "owner"),
        ({"owner": 7, "ttl_seconds": 30}, "owner"),
        ({"owner": "a"}, "ttl_seconds"),
        ({"owner": "a", "ttl_seconds": 0}, "ttl_seconds"),
        ({"owner": "a", "ttl_seconds": 86401}, "ttl_seconds"),
        ({"owner": "a", "ttl_seconds": "30"}, "ttl_seconds"),
        ({"owner": "a", "ttl_seconds": True}, "ttl_seconds"),
        ({"owner": "a", "ttl_seconds": 30, "wait": 1}, "wait"),
    ],
)
@pytest.mark.parametrize("rest", ["", "renew/"])
def test_put_and_renew__bad_input_is_400_naming_the_field(tree, editor, body, field, rest):
    client_call = editor.put if rest == "" else editor.post
    response = client_call(url(tree["child"], rest=rest), body, format="json")
    error = assert_error(response, 400, "invalid")
    assert set(error["details"]) == {field}
    assert not Lease.objects.exists()


@pytest.mark.parametrize("name", ["a" * 65, "bad%20name", "bad@name"])
def test_put__bad_lock_name_is_400_naming_it(tree, editor, name):
    error = assert_error(put(editor, tree["child"], name=name), 400, "invalid")
    assert set(error["details"]) == {"name"}


def test_put__body_not_an_object_is_400(tree, editor):
    assert_error(editor.put(url(tree["child"]), [1], format="json"), 400, "invalid")


# ------------------------------------------------------------- authorisation

ANONYMOUS = [lambda t: APIClient(), lambda t: bearer("dq_not-a-real-token")]
OUTSIDERS = [
    lambda t: user_client(t["root"], None),
    lambda t: user_client(t["grandchild"], EDITOR),
    lambda t: user_client(t["sibling"], EDITOR),
    lambda t: app_client(t["app_sibling"], "queue:consume"),
]
READ_ONLY = [
    lambda t: user_client(t["child"], VIEWER),
    lambda t: user_client(t["root"], VIEWER),
    lambda t: user_client(t["child"], EDITOR, ["queue:read"]),
    lambda t: app_client(t["app_grandchild"], "queue:read"),
]
ALLOWED = [
    lambda t: user_client(t["child"], EDITOR),
    lambda t: user_client(t["child"], ADMIN),
    lambda t: user_client(t["root"], EDITOR),
    lambda t: app_client(t["app_child"], "queue:consume"),
    lambda t: app_client(t["app_grandchild"], "queue:consume"),
]


def every_call(client, group):
    """Each endpoint once, in an order where the allowed all succeed."""
    return [
        client.put(url(group), TAKE, format="json"),
        client.get(url(group)),
        client.post(url(group, rest="renew/"), TAKE, format="json"),
        client.delete(url(group) + "?owner=a"),
    ]


def refused(tree, make, status, code):
    holder = user_client(tree["child"], EDITOR)
    put(holder, tree["child"], {"owner": "keeper", "ttl_seconds": 60})
    before = list(Lease.objects.values())
    for response in every_call(make(tree), tree["child"]):
        assert_error(response, status, code)
    assert list(Lease.objects.values()) == before


@pytest.mark.parametrize("make", ANONYMOUS)
def test_authz__anonymous_is_401(tree, make):
    refused(tree, make, 401, "not_authenticated")


@pytest.mark.parametrize("make", OUTSIDERS)
def test_authz__outsider_is_404(tree, make):
    refused(tree, make, 404, "not_found")


@pytest.mark.parametrize("make", READ_ONLY)
def test_authz__viewer_or_read_scope_is_403_reads_included(tree, make):
    refused(tree, make, 403, "permission_denied")


@pytest.mark.parametrize("make", ALLOWED)
def test_authz__editor_and_up_or_consume_app_token_may(tree, make):
    statuses = [r.status_code for r in every_call(make(tree), tree["child"])]
    assert statuses == [200, 200, 200, 204]


def test_unknown_group_is_404(tree, editor):
    assert_error(editor.get("/api/groups/nope/locks/report/"), 404, "not_found")


def test_schema__describes_the_lock_routes(tree, editor):
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    lock = schema["paths"]["/api/groups/{g}/locks/{name}/"]
    assert set(lock) >= {"get", "put", "delete"}
    assert "409" in lock["put"]["responses"] and "409" in lock["delete"]["responses"]
    assert "post" in schema["paths"]["/api/groups/{g}/locks/{name}/renew/"]
    take = schema["components"]["schemas"]["LockTakeRequest"]
    assert set(take["properties"]) == {"owner", "ttl_seconds"}
    assert set(take["required"]) == {"owner", "ttl_seconds"}
