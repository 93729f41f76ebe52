"""The admin's ordering-key page (SPEC §7, issue 18): every key with live
messages or only the blocked ones, each with its head, why the head holds the
key back and how many wait behind it; linked from the queue's change page;
read with QUEUE_READ on the queue's group."""

from __future__ import annotations

import pytest
from django.test import Client

from groupqueues import services
from principals.models import Role
from queueproject import clock
from tests.factories import member
from tests.groupqueues.conftest import WORKER, claim, enqueue

pytestmark = pytest.mark.django_db

COLLECTIONS = "/admin/groupqueues/collection/"


def staff(group, role, *, is_staff=True):
    client = Client()
    client.force_login(member(group, role, is_staff=is_staff))
    return client


@pytest.fixture
def superuser(admin_client):
    return admin_client


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs", visibility_timeout=60)


def keys_page(queue):
    return f"{COLLECTIONS}{queue.pk}/keys/"


def rows(response):
    """{key: (head id, why blocked, waiting behind)} of the page."""
    return {h.ordering_key: (h.id, why, behind) for h, why, behind, _ in response.context["rows"]}


@pytest.fixture
def keyed(queue, frozen):
    """a: head claimed, two behind; b: head waiting for its retry; c: head
    delayed; d: head claimable; and a message without a key."""
    a = [enqueue(queue, {"a": i}, ordering_key="a") for i in range(3)]
    b = enqueue(queue, {"b": 0}, ordering_key="b")
    c = enqueue(queue, {"c": 0}, ordering_key="c", delay_seconds=300)
    enqueue(queue, {"no key": True})
    claimed = {m.id: m for m in claim(queue, 2)}
    assert set(claimed) == {a[0], b}
    services.message_nack(collection=queue, id=b, claim_token=claimed[b].claim_token,
                          delay_seconds=30)  # fmt: skip
    d = enqueue(queue, {"d": 0}, ordering_key="d")
    return {"a": a, "b": b, "c": c, "d": d}


def test_keys_page__every_key_with_its_head_why_and_how_many_wait(superuser, queue, keyed):
    response = superuser.get(keys_page(queue))
    assert response.status_code == 200
    crumbs = response.content.decode().split('<div class="breadcrumbs">')[1].split("</div>")[0]
    assert "/change/" in crumbs and str(queue) in crumbs and "&rsaquo; Ordering keys" in crumbs
    got = rows(response)
    assert list(got) == ["a", "b", "c", "d"]
    assert got["a"][0] == keyed["a"][0] and got["a"][2] == 2
    assert got["a"][1].startswith(f"claimed by {WORKER} until ")
    assert got["b"] == (keyed["b"], got["b"][1], 0) and got["b"][1].startswith("retry: due at ")
    assert got["c"][1].startswith("delayed: due at ")
    assert got["d"] == (keyed["d"], "", 0)
    assert b"4 keys" in response.content and b"{&quot;a&quot;:0}" in response.content


def test_keys_page__filtered_to_blocked_or_claimable_keys(superuser, queue, keyed):
    assert list(rows(superuser.get(keys_page(queue), {"blocked": "true"}))) == ["a", "b", "c"]
    assert list(rows(superuser.get(keys_page(queue), {"blocked": "false"}))) == ["d"]
    assert b"3 keys blocked" in superuser.get(keys_page(queue), {"blocked": "true"}).content


def test_keys_page__a_lapsed_lease_is_named(superuser, queue, keyed):
    clock.advance(61)
    why = rows(superuser.get(keys_page(queue), {"blocked": "true"}))["a"][1]
    assert "lease lapsed" in why and "claimable again" in why


def test_keys_page__linked_from_the_change_page(superuser, queue):
    response = superuser.get(f"{COLLECTIONS}{queue.pk}/change/")
    assert keys_page(queue).encode() in response.content
    assert f"{keys_page(queue)}?blocked=true".encode() in response.content


def test_keys_page__viewer_reads_other_groups_and_non_staff_do_not(tree, queue, keyed):
    assert staff(tree["child"], Role.VIEWER).get(keys_page(queue)).status_code == 200
    theirs = services.collection_create(group=tree["sibling"], name="theirs")
    assert staff(tree["child"], Role.OWNER).get(keys_page(theirs)).status_code == 404
    not_staff = staff(tree["child"], Role.OWNER, is_staff=False).get(keys_page(queue))
    assert not_staff.status_code == 302 and "/login/" in not_staff["Location"]
