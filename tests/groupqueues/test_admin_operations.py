"""The admin that finishes the job: the dead-message page with the filter and
redrive / purge of the matches, the message page's operations (redrive, retry
now, priority), the retry-now and priority actions, excerpts and error search
in the list, consumers, readable scopes, the index overview and ``/``."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import LogEntry
from django.test import Client

from groupqueues import services, trigger_services
from groupqueues.models import Message
from principals.models import Role
from queueproject import leases
from tests.factories import AppFactory, UserFactory, make_token, member
from tests.groupqueues.conftest import claim_one, enqueue
from tests.groupqueues.dead_helpers import a_mix, states

pytestmark = pytest.mark.django_db

COLLECTIONS = "/admin/groupqueues/collection/"
MESSAGES = "/admin/groupqueues/message/"


def staff(group, role):
    client = Client()
    client.force_login(member(group, role, is_staff=True))
    return client


@pytest.fixture
def superuser():
    client = Client()
    client.force_login(UserFactory(username="su", is_superuser=True, is_staff=True))
    return client


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs")


def dead_page(queue):
    return f"{COLLECTIONS}{queue.pk}/dead/"


# ---------------------------------------------------------- the dead page


def test_dead_page__lists_matches_with_excerpts(superuser, queue, frozen):
    ids = a_mix(queue)
    response = superuser.get(dead_page(queue), {"reason": ["failed"], "error_contains": "smtp"})
    assert response.status_code == 200
    assert response.context["total"] == 1
    assert [m.id for m, _, _ in response.context["shown"]] == [ids["failed_old"]]
    assert b"SMTP timeout" in response.content and b"Redrive these 1" in response.content
    crumbs = response.content.decode().split('<div class="breadcrumbs">')[1].split("</div>")[0]
    assert "/change/" in crumbs and str(queue) in crumbs and "&rsaquo; Dead messages" in crumbs


def test_dead_page__redrive_matching(superuser, queue, frozen):
    ids = a_mix(queue)
    response = superuser.post(dead_page(queue), {"since": "1h", "do": "redrive"})
    assert response.status_code == 302
    now = states(queue)
    assert now[ids["failed_old"]] == "dead"
    assert [now[ids[k]] for k in ("failed_new", "expired", "exhausted")] == ["ready"] * 3
    assert LogEntry.objects.filter(change_message__contains="Redrove 3 dead").exists()


def test_dead_page__purge_matching_with_limit(superuser, queue, frozen):
    ids = a_mix(queue)
    superuser.post(dead_page(queue), {"limit": "2", "do": "purge"})
    assert set(states(queue)) == {ids["failed_old"], ids["expired"], ids["ready"]}


def test_dead_page__bad_filter_shows_the_field_and_changes_nothing(superuser, queue, frozen):
    a_mix(queue)
    response = superuser.get(dead_page(queue), {"since": "soon"})
    assert response.status_code == 200 and "since" in response.context["form"].errors
    response = superuser.post(dead_page(queue), {"since": "1h", "until": "2h", "do": "purge"})
    assert response.status_code == 200 and "until" in response.context["form"].errors
    assert len(states(queue)) == 5


def test_dead_page__viewer_reads_but_may_not_redrive(tree, queue, frozen):
    a_mix(queue)
    viewer = staff(tree["child"], Role.VIEWER)
    response = viewer.get(dead_page(queue))
    assert response.status_code == 200 and not response.context["may_manage"]
    assert b"Redrive these" not in response.content
    assert viewer.post(dead_page(queue), {"do": "redrive"}).status_code == 403
    assert list(states(queue).values()).count("dead") == 4


def test_dead_page__other_groups_queue_is_404(tree, queue):
    theirs = services.collection_create(group=tree["sibling"], name="theirs")
    assert staff(tree["child"], Role.ADMIN).get(dead_page(theirs)).status_code == 404


def test_collections__dead_count_links_to_the_dead_page(superuser, queue, frozen):
    a_mix(queue)
    assert dead_page(queue).encode() in superuser.get(COLLECTIONS).content


# ------------------------------------------------------- the message page


def operate(client, message_id, **data):
    pk = Message.objects.get(id=message_id).pk
    return client.post(f"{MESSAGES}{pk}/operate/", data)


def test_message_page__offers_operations_by_state(superuser, queue, frozen):
    ids = a_mix(queue)
    page = superuser.get(f"{MESSAGES}{Message.objects.get(id=ids['expired']).pk}/change/")
    assert page.context["operations"] == ["redrive"] and b'value="redrive"' in page.content
    page = superuser.get(f"{MESSAGES}{Message.objects.get(id=ids['ready']).pk}/change/")
    assert page.context["operations"] == ["retry-now", "priority"]


def test_message_page__redrive_retry_now_and_priority(superuser, queue, frozen):
    ids = a_mix(queue)
    assert operate(superuser, ids["expired"], do="redrive").status_code == 302
    assert states(queue)[ids["expired"]] == "ready"
    delayed = enqueue(queue, delay_seconds=600)
    operate(superuser, delayed, do="retry-now")
    operate(superuser, delayed, do="priority", priority="12")
    message = Message.objects.get(id=delayed)
    assert (message.priority, message.deliver_after <= message.enqueued_at) == (12, True)


def test_message_page__refusals_are_messages_not_errors(superuser, queue):
    enqueue(queue)
    held = claim_one(queue)
    response = operate(superuser, held.id, do="retry-now")
    assert response.status_code == 302
    ready = enqueue(queue)
    operate(superuser, ready, do="priority", priority="5000")
    assert Message.objects.get(id=ready).priority == 0


def test_message_page__editor_may_not_operate(tree, queue):
    ready = enqueue(queue, delay_seconds=60)
    editor = staff(tree["child"], Role.EDITOR)
    assert operate(editor, ready, do="retry-now").status_code == 403
    page = editor.get(f"{MESSAGES}{Message.objects.get(id=ready).pk}/change/")
    assert "operations" not in page.context


# ------------------------------------------------------ the message list


def act(client, action, ids, **extra):
    pks = [str(Message.objects.get(id=i).pk) for i in ids]
    return client.post(MESSAGES, {"action": action, ACTION_CHECKBOX_NAME: pks, **extra})


def test_actions__retry_now_and_change_priority(superuser, queue, frozen):
    first, second = enqueue(queue, delay_seconds=60), enqueue(queue, delay_seconds=60)
    act(superuser, "retry_now", [first, second])
    assert (
        Message.objects.of(queue).delayed(Message.objects.get(id=first).deliver_after).count() == 0
    )
    page = act(superuser, "change_priority", [first])
    assert page.status_code == 200 and b"new priority" in page.content
    act(superuser, "change_priority", [first, second], priority="-4")
    assert set(Message.objects.values_list("priority", flat=True)) == {-4}


def test_list__excerpts_and_search_over_last_error(superuser, queue, frozen):
    ids = a_mix(queue)
    response = superuser.get(MESSAGES, {"q": "keyerror"})
    assert [m.id for m in response.context["cl"].result_list] == [ids["failed_new"]]
    assert b"KeyError: &#x27;to&#x27;" in response.content or b"KeyError" in response.content
    assert b"{&quot;n&quot;:1}" in response.content  # the payload excerpt


# ------------------------------------------- consumers, scopes, overview, /


def test_consumers__listed_read_only(superuser, tree, queue):
    trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler=_any_handler(), shared=False
    )
    response = superuser.get("/admin/groupqueues/consumer/")
    assert response.status_code == 200 and len(response.context["cl"].result_list) == 1
    assert b"jobs" in response.content


def _any_handler():
    from groupqueues.handlers import handler_choices

    return handler_choices()[0][0]


def test_tokens__scopes_shown_with_what_they_allow(superuser, tree):
    make_token(app=AppFactory(group=tree["child"]), scopes=["queue:read", "queue:consume"])
    response = superuser.get("/admin/principals/apitoken/")
    assert b"<code>queue:read</code>: read queues" in response.content
    assert b"claim, ack" in response.content


def test_index__overview_counts_per_state_of_readable_groups(tree, queue, frozen):
    a_mix(queue)
    services.collection_update(collection=queue, paused=True)
    services.message_enqueue(
        collection=services.collection_create(group=tree["sibling"], name="hidden"),
        payload=1, enqueued_by="t",
    )  # fmt: skip
    response = staff(tree["child"], Role.VIEWER).get("/admin/")
    assert response.status_code == 200
    content = response.content.decode()
    assert "queue-overview" in content and "child" in content and "1 paused" in content
    assert "sibling" not in content
    assert "lease-overview" not in content


def test_index__superuser_sees_leases(superuser, queue):
    leases.lease_try(name="gq:maintenance", owner="host-1", ttl=60)
    assert b"gq:maintenance" in superuser.get("/admin/").content


def test_root__redirects_to_the_admin(client):
    response = client.get("/")
    assert response.status_code == 302 and response.url == "/admin/"
