"""The outbox API (issue 15): list by state, one row, stats (queue read);
redrive and purge (queue manage); 404 for what the principal cannot see, 403
for what it can see but not change; bad input → 400 with the field."""

from __future__ import annotations

import uuid

import pytest
from django.db import transaction

from groupqueues import services as queues
from store import outbox
from store.models import OutboxMessage, OutboxState
from tests.groupqueues.api_helpers import (
    ADMIN,
    EDITOR,
    VIEWER,
    app_client,
    assert_error,
    user_client,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows(tree):
    """Three rows of the child group: one pending, one dead, one done."""
    queues.collection_create(group=tree["child"], name="emails")
    with transaction.atomic():
        made = [outbox.publish("queue:child/emails", {"n": i}, key=f"k{i}") for i in range(3)]
    OutboxMessage.objects.filter(id=made[1].id).update(state=OutboxState.DEAD, attempt=10,
                                                       last_error="HTTP 500")  # fmt: skip
    OutboxMessage.objects.filter(id=made[2].id).update(state=OutboxState.DONE, attempt=1)
    return made


def url(group, rest=""):
    return f"/api/groups/{group.slug}/outbox/{rest}"


def test_list_filter_get_and_stats(tree, rows):
    viewer = user_client(tree["child"], VIEWER)
    listed = viewer.get(url(tree["child"]))
    assert listed.status_code == 200 and listed.json()["count"] == 3
    assert [r["payload"] for r in listed.json()["results"]] == [{"n": 0}, {"n": 1}, {"n": 2}]
    dead = viewer.get(url(tree["child"]), {"state": "dead"}).json()["results"]
    assert [r["id"] for r in dead] == [str(rows[1].id)]
    assert dead[0]["last_error"] == "HTTP 500" and dead[0]["target"] == "queue:child/emails"
    one = viewer.get(url(tree["child"], f"{rows[0].id}/")).json()
    assert one["state"] == "pending" and one["key"] == "k0" and one["target_kind"] == "queue"
    stats = viewer.get(url(tree["child"], "stats/")).json()
    assert stats["pending"] == 1 and stats["dead"] == 1 and stats["done"] == 1
    assert stats["in_flight"] == 0 and stats["oldest_pending_age_seconds"] >= 0


def test_redrive_and_purge(tree, rows):
    admin = user_client(tree["root"], ADMIN)
    redriven = admin.post(url(tree["child"], "redrive/"), {"ids": [str(rows[1].id)]},
                          format="json")  # fmt: skip
    assert redriven.status_code == 200 and redriven.json() == {"count": 1}
    assert OutboxMessage.objects.get(id=rows[1].id).state == OutboxState.PENDING
    assert admin.post(url(tree["child"], "redrive/"), {"all": True}, format="json").json() == {
        "count": 0
    }
    purged = admin.post(url(tree["child"], "purge/"), {}, format="json")
    assert purged.status_code == 200 and purged.json() == {"count": 1}
    assert OutboxMessage.objects.count() == 2


def test_who_may_do_what(tree, rows, app_token):
    child = tree["child"]
    for role in (VIEWER, EDITOR):
        client = user_client(child, role)
        assert client.get(url(child)).status_code == 200
        assert_error(client.post(url(child, "redrive/"), {"all": True}, format="json"), 403,
                     "permission_denied")  # fmt: skip
        assert_error(client.post(url(child, "purge/"), {}, format="json"), 403,
                     "permission_denied")  # fmt: skip
    outsider = user_client(tree["sibling"], ADMIN)
    for response in (
        outsider.get(url(child)),
        outsider.get(url(child, f"{rows[0].id}/")),
        outsider.post(url(child, "redrive/"), {"all": True}, format="json"),
    ):
        assert_error(response, 404, "not_found")  # fmt: skip
    assert_error(user_client(child, None).get(url(child)), 404, "not_found")
    reader = app_client(tree["app_grandchild"], "queue:read")  # an app below the group
    assert reader.get(url(child, "stats/")).status_code == 200
    assert_error(reader.post(url(child, "redrive/"), {"all": True}, format="json"), 403,
                 "permission_denied")  # fmt: skip
    assert_error(app_client(tree["app_sibling"], "queue:read").get(url(child)), 404, "not_found")
    assert_error(app_client(tree["app_child"], "queue:write").get(url(child)), 403,
                 "permission_denied")  # fmt: skip
    from rest_framework.test import APIClient

    assert_error(APIClient().get(url(child)), 401, "not_authenticated")


def test_bad_input_is_400_with_the_field_and_unknown_rows_404(tree, rows):
    admin = user_client(tree["child"], ADMIN)
    child = tree["child"]
    assert "state" in assert_error(admin.get(url(child), {"state": "lost"}), 400,
                                   "invalid")["details"]  # fmt: skip
    for body, field in (({}, "ids"), ({"ids": ["nope"]}, "ids"), ({"all": "yes"}, "all"),
                        ({"ids": [str(rows[1].id)], "all": True}, "ids"),
                        ({"all": True, "extra": 1}, "extra")):  # fmt: skip
        error = assert_error(admin.post(url(child, "redrive/"), body, format="json"), 400,
                             "invalid")  # fmt: skip
        assert field in error["details"], (body, error)
    error = assert_error(admin.post(url(child, "purge/"), {"include_dead": 1}, format="json"),
                         400, "invalid")  # fmt: skip
    assert "include_dead" in error["details"]
    assert_error(admin.get(url(child, "not-a-uuid/")), 404, "not_found")
    assert_error(admin.get(url(child, f"{uuid.uuid4()}/")), 404, "not_found")
    other = user_client(tree["sibling"], ADMIN)
    assert_error(other.get(url(tree["sibling"], f"{rows[0].id}/")), 404, "not_found")
