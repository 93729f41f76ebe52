"""Operator changes to waiting messages: retry now, change priority."""

import pytest

from groupqueues import services
from groupqueues.exceptions import InvalidQueueInput, MessageNotFound, MessageNotWaiting
from groupqueues.models import Message
from queueproject import clock
from tests.groupqueues.conftest import claim, claim_one, enqueue
from tests.groupqueues.dead_helpers import dead

pytestmark = pytest.mark.django_db


def test_retry_now__a_delayed_message_is_claimable_at_once(queue, frozen):
    message_id = enqueue(queue, delay_seconds=3600)
    assert claim(queue) == []
    retried = services.message_retry_now(collection=queue, id=message_id)
    assert retried.deliver_after == clock.now()
    assert claim_one(queue).id == message_id


def test_retry_now__a_backing_off_message_keeps_its_attempts(queue, frozen):
    message_id = enqueue(queue)
    held = claim_one(queue)
    services.message_nack(collection=queue, id=held.id, claim_token=held.claim_token)
    assert claim(queue) == []  # backing off
    services.message_retry_now(collection=queue, id=message_id)
    again = claim_one(queue)
    assert (again.id, again.attempt) == (message_id, 2)


def test_retry_now__a_due_message_is_left_as_it_is(queue, frozen):
    message_id = enqueue(queue)
    before = Message.objects.get(id=message_id).deliver_after
    clock.advance(5)
    assert services.message_retry_now(collection=queue, id=message_id).deliver_after == before


def test_retry_now__claimed_or_dead_is_refused(queue, frozen):
    enqueue(queue)
    held = claim_one(queue)
    with pytest.raises(MessageNotWaiting, match="claimed"):
        services.message_retry_now(collection=queue, id=held.id)
    with pytest.raises(MessageNotWaiting, match="redrive"):
        services.message_retry_now(collection=queue, id=dead(queue))


def test_retry_now__unknown_or_other_collection_is_not_found(queue, group):
    other = services.collection_create(group=group, name="other")
    theirs = enqueue(other, delay_seconds=60)
    for bad in (theirs, "not-a-uuid"):
        with pytest.raises(MessageNotFound):
            services.message_retry_now(collection=queue, id=bad)


def test_set_priority__changes_the_claim_order(queue):
    first = enqueue(queue)
    second = enqueue(queue)
    assert services.message_set_priority(collection=queue, id=second, priority=7).priority == 7
    assert [m.id for m in claim(queue, 2)] == [second, first]


@pytest.mark.parametrize("bad", [1001, -1001, "5", True])
def test_set_priority__out_of_range_is_refused(queue, bad):
    message_id = enqueue(queue)
    with pytest.raises(InvalidQueueInput, match="priority"):
        services.message_set_priority(collection=queue, id=message_id, priority=bad)
    assert Message.objects.get(id=message_id).priority == 0


def test_set_priority__only_ready_messages(queue):
    enqueue(queue)
    held = claim_one(queue)
    with pytest.raises(MessageNotWaiting):
        services.message_set_priority(collection=queue, id=held.id, priority=3)
    assert Message.objects.get(id=held.id).priority == 0
