"""The outbox admin: pending and dead rows listed (filter by state), the
redrive action capability-checked and recorded in the admin log."""

from __future__ import annotations

import pytest
from django.db import transaction

from groupqueues import services as queues
from principals.models import Role
from store import outbox
from store.models import OutboxMessage, OutboxState
from tests.groupqueues.test_admin import act, logged, staff

pytestmark = pytest.mark.django_db

OUTBOX = "/admin/store/outboxmessage/"


@pytest.fixture
def dead(tree):
    queues.collection_create(group=tree["child"], name="emails")
    with transaction.atomic():
        pending = outbox.publish("queue:child/emails", {"n": 1})
        row = outbox.publish("queue:child/emails", {"n": 2})
    refused = "target refused: HTTP 500"
    OutboxMessage.objects.filter(id=row.id).update(state=OutboxState.DEAD, last_error=refused)
    row.refresh_from_db()
    return row, pending


def test_changelist__shows_pending_and_dead_rows_with_the_error(tree, dead):
    client = staff(tree["child"], Role.VIEWER)
    page = client.get(OUTBOX).content.decode()
    assert str(dead[0].id) in page and str(dead[1].id) in page
    assert "target refused: HTTP 500" in page
    only_dead = client.get(OUTBOX, {"state__exact": "dead"}).content.decode()
    assert str(dead[0].id) in only_dead and str(dead[1].id) not in only_dead
    assert client.get(f"{OUTBOX}{dead[0].id}/change/").status_code == 200


def test_redrive__by_a_manager_is_logged(tree, dead):
    row, pending = dead
    assert (
        act(staff(tree["child"], Role.ADMIN), OUTBOX, "redrive", [row.pk, pending.pk]).status_code
        == 302
    )
    row.refresh_from_db()
    assert row.state == OutboxState.PENDING and row.attempt == 0 and logged(row, "Redriven")


@pytest.mark.parametrize("role", [Role.VIEWER, Role.EDITOR])
def test_redrive__refused_without_manage(tree, dead, role):
    act(staff(tree["child"], role), OUTBOX, "redrive", [dead[0].pk])
    dead[0].refresh_from_db()
    assert dead[0].state == OutboxState.DEAD and not logged(dead[0], "Redriven")


def test_changelist__outsiders_see_nothing(tree, dead):
    page = staff(tree["sibling"], Role.ADMIN).get(OUTBOX)
    assert str(dead[0].id).encode() not in page.content
