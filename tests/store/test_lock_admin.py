"""The read-only admin list of the groups' locks (``store.lock_admin``; the
lead imports it from ``store/admin.py``)."""

import pytest
from django.test import Client

import store.lock_admin  # noqa: F401  (registers the list before the URLs load)
from principals.models import Role
from queueproject.leases import lease_try
from store.locks import lock_acquire, lock_release
from tests.factories import UserFactory, member

pytestmark = pytest.mark.django_db

LOCKS = "/admin/queueproject/lease/"


def staff(group, role):
    client = Client()
    client.force_login(member(group, role, is_staff=True))
    return client


@pytest.fixture
def locks(tree):
    lease_try(name="groupqueues.maintenance", owner="internal", ttl=60)
    lock_acquire(group=tree["child"], name="report", owner="worker-1", ttl=60)
    lock_acquire(group=tree["sibling"], name="backup", owner="worker-2", ttl=60)
    lock_acquire(group=tree["child"], name="done", owner="worker-3", ttl=60)
    lock_release(group=tree["child"], name="done", owner="worker-3")


def rows(client):
    response = client.get(LOCKS)
    assert response.status_code == 200
    return {lease.name.rsplit(":", 1)[1]: lease for lease in response.context["cl"].result_list}


def test_locks__superuser_sees_every_group_lock_not_internal_leases(tree, locks):
    client = Client()
    client.force_login(UserFactory(is_superuser=True, is_staff=True))
    assert set(rows(client)) == {"report", "backup", "done"}
    page = client.get(LOCKS).content.decode()
    for shown in ["report", "child", "worker-1", "sibling"]:
        assert shown in page


def test_locks__staff_see_the_locks_of_groups_they_consume_on_read_only(tree, locks):
    client = staff(tree["child"], Role.EDITOR)
    listed = rows(client)
    assert set(listed) == {"report", "done"}
    page = client.get(LOCKS).content.decode()
    assert page.count('alt="True"') == 1 and page.count('alt="False"') == 1  # held / free
    lease = listed["report"].pk
    assert client.get(f"{LOCKS}add/").status_code == 403
    assert client.post(f"{LOCKS}{lease}/delete/", {"post": "yes"}).status_code == 403


def test_locks__viewers_and_outsiders_see_none(tree, locks):
    assert rows(staff(tree["child"], Role.VIEWER)) == {}
    assert rows(staff(tree["grandchild"], Role.ADMIN)) == {}
