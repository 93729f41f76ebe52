"""The schedule API (SPEC §6): CRUD, pause/resume/run-now, bad input per
field, and who may do what (read = queue read, write = queue manage)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from groupqueues import services as queues
from groupqueues.models import Message
from store.models import Schedule
from tests.groupqueues.api_helpers import ADMIN, VIEWER, assert_error, user_client

pytestmark = pytest.mark.django_db

BODY = {"name": "nightly", "collection": "jobs", "schedule": "0 3 * * *",
        "timezone": "Europe/Berlin", "payload": {"report": True}}  # fmt: skip


@pytest.fixture
def jobs(tree):
    return queues.collection_create(group=tree["root"], name="jobs")


@pytest.fixture
def admin(tree, jobs):
    return user_client(tree["child"], ADMIN)


def url(group, name=None, rest=""):
    base = f"/api/groups/{group.slug}/schedules/"
    return base if name is None else f"{base}{name}/{rest}"


def test_crud_and_actions(tree, admin):
    child = tree["child"]
    created = admin.post(url(child), BODY, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["schedule"] == "0 3 * * *" and body["group"] == "child"
    assert body["catch_up"] == 1 and body["paused"] is False and not body["declared_in_code"]
    assert len(body["upcoming"]) == 5 and body["next_at"]
    assert admin.get(url(child)).json()["results"][0]["name"] == "nightly"
    assert admin.get(url(child, "nightly")).json()["timezone"] == "Europe/Berlin"
    patched = admin.patch(url(child, "nightly"), {"schedule": "@every 5m"}, format="json")
    assert patched.status_code == 200 and patched.json()["schedule"] == "@every 5m"
    assert admin.post(url(child, "nightly", "pause/")).json()["paused"] is True
    assert admin.post(url(child, "nightly", "resume/")).json()["paused"] is False
    ran = admin.post(url(child, "nightly", "run-now/"))
    assert ran.status_code == 201
    assert str(Message.objects.get().id) == ran.json()["id"]
    assert admin.get(url(child, "nightly")).json()["last_fired_at"] is None
    assert admin.delete(url(child, "nightly")).status_code == 204
    assert not Schedule.objects.exists()


def test_duplicate_name_is_409_and_missing_is_404(tree, admin):
    assert admin.post(url(tree["child"]), BODY, format="json").status_code == 201
    assert_error(admin.post(url(tree["child"]), BODY, format="json"), 409, "already_exists")
    assert_error(admin.get(url(tree["child"], "nope")), 404, "schedule_not_found")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "bad name"}, "name"), ({"name": 7}, "name"),
        ({"collection": "absent"}, "collection"), ({"collection": "a/b"}, "collection"),
        ({"schedule": "61 * * * *"}, "schedule"), ({"schedule": "@every 0s"}, "schedule"),
        ({"schedule": "1 2 3"}, "schedule"), ({"schedule": 5}, "schedule"),
        ({"timezone": "Mars/Olympus"}, "timezone"), ({"timezone": 1}, "timezone"),
        ({"priority": 5000}, "priority"), ({"priority": "1"}, "priority"),
        ({"max_attempts": 0}, "max_attempts"), ({"expires_in_seconds": -1}, "expires_in_seconds"),
        ({"catch_up": 0}, "catch_up"), ({"catch_up": 1001}, "catch_up"),
        ({"paused": "yes"}, "paused"), ({"colour": "red"}, "colour"),
    ],
)  # fmt: skip
def test_bad_input_is_400_invalid_with_the_field(tree, admin, change, field):
    error = assert_error(admin.post(url(tree["child"]), {**BODY, **change}, format="json"),
                         400, "invalid")  # fmt: skip
    assert field in error["details"], error
    assert not Schedule.objects.exists()


def test_bad_patch_is_400_and_changes_nothing(tree, admin):
    admin.post(url(tree["child"]), BODY, format="json")
    for change, field in [({"schedule": "nope"}, "schedule"), ({"extra": 1}, "extra"),
                          ({"timezone": "Nowhere/X"}, "timezone")]:  # fmt: skip
        error = assert_error(admin.patch(url(tree["child"], "nightly"), change, format="json"),
                             400, "invalid")  # fmt: skip
        assert field in error["details"]
    assert Schedule.objects.get().expression == "0 3 * * *"


def test_missing_required_fields_are_400(tree, admin):
    error = assert_error(admin.post(url(tree["child"]), {}, format="json"), 400, "invalid")
    assert {"name", "collection", "schedule"} <= set(error["details"])


WRITES = [("post", ""), ("patch", ""), ("delete", ""), ("post", "pause/"), ("post", "resume/"),
          ("post", "run-now/")]  # fmt: skip


def _call(client, method, rest, tree):
    path = url(tree["child"]) if method == "post" and rest == "" else url(tree["child"], "s", rest)
    data = {**BODY, "name": "s2"} if (method, rest) == ("post", "") else {}
    return getattr(client, method)(path, data, format="json")


@pytest.fixture
def existing(tree, jobs):
    from store import schedules

    return schedules.schedule_create(group=tree["child"], name="s", collection="jobs",
                                     expression="@daily")  # fmt: skip


@pytest.mark.parametrize(("method", "rest"), [("get", "list"), ("get", "one"), *WRITES])
def test_authz__anonymous_401_outsider_404(tree, existing, method, rest):
    outsider = user_client(tree["sibling"], ADMIN)
    for client, status, code in [(APIClient(), 401, "not_authenticated"),
                                 (outsider, 404, "not_found")]:  # fmt: skip
        if method == "get":
            path = url(tree["child"]) if rest == "list" else url(tree["child"], "s")
            response = client.get(path)
        else:
            response = _call(client, method, rest, tree)
        assert_error(response, status, code)
    assert Schedule.objects.count() == 1 and not Message.objects.exists()


@pytest.mark.parametrize(("method", "rest"), WRITES)
def test_authz__viewer_reads_and_gets_403_on_writes(tree, existing, method, rest):
    viewer = user_client(tree["child"], VIEWER)
    assert viewer.get(url(tree["child"])).status_code == 200
    assert viewer.get(url(tree["child"], "s")).status_code == 200
    assert_error(_call(viewer, method, rest, tree), 403, "permission_denied")
    assert Schedule.objects.get().paused is False and not Message.objects.exists()


def test_authz__an_ancestors_admin_manages(tree, existing):
    root_admin = user_client(tree["root"], ADMIN)
    assert root_admin.post(url(tree["child"], "s", "pause/")).status_code == 200
