"""Queue triggers and their materialised consumers (SPEC §2 "Consumers and workers")."""

from __future__ import annotations

import pytest

from groupqueues import services, trigger_services
from groupqueues.exceptions import CollectionNotFound, InvalidQueueInput, TriggerExists
from groupqueues.models import Consumer
from principals import services as principals
from tests.factories import AppFactory, GroupFactory


@pytest.fixture
def jobs(tree):
    return services.collection_create(group=tree["root"], name="jobs")


def consumer_apps(trigger):
    return {c.app.slug if c.app else None for c in Consumer.objects.filter(trigger=trigger)}


def test_create__shared_trigger_has_one_consumer_per_descendant_app(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    assert consumer_apps(trigger) == {"app-child", "app-grandchild"}


def test_create__unshared_trigger_has_one_group_consumer(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["root"], collection_name="jobs", handler="noop"
    )
    assert consumer_apps(trigger) == {None}


def test_create__collection_resolves_upwards_from_the_group(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["grandchild"], collection_name="jobs", handler="noop"
    )
    assert trigger_services.trigger_collection(trigger=trigger) == jobs


def test_create__unknown_queue_is_refused(tree, jobs):
    with pytest.raises(CollectionNotFound):
        trigger_services.trigger_create(group=tree["root"], collection_name="nope", handler="noop")


def test_create__unregistered_handler_is_refused(tree, jobs):
    with pytest.raises(InvalidQueueInput, match="registered"):
        trigger_services.trigger_create(
            group=tree["root"], collection_name="jobs", handler="os.system"
        )


def test_create__webhook_must_be_shared(tree, jobs):
    with pytest.raises(InvalidQueueInput, match="shared"):
        trigger_services.trigger_create(
            group=tree["root"], collection_name="jobs", handler="webhook"
        )


def test_create__duplicate_is_refused(tree, jobs):
    trigger_services.trigger_create(group=tree["root"], collection_name="jobs", handler="noop")
    with pytest.raises(TriggerExists):
        trigger_services.trigger_create(group=tree["root"], collection_name="jobs", handler="noop")


def test_sync__app_created_in_subtree_gets_a_consumer(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    principals.app_create(slug="newcomer", group=tree["grandchild"])
    AppFactory(slug="outsider", group=tree["sibling"])
    assert consumer_apps(trigger) == {"app-child", "app-grandchild", "newcomer"}


def test_sync__app_moved_out_and_in(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    principals.app_move(app=tree["app_grandchild"], group=tree["sibling"])
    principals.app_move(app=tree["app_sibling"], group=tree["child"])
    assert consumer_apps(trigger) == {"app-child", "app-sibling"}


def test_sync__app_deleted_loses_its_consumer(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    tree["app_grandchild"].delete()
    assert consumer_apps(trigger) == {"app-child"}


def test_sync__group_moved_takes_its_apps_along(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    moved = GroupFactory(slug="moved", parent=tree["sibling"])
    AppFactory(slug="app-moved", group=moved)
    principals.group_set_parent(group=moved, parent=tree["grandchild"])
    assert consumer_apps(trigger) == {"app-child", "app-grandchild", "app-moved"}


def test_update__shared_toggle_rematerialises(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop"
    )
    trigger_services.trigger_update(trigger=trigger, shared=True)
    assert consumer_apps(trigger) == {"app-child", "app-grandchild"}
    trigger_services.trigger_update(trigger=trigger, shared=False)
    assert consumer_apps(trigger) == {None}


def test_update__disabled_trigger_has_no_runnable_consumers(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    trigger_services.trigger_update(trigger=trigger, enabled=False, concurrency=3)
    assert not Consumer.objects.runnable().exists()
    trigger.refresh_from_db()
    assert trigger.concurrency == 3


def test_delete__removes_consumers(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    trigger_services.trigger_delete(trigger=trigger)
    assert not Consumer.objects.exists()


def test_sync__repairs_drift(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    Consumer.objects.all().delete()
    assert trigger_services.consumers_sync() == (2, 0)
    assert trigger_services.consumers_sync() == (0, 0)
    assert consumer_apps(trigger) == {"app-child", "app-grandchild"}
