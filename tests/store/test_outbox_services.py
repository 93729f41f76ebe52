"""The transactional outbox (issue 15): a row exists if and only if the
caller's transaction committed; the relay delivers it exactly once into a
queue (fenced, in one transaction, the outbox id as idempotency key), retries
with backoff and jitter, and parks it dead after max attempts until redriven."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from groupqueues import services as queues
from groupqueues.exceptions import CollectionNotFound
from groupqueues.models import Message
from principals.models import App
from queueproject import clock
from store import channels, outbox, outbox_targets, streams
from store.exceptions import InvalidOutboxInput, OutboxNotInTransaction
from store.models import Notification, OutboxMessage, OutboxState, StreamEntry
from store.outbox_relay import (
    OutboxRelay,
    Outcome,
    outbox_claim,
    outbox_deliver,
    outbox_release,
)
from tests.factories import AppFactory, GroupFactory


@pytest.fixture
def shop(db):
    group = GroupFactory(slug="shop")
    queues.collection_create(group=group, name="emails")
    return group


def drive(relay: OutboxRelay) -> OutboxRelay:
    """The relay's loop without ``Runner.run`` (whose close_old_connections
    would close the test's transaction): tick while rows come."""
    while relay.should_continue() and relay.tick():
        pass
    return relay


def relay_once(**kwargs: Any) -> OutboxRelay:
    return drive(OutboxRelay(relay_id="test-relay", once=True, **kwargs))


# --- publish: the row commits or rolls back with the caller ---------------------


@pytest.mark.django_db(transaction=True)
def test_publish__outside_atomic_is_refused_clearly():
    group = GroupFactory(slug="shop")
    queues.collection_create(group=group, name="emails")
    with pytest.raises(OutboxNotInTransaction, match=r"transaction\.atomic"):
        outbox.publish(outbox_targets.queue(group, "emails"), {"x": 1})
    assert not OutboxMessage.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_publish__rolls_back_with_the_business_write():
    group = GroupFactory(slug="shop")
    queues.collection_create(group=group, name="emails")
    with pytest.raises(RuntimeError), transaction.atomic():
        AppFactory(slug="business-row", group=group)
        outbox.publish("queue:shop/emails", {"order": 1})
        raise RuntimeError("the view failed after publishing")
    assert not App.objects.filter(slug="business-row").exists()
    assert not OutboxMessage.objects.exists()
    with transaction.atomic():
        AppFactory(slug="business-row", group=group)
        row = outbox.publish("queue:shop/emails", {"order": 2})
    assert OutboxMessage.objects.get().id == row.id
    assert row.state == OutboxState.PENDING and row.attempt == 0


def test_publish__the_key_dedupes_and_keeps_the_transaction_usable(shop):
    with transaction.atomic():
        first = outbox.publish("queue:shop/emails", {"n": 1}, key="order-7-paid")
        again = outbox.publish("queue:shop/emails", {"n": 2}, key="order-7-paid")
        assert again.id == first.id and again.payload == {"n": 1}
        other = outbox.publish("queue:shop/emails", {"n": 3}, key="order-8-paid")
    assert OutboxMessage.objects.count() == 2 and other.id != first.id


@pytest.mark.parametrize(
    ("target", "payload", "options", "field"),
    [
        ("nonsense", 1, {}, "target"),
        ("queue:shop", 1, {}, "target"),
        ("queue:shop/bad name", 1, {}, "target"),
        ("queue:shop/emails", {1, 2}, {}, "payload"),
        ("queue:shop/emails", float("nan"), {}, "payload"),
        ("queue:shop/emails", 1, {"key": ""}, "key"),
        ("queue:shop/emails", 1, {"key": "k" * 201}, "key"),
        ("queue:shop/emails", 1, {"max_attempts": 0}, "max_attempts"),
        ("queue:shop/emails", 1, {"max_attempts": True}, "max_attempts"),
        ("queue:shop/emails", 1, {"delay_seconds": -1}, "delay_seconds"),
        (42, 1, {}, "target"),
    ],
)
def test_publish__bad_input_names_the_field(shop, target, payload, options, field):
    with transaction.atomic(), pytest.raises(InvalidOutboxInput) as caught:
        outbox.publish(target, payload, **options)
    assert field in caught.value.details


def test_publish__unknown_queue_and_webhookless_app_are_refused(shop, settings):
    with transaction.atomic():
        with pytest.raises(CollectionNotFound):
            outbox.publish("queue:shop/absent", 1)
        with pytest.raises(InvalidOutboxInput, match="webhook_url"):
            outbox.publish(outbox_targets.webhook(AppFactory(slug="nohook", group=shop)), 1)
        settings.OUTBOX_MAX_PAYLOAD_BYTES = 10
        with pytest.raises(InvalidOutboxInput, match="10 bytes"):
            outbox.publish("queue:shop/emails", "x" * 20)


def test_publish__a_queue_is_resolved_from_the_group_chain(shop):
    child = GroupFactory(slug="shop-eu", parent=shop)
    with transaction.atomic():
        row = outbox.publish(outbox_targets.queue(child, "emails"), {"n": 1})
    assert row.group == child
    relay_once()
    assert Message.objects.get().collection.group == shop


# --- the relay ------------------------------------------------------------------


def test_relay__delivers_into_the_queue_with_the_outbox_id_as_idempotency_key(shop):
    with transaction.atomic():
        rows = [outbox.publish("queue:shop/emails", {"n": i}) for i in range(3)]
    relay = relay_once()
    assert relay.outcome.done == 3
    messages = {m.idempotency_key: m for m in Message.objects.all()}
    assert set(messages) == {str(r.id) for r in rows}
    assert messages[str(rows[1].id)].payload == {"n": 1}
    assert messages[str(rows[1].id)].enqueued_by == "outbox"
    for row in rows:
        row.refresh_from_db()
        assert row.state == OutboxState.DONE and row.done_at and row.attempt == 1
        assert row.claim_token is None


def test_relay__a_delivery_that_already_landed_is_not_doubled(shop):
    """A relay that crashed after enqueueing and before marking done (a relay
    of a design without the shared transaction) left the message behind: the
    outbox id as idempotency key answers it instead of a second message."""
    with transaction.atomic():
        row = outbox.publish("queue:shop/emails", {"n": 1})
    collection = queues.collection_get(group=shop, name="emails")
    queues.message_enqueue(collection=collection, payload={"n": 1}, enqueued_by="outbox",
                           idempotency_key=str(row.id))  # fmt: skip
    assert relay_once().outcome.done == 1
    assert Message.objects.count() == 1


def test_relay__a_claim_taken_over_after_its_lease_cannot_deliver(shop):
    with transaction.atomic():
        outbox.publish("queue:shop/emails", {"n": 1})
    [stale] = outbox_claim(relay_id="slow", n=10, lease_seconds=30)
    clock.advance(31)
    [fresh] = outbox_claim(relay_id="fast", n=10, lease_seconds=30)
    assert fresh.claim_token != stale.claim_token and fresh.attempt == 2
    outcome = Outcome()
    outbox_deliver(row=stale, outcome=outcome)
    assert outcome.lost == 1 and not Message.objects.exists()
    outbox_deliver(row=fresh, outcome=outcome)
    assert outcome.done == 1 and Message.objects.count() == 1


def test_relay__retries_with_backoff_and_jitter_then_dies_then_redrive(shop, settings):
    settings.OUTBOX_BACKOFF_BASE = 10.0
    settings.OUTBOX_BACKOFF_MAX = 15.0
    with transaction.atomic():
        row = outbox.publish("queue:shop/emails", {"n": 1}, max_attempts=3)
    queues.collection_get(group=shop, name="emails").delete()  # the target is gone
    delays = []
    for attempt in (1, 2):
        before = clock.now()
        assert relay_once().outcome.retried == 1
        row.refresh_from_db()
        assert row.state == OutboxState.PENDING and row.attempt == attempt
        assert "emails" in row.last_error
        delays.append((row.deliver_after - before).total_seconds())
        assert relay_once().outcome.retried == 0  # not due yet
        clock.advance((row.deliver_after - clock.now()).total_seconds() + 0.01)
    assert 5.0 <= delays[0] <= 10.5  # base, equal jitter: [base/2, base]
    assert 7.5 <= delays[1] <= 15.5  # doubled, capped at 15, jittered
    assert relay_once().outcome.dead == 1
    row.refresh_from_db()
    assert row.state == OutboxState.DEAD and row.dead_at and row.attempt == 3
    queues.collection_create(group=shop, name="emails")
    assert outbox.outbox_redrive(group=shop, ids=[row.id]) == 1
    row.refresh_from_db()
    assert row.state == OutboxState.PENDING and row.attempt == 0
    assert relay_once().outcome.done == 1
    assert Message.objects.get().idempotency_key == str(row.id)


def test_relay__a_row_whose_relay_died_on_the_last_attempt_is_dead(shop):
    with transaction.atomic():
        outbox.publish("queue:shop/emails", {"n": 1}, max_attempts=1)
    assert len(outbox_claim(relay_id="dies", n=1, lease_seconds=5)) == 1
    clock.advance(6)
    assert outbox_claim(relay_id="next", n=1, lease_seconds=5) == []
    row = OutboxMessage.objects.get()
    assert row.state == OutboxState.DEAD and "lease" in row.last_error


def test_relay__release_gives_rows_back_unattempted(shop):
    with transaction.atomic():
        outbox.publish("queue:shop/emails", {"n": 1})
    rows = outbox_claim(relay_id="r", n=5, lease_seconds=30)
    assert outbox_release(rows=rows) == 1
    row = OutboxMessage.objects.get()
    assert row.state == OutboxState.PENDING and row.attempt == 0 and row.claim_token is None


def test_relay__not_due_rows_wait_and_max_rows_stops(shop):
    with transaction.atomic():
        outbox.publish("queue:shop/emails", {"n": 0}, delay_seconds=60)
        for i in range(1, 4):
            outbox.publish("queue:shop/emails", {"n": i})
    relay = drive(OutboxRelay(relay_id="r", max_rows=2, batch=10))
    assert relay.handled == 2 and Message.objects.count() == 2
    assert relay_once().outcome.done == 1
    assert OutboxMessage.objects.filter(state=OutboxState.PENDING).count() == 1


def test_stats_purge_and_prune(shop, settings):
    with transaction.atomic():
        for i in range(3):
            outbox.publish("queue:shop/emails", {"n": i})
        outbox.publish("queue:shop/emails", {"n": 9}, delay_seconds=60)
    relay_once()
    OutboxMessage.objects.filter(payload={"n": 0}).update(state=OutboxState.DEAD)
    stats = outbox.outbox_stats(group=shop)
    assert (stats.pending, stats.in_flight, stats.done, stats.dead) == (1, 0, 2, 1)
    assert stats.oldest_pending_age_seconds is not None
    assert outbox.outbox_purge(group=shop) == 2
    assert outbox.outbox_purge(group=shop, include_dead=True) == 1
    assert OutboxMessage.objects.count() == 1
    clock.advance(61)
    relay_once()
    settings.OUTBOX_DONE_RETENTION = 10
    assert outbox.outbox_prune_done() == 0
    clock.advance(11)
    assert outbox.outbox_prune_done() == 1


def test_redrive__needs_ids_or_all(shop):
    with pytest.raises(InvalidOutboxInput):
        outbox.outbox_redrive(group=shop)
    with pytest.raises(InvalidOutboxInput):
        outbox.outbox_redrive(group=shop, ids=[], all=True)
    assert outbox.outbox_redrive(group=shop, all=True) == 0


# --- streams and channels: delivered exactly once (the outbox id as the key) ---


def test_stream_target__appends_once_with_the_outbox_id(shop):
    topic = streams.topic_create(group=shop, name="orders")
    with transaction.atomic():
        row = outbox.publish(outbox_targets.stream(shop, "orders"), {"n": 1})
    assert relay_once().outcome.done == 1
    (entry,) = StreamEntry.objects.filter(topic=topic)
    assert (entry.payload, entry.idempotency_key) == ({"n": 1}, str(row.id))
    # A relay that delivered and died before marking done delivers again: no second entry.
    outbox_targets.StreamAdapter().deliver(OutboxMessage.objects.get(pk=row.pk))
    assert StreamEntry.objects.filter(topic=topic).count() == 1


def test_channel_target__publishes_once_with_the_outbox_id(shop):
    channel = channels.channel_create(group=shop, name="orders")
    with transaction.atomic():
        row = outbox.publish(outbox_targets.channel(shop, "orders"), {"n": 1})
    assert relay_once().outcome.done == 1
    outbox_targets.ChannelAdapter().deliver(OutboxMessage.objects.get(pk=row.pk))
    (note,) = Notification.objects.filter(channel=channel)
    assert note.payload == {"n": 1}


def test_stream_target__missing_topic_retries_then_dies(shop):
    with transaction.atomic():
        outbox.publish(outbox_targets.stream(shop, "no-such-topic"), {"n": 1}, max_attempts=1)
    relay_once()
    assert OutboxMessage.objects.get().state == OutboxState.DEAD


# --- the Django-friendly pattern: publish from a post_save handler ----------------


@pytest.mark.django_db(transaction=True)
def test_post_save_handler__publishes_with_the_save_and_rolls_back_with_it():
    from django.db.models.signals import post_save

    group = GroupFactory(slug="shop")
    queues.collection_create(group=group, name="emails")

    def app_changed(sender: Any, instance: App, created: bool, **kwargs: Any) -> None:
        outbox.publish("queue:shop/emails", {"app": instance.slug, "created": created})

    post_save.connect(app_changed, sender=App)
    try:
        with transaction.atomic():
            AppFactory(slug="kept", group=group)
        with pytest.raises(RuntimeError), transaction.atomic():
            AppFactory(slug="rolled-back", group=group)
            raise RuntimeError("later in the view")
        with pytest.raises(OutboxNotInTransaction):
            AppFactory(slug="autocommit", group=group)  # a save outside atomic() is refused
    finally:
        post_save.disconnect(app_changed, sender=App)
    assert [r.payload for r in OutboxMessage.objects.all()] == [{"app": "kept", "created": True}]
    assert relay_once().outcome.done == 1
    assert Message.objects.get().payload == {"app": "kept", "created": True}
