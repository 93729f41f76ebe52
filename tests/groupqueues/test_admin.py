"""The group-queue admin with Django's test client: live stats, settings,
pause/resume, purge (confirmed), redrive and cancel, each capability-checked
for the staff user and recorded in the admin log."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import LogEntry
from django.test import Client

from groupqueues import services
from groupqueues.models import Collection, Message
from principals.models import Role
from tests.factories import MembershipFactory, UserFactory, member

pytestmark = pytest.mark.django_db

COLLECTIONS = "/admin/groupqueues/collection/"
MESSAGES = "/admin/groupqueues/message/"


def staff(group, role):
    user = member(group, role, is_staff=True)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def superuser():
    client = Client()
    client.force_login(UserFactory(username="su", is_superuser=True, is_staff=True))
    return client


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs")


def fill(
    queue: Collection,
    ready: int = 2,
    dead: int = 1,
    claimed: int = 0,
    payload: dict[str, Any] | None = None,
) -> dict[str, list[uuid.UUID]]:
    """Messages in each state; returns their ids by state."""
    ids: dict[str, list[uuid.UUID]] = {"ready": [], "dead": [], "claimed": []}
    for i in range(ready + dead + claimed):
        services.message_enqueue(collection=queue, payload=payload or {"i": i}, enqueued_by="t")
    for m in services.message_claim(collection=queue, worker_id="w", n=dead):
        services.message_fail(collection=queue, id=m.id, claim_token=m.claim_token, error="e")
        ids["dead"].append(m.id)
    ids["claimed"] = [
        m.id for m in services.message_claim(collection=queue, worker_id="w", n=claimed)
    ]
    ids["ready"] = list(Message.objects.filter(state="ready").values_list("id", flat=True))
    return ids


def act(client, url, action, pks, **extra):
    data = {"action": action, ACTION_CHECKBOX_NAME: [str(pk) for pk in pks], "index": 0, **extra}
    return client.post(url, data)


def logged(obj, text):
    return LogEntry.objects.filter(object_id=str(obj.pk), change_message__contains=text).exists()


# ---------------------------------------------------------------- collections


def test_collections__changelist_shows_live_stats(superuser, queue):
    fill(queue, ready=3, dead=2, claimed=1)
    response = superuser.get(COLLECTIONS)
    assert response.status_code == 200
    row = next(r for r in response.context["cl"].result_list if r.pk == queue.pk)
    stats = row.live_stats
    assert (stats.depth, stats.depth_pending, stats.in_flight, stats.dead) == (4, 3, 1, 2)
    assert b"oldest pending" in response.content.lower()


def test_collections__changelist_stats_take_a_constant_number_of_queries(
    superuser, tree, django_assert_max_num_queries
):
    for i in range(5):
        fill(services.collection_create(group=tree["child"], name=f"q{i}"), ready=1, dead=1)
    with django_assert_max_num_queries(12):
        assert superuser.get(COLLECTIONS).status_code == 200


def test_collections__staff_see_only_their_groups(tree, queue):
    services.collection_create(group=tree["sibling"], name="elsewhere")
    response = staff(tree["child"], Role.VIEWER).get(COLLECTIONS)
    assert response.status_code == 200
    assert [c.name for c in response.context["cl"].result_list] == ["jobs"]


def test_collections__create_through_the_form(tree):
    client = staff(tree["child"], Role.ADMIN)
    data = {
        "group": str(tree["child"].pk), "name": "mail", "max_payload_bytes": 1000,
        "default_max_attempts": 5, "visibility_timeout": 60, "retry_backoff_base": 1,
        "retry_backoff_max": 60, "dead_retention": 3600, "max_depth": "", "paused": "",
    }  # fmt: skip
    response = client.post(COLLECTIONS + "add/", data)
    assert response.status_code == 302, response.content
    created = Collection.objects.get(name="mail")
    assert created.default_max_attempts == 5 and created.max_depth is None
    assert LogEntry.objects.filter(object_id=str(created.pk)).exists()


def test_collections__create_refuses_out_of_range_settings(tree):
    client = staff(tree["child"], Role.ADMIN)
    data = {
        "group": str(tree["child"].pk), "name": "mail", "max_payload_bytes": 1000,
        "default_max_attempts": 5, "visibility_timeout": 99999, "retry_backoff_base": 1,
        "retry_backoff_max": 60, "dead_retention": 3600,
    }  # fmt: skip
    response = client.post(COLLECTIONS + "add/", data)
    assert response.status_code == 200 and response.context["adminform"].form.errors
    assert not Collection.objects.filter(name="mail").exists()


def test_collections__viewer_may_not_add_or_change(tree, queue):
    client = staff(tree["child"], Role.VIEWER)
    assert client.get(COLLECTIONS + "add/").status_code == 403
    response = client.post(f"{COLLECTIONS}{queue.pk}/change/", {"visibility_timeout": 99})
    assert response.status_code == 403
    queue.refresh_from_db()
    assert queue.visibility_timeout == 30


def test_collections__edit_settings(tree, queue):
    client = staff(tree["child"], Role.ADMIN)
    data = {
        "max_payload_bytes": 2048, "default_max_attempts": 7, "visibility_timeout": 45,
        "retry_backoff_base": 2, "retry_backoff_max": 100, "dead_retention": 60,
        "max_depth": 50, "paused": "on",
    }  # fmt: skip
    response = client.post(f"{COLLECTIONS}{queue.pk}/change/", data)
    assert response.status_code == 302, response.content
    queue.refresh_from_db()
    assert (queue.default_max_attempts, queue.visibility_timeout, queue.max_depth) == (7, 45, 50)
    assert queue.paused and queue.name == "jobs"
    assert LogEntry.objects.filter(object_id=str(queue.pk)).exists()


def test_collections__pause_and_resume(tree, queue):
    client = staff(tree["child"], Role.ADMIN)
    assert act(client, COLLECTIONS, "pause", [queue.pk]).status_code == 302
    queue.refresh_from_db()
    assert queue.paused and logged(queue, "Paused")
    act(client, COLLECTIONS, "resume", [queue.pk])
    queue.refresh_from_db()
    assert not queue.paused and logged(queue, "Resumed")


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_collections__pause_is_refused_without_manage(tree, queue, role):
    client = staff(tree["child"], role)
    act(client, COLLECTIONS, "pause", [queue.pk])
    queue.refresh_from_db()
    assert not queue.paused and not logged(queue, "Paused")


def test_collections__manager_of_another_group_cannot_touch_this_one(tree, queue):
    client = staff(tree["sibling"], Role.ADMIN)
    act(client, COLLECTIONS, "pause", [queue.pk])
    act(client, COLLECTIONS, "purge", [queue.pk], confirm="yes")
    queue.refresh_from_db()
    assert not queue.paused
    assert client.get(f"{COLLECTIONS}{queue.pk}/change/").status_code == 302  # not visible


def test_collections__per_object_check_when_managing_elsewhere(tree, queue):
    user = member(tree["sibling"], Role.ADMIN, is_staff=True)
    MembershipFactory(user=user, group=tree["child"], role=Role.VIEWER)
    client = Client()
    client.force_login(user)
    response = act(client, COLLECTIONS, "pause", [queue.pk])
    assert response.status_code == 302
    queue.refresh_from_db()
    assert not queue.paused


def test_collections__purge_asks_first_then_purges(tree, queue):
    ids = fill(queue, ready=2, dead=1, claimed=1)
    client = staff(tree["child"], Role.ADMIN)
    response = act(client, COLLECTIONS, "purge", [queue.pk])
    assert response.status_code == 200 and b"Yes, purge" in response.content
    assert Message.objects.count() == 4
    data = {"action": "purge", ACTION_CHECKBOX_NAME: [str(queue.pk)], "confirm": "yes"}
    assert client.post(COLLECTIONS, data).status_code == 302
    assert set(Message.objects.values_list("state", flat=True)) == {"dead", "claimed"}
    assert logged(queue, "Purged 2 ready")
    data["include_dead"] = "on"
    client.post(COLLECTIONS, data)
    assert list(Message.objects.values_list("id", flat=True)) == ids["claimed"]


def test_collections__purge_refused_for_an_editor(tree, queue):
    fill(queue, ready=2, dead=0)
    client = staff(tree["child"], Role.EDITOR)
    data = {"action": "purge", ACTION_CHECKBOX_NAME: [str(queue.pk)], "confirm": "yes"}
    client.post(COLLECTIONS, data)
    assert Message.objects.count() == 2


def test_collections__redrive_dead(tree, queue):
    fill(queue, ready=0, dead=2)
    client = staff(tree["child"], Role.ADMIN)
    act(client, COLLECTIONS, "redrive_dead", [queue.pk])
    assert set(Message.objects.values_list("state", "attempt")) == {("ready", 0)}
    assert logged(queue, "Redrove 2")


# ------------------------------------------------------------------ messages


def test_messages__browser_filters(superuser, queue):
    fill(queue, ready=2, dead=1)
    services.message_enqueue(collection=queue, payload=1, priority=5, enqueued_by="t")
    assert superuser.get(MESSAGES).context["cl"].result_count == 4
    dead = superuser.get(MESSAGES + "?state__exact=dead").context["cl"]
    assert [m.state for m in dead.result_list] == ["dead"]
    failed = superuser.get(MESSAGES + "?dead_reason__exact=failed").context["cl"]
    assert failed.result_count == 1
    high = superuser.get(MESSAGES + "?priority_band=high").context["cl"]
    assert [m.priority for m in high.result_list] == [5]
    by_queue = superuser.get(f"{MESSAGES}?collection={queue.pk}").context["cl"]
    assert by_queue.result_count == 4


def test_messages__detail_is_read_only_with_pretty_payload(superuser, queue):
    services.message_enqueue(collection=queue, payload={"b": [1, 2], "a": "x"}, enqueued_by="t")
    message = Message.objects.get()
    response = superuser.get(f"{MESSAGES}{message.pk}/change/")
    assert response.status_code == 200
    assert b"<pre" in response.content and b"&quot;a&quot;: &quot;x&quot;" in response.content
    assert not response.context["adminform"].form.fields  # every field read-only
    assert superuser.get(MESSAGES + "add/").status_code == 403
    response = superuser.post(f"{MESSAGES}{message.pk}/change/", {"priority": 9})
    assert response.status_code == 403
    assert Message.objects.get().priority == 0


def test_messages__staff_see_only_their_groups(tree, queue):
    other = services.collection_create(group=tree["sibling"], name="other")
    fill(queue, ready=1, dead=0)
    fill(other, ready=1, dead=0)
    cl = staff(tree["child"], Role.VIEWER).get(MESSAGES).context["cl"]
    assert {m.collection_id for m in cl.result_list} == {queue.pk}


def test_messages__cancel(tree, queue):
    ids = fill(queue, ready=1, dead=0, claimed=1)
    client = staff(tree["child"], Role.EDITOR)
    pks = list(Message.objects.values_list("pk", flat=True))
    assert act(client, MESSAGES, "cancel", pks).status_code == 302
    assert not Message.objects.exists()
    assert LogEntry.objects.filter(change_message="Cancelled").count() == 2
    assert ids["claimed"]


def test_messages__cancel_refused_for_a_viewer(tree, queue):
    fill(queue, ready=1, dead=0)
    client = staff(tree["child"], Role.VIEWER)
    act(client, MESSAGES, "cancel", list(Message.objects.values_list("pk", flat=True)))
    assert Message.objects.count() == 1


def test_messages__cancel_refused_per_object(tree, queue):
    """Consumer elsewhere, viewer here: the action exists but refuses this message."""
    fill(queue, ready=1, dead=0)
    user = member(tree["sibling"], Role.EDITOR, is_staff=True)
    MembershipFactory(user=user, group=tree["child"], role=Role.VIEWER)
    client = Client()
    client.force_login(user)
    act(client, MESSAGES, "cancel", list(Message.objects.values_list("pk", flat=True)))
    assert Message.objects.count() == 1


def test_messages__redrive_dead(tree, queue):
    ids = fill(queue, ready=1, dead=2)
    client = staff(tree["child"], Role.ADMIN)
    pks = list(Message.objects.values_list("pk", flat=True))
    act(client, MESSAGES, "redrive", pks)
    assert set(Message.objects.values_list("state", flat=True)) == {"ready"}
    for message in Message.objects.filter(id__in=ids["dead"]):
        assert message.attempt == 0 and logged(message, "Redriven")


def test_messages__redrive_refused_for_an_editor(tree, queue):
    fill(queue, ready=0, dead=1)
    client = staff(tree["child"], Role.EDITOR)
    act(client, MESSAGES, "redrive", list(Message.objects.values_list("pk", flat=True)))
    assert Message.objects.get().state == "dead"


def test_collections__group_filter_lists_only_readable_groups(tree, queue):
    services.collection_create(group=tree["sibling"], name="elsewhere")
    client = staff(tree["child"], Role.VIEWER)
    response = client.get(f"{COLLECTIONS}?group={tree['child'].pk}")
    assert [c.name for c in response.context["cl"].result_list] == ["jobs"]
    assert b"sibling" not in response.content


@pytest.mark.parametrize("term", ["not-a-uuid", "w", "\x00", "a\x00b"])
def test_messages__search_with_any_term(superuser, queue, term):
    ids = fill(queue, ready=1, dead=0)
    assert superuser.get(MESSAGES, {"q": term}).status_code == 200
    found = superuser.get(MESSAGES, {"q": str(ids["ready"][0])}).context["cl"]
    assert found.result_count == 1
