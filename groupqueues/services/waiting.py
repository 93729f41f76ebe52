"""Operator changes to waiting messages (ready, due or delayed): retry one now,
change its priority. Each is one UPDATE fenced by the ready state, so a claim
that took the message first wins and the operator is told so."""

from __future__ import annotations

import uuid

from django.db import transaction

from groupqueues import exceptions as err
from groupqueues import validation as check
from groupqueues.models import Collection, Message, MessageState
from groupqueues.selectors import message_get
from groupqueues.services.claim_floor import claim_floor_lower_to_message
from groupqueues.services.collections import collection_wake
from queueproject import clock


def message_retry_now(*, collection: Collection, id: uuid.UUID | str) -> Message:
    """A ready message waiting for its ready time (delayed, or backing off
    after a nack) becomes due now; its attempt count is kept. A message that
    is already due is left as it is. One UPDATE fenced by the ready state;
    wakes consumers. Returns the message. Raises MessageNotFound,
    MessageNotWaiting (claimed: its holder has it; dead: redrive it)."""
    message = message_get(collection=collection, id=id)
    now = clock.now()
    waiting = Message.objects.of(collection).ready().filter(id=message.id, deliver_after__gt=now)
    if waiting.update(deliver_after=now):
        collection_wake(collection)
        return message_get(collection=collection, id=message.id)
    return _still_waiting(collection, message.id)


def message_set_priority(*, collection: Collection, id: uuid.UUID | str, priority: int) -> Message:
    """Change the priority of a ready message (its place in the claim order).
    One UPDATE fenced by the ready state. Returns the message. Raises
    InvalidQueueInput (``priority`` outside -1000…1000), MessageNotFound,
    MessageNotWaiting."""
    priority = check.check_int(
        priority, "priority", low=check.PRIORITY_MIN, high=check.PRIORITY_MAX
    )
    message = message_get(collection=collection, id=id)
    with transaction.atomic():
        if Message.objects.of(collection).ready().filter(id=message.id).update(priority=priority):
            claim_floor_lower_to_message(collection, message.id)  # same time, another priority
    return _still_waiting(collection, message.id)


def _still_waiting(collection: Collection, id: uuid.UUID) -> Message:
    """The message as it is now, if it is still ready; else MessageNotWaiting."""
    message = message_get(collection=collection, id=id)
    if message.state == MessageState.CLAIMED:
        raise err.MessageNotWaiting(f"Message {id} is claimed by {message.claimed_by!r}.")
    if message.state == MessageState.DEAD:
        raise err.MessageNotWaiting(f"Message {id} is dead ({message.dead_reason}): redrive it.")
    return message
