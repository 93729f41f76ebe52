"""Group-queue services, collections: create, update, resolve, stats, reads.

Rows of the SPEC §2 operations table, on both databases (split from
test_services.py along the seams of the services package)."""

from __future__ import annotations

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Collection, Message
from queueproject import clock
from tests.factories import AppFactory, GroupFactory
from tests.groupqueues.conftest import ENQUEUER, WORKER, claim, claim_one, enqueue

pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------- collections


def test_collection_create__defaults(queue):
    assert queue.kind == "queue"
    assert queue.max_payload_bytes == 256 * 1024
    assert queue.default_max_attempts == 3
    assert queue.visibility_timeout == 30
    assert (queue.retry_backoff_base, queue.retry_backoff_max) == (1.0, 3600.0)
    assert queue.dead_retention == 7 * 24 * 3600
    assert queue.max_depth is None
    assert queue.paused is False


def test_collection_create__duplicate_name_is_already_exists(queue, group):
    with pytest.raises(err.CollectionExists) as exc:
        services.collection_create(group=group, name="jobs")
    assert exc.value.code == "already_exists"
    assert exc.value.status_code == 409


@pytest.mark.parametrize("name", ["", "a" * 65, "with space", "slash/no", "ümlaut"])
def test_collection_create__bad_name_is_invalid(group, name):
    with pytest.raises(err.InvalidQueueInput) as exc:
        services.collection_create(group=group, name=name)
    assert "name" in exc.value.details


def test_collection_create__bad_settings_are_invalid(group):
    with pytest.raises(err.InvalidQueueInput) as exc:
        services.collection_create(group=group, name="q", visibility_timeout=0)
    assert "visibility_timeout" in exc.value.details
    with pytest.raises(err.InvalidQueueInput):
        services.collection_create(group=group, name="q", default_max_attempts=0)
    with pytest.raises(err.InvalidQueueInput):
        services.collection_create(
            group=group, name="q", retry_backoff_base=10, retry_backoff_max=1
        )


def test_collection_update__changes_only_given_settings(queue):
    services.collection_update(collection=queue, paused=True, max_depth=5)
    queue.refresh_from_db()
    assert (queue.paused, queue.max_depth, queue.visibility_timeout) == (True, 5, 30)
    services.collection_update(collection=queue, max_depth=None)
    queue.refresh_from_db()
    assert queue.max_depth is None


def test_collection_resolve__nearest_declaring_group_wins(tree):
    root_q = services.collection_create(group=tree["root"], name="emails")
    child_q = services.collection_create(group=tree["child"], name="emails")
    found = services.collection_resolve(app=tree["app_grandchild"], name="emails")
    assert found.pk == child_q.pk
    assert services.collection_resolve(app=tree["app_sibling"], name="emails").pk == root_q.pk


def test_collection_resolve__other_kinds_and_other_branches_are_not_found(tree):
    services.collection_create(group=tree["child"], name="store", kind="kv")
    services.collection_create(group=tree["sibling"], name="theirs")
    with pytest.raises(err.CollectionNotFound) as exc:
        services.collection_resolve(app=tree["app_grandchild"], name="store")
    assert (exc.value.code, exc.value.status_code) == ("collection_not_found", 404)
    with pytest.raises(err.CollectionNotFound):
        services.collection_resolve(app=tree["app_grandchild"], name="theirs")


def test_queue_operations__refuse_non_queue_kinds(group):
    kv = services.collection_create(group=group, name="kv", kind="kv")
    with pytest.raises(err.CollectionNotFound):
        services.message_enqueue(collection=kv, payload={}, enqueued_by=ENQUEUER)
    with pytest.raises(err.CollectionNotFound):
        services.message_claim(collection=kv, worker_id=WORKER)
    with pytest.raises(err.CollectionNotFound):
        services.collection_get(group=group, name="kv")


def test_group_delete__cascades_to_collections_and_messages():
    group = GroupFactory()
    queue = services.collection_create(group=group, name="q")
    enqueue(queue)
    group.delete()
    assert not Collection.objects.exists()
    assert not Message.objects.exists()


# ---------------------------------------------------------------------- stats


def test_stats__counts_each_kind(queue, frozen):
    enqueue(queue, "old")
    clock.advance(10)
    enqueue(queue, "pending")
    enqueue(queue, "delayed", delay_seconds=60)
    enqueue(queue, "expired", expires_in_seconds=1)
    enqueue(queue, "last-try", max_attempts=1)
    clock.advance(2)
    assert claim_one(queue).payload == "old"  # in flight from now on
    back = claim_one(queue)
    assert back.payload == "pending"
    services.message_release(collection=queue, id=back.id, claim_token=back.claim_token)
    stats = services.collection_stats(collection=queue)
    # live: old (claimed), pending, delayed, expired (not yet swept), last-try
    assert stats.depth == 5
    assert stats.in_flight == 1
    assert stats.delayed == 1
    assert stats.depth_pending == 2  # pending and last-try
    assert stats.dead == 0
    assert stats.oldest_pending_age_seconds == pytest.approx(2)  # "pending", ready since t+10
    assert services.collection_depth(collection=queue) == 5
    assert services.collection_depth_pending(collection=queue) == 2


def test_stats__empty_queue(queue):
    stats = services.collection_stats(collection=queue)
    assert stats == services.QueueStats(0, 0, 0, 0, 0, None)


def test_resolve_then_enqueue_through_the_chain(tree):
    services.collection_create(group=tree["root"], name="emails")
    app = AppFactory(group=tree["grandchild"])
    queue = services.collection_resolve(app=app, name="emails")
    enqueue(queue)
    assert services.collection_depth(collection=queue) == 1


def test_reads__collections_of_a_group_and_its_dead_list(queue, group, frozen):
    services.collection_create(group=group, name="alpha")
    services.collection_create(group=group, name="store", kind="docs")
    assert [c.name for c in services.collections_of(group=group)] == ["alpha", "jobs"]
    first, second = enqueue(queue), enqueue(queue)
    for message in claim(queue, 2):
        services.message_fail(
            collection=queue, id=message.id, claim_token=message.claim_token, error=""
        )
        clock.advance(1)
    assert [m.id for m in services.messages_dead(collection=queue)] == [second, first]
