"""Outbox targets: what an outbox row is delivered to, one adapter per kind.

A ``Target`` names the destination at publish time; its adapter checks it then
(``validate``) and delivers a claimed row later (``deliver``). Adapters with
``in_database = True`` (queue, stream, channel) write into this product's own
tables: the relay calls ``deliver`` inside the same transaction that fences
and marks the row done, and passes the outbox id as the target's idempotency
key, so a relay killed at any point never delivers a row twice (exactly once).
The webhook adapter calls out over HTTP, outside any transaction: at least
once, with the outbox id in the ``X-Outbox-Id`` header for the receiver's
de-duplication.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from django.core.exceptions import ValidationError

from groupqueues import services as queues
from groupqueues.models import COLLECTION_NAME_VALIDATOR
from groupqueues.services.types import MAX_BATCH, NewMessage
from principals import services as principals
from principals.models import App, Group
from queueproject import webhooks
from store import channels, streams
from store.exceptions import InvalidOutboxInput, OutboxDeliveryFailed
from store.models import OutboxMessage, OutboxTargetKind

OUTBOX_ID_HEADER = "X-Outbox-Id"
ENQUEUED_BY = "outbox"


@dataclass(frozen=True)
class Target:
    """Where an outbox message goes: ``name`` is a queue name (resolved from
    ``group``'s chain at delivery, as an app of that group would), a topic, a
    channel, or the app's slug for a webhook (``app`` set)."""

    kind: OutboxTargetKind
    group: Group
    name: str
    app: App | None = None

    def __str__(self) -> str:
        if self.kind == OutboxTargetKind.WEBHOOK:
            return f"webhook:{self.name}"
        return f"{self.kind}:{self.group.slug}/{self.name}"


def queue(group: Group, name: str) -> Target:
    """Enqueue into the queue ``name`` resolved from ``group``'s chain."""
    return Target(OutboxTargetKind.QUEUE, group, name)


def stream(group: Group, topic: str) -> Target:
    """Append to ``group``'s stream topic ``topic``."""
    return Target(OutboxTargetKind.STREAM, group, topic)


def channel(group: Group, name: str) -> Target:
    """Publish on ``group``'s notify channel ``name``."""
    return Target(OutboxTargetKind.CHANNEL, group, name)


def webhook(app: App) -> Target:
    """A signed POST to ``app``'s ``webhook_url``."""
    return Target(OutboxTargetKind.WEBHOOK, app.group, app.slug, app)


def target_parse(text: str) -> Target:
    """``queue:<group>/<name>``, ``stream:<group>/<topic>``,
    ``channel:<group>/<name>`` or ``webhook:<app>`` (slugs or ids). Raises
    InvalidOutboxInput (``target``), GroupNotFound, AppNotFound."""
    kind, sep, rest = text.partition(":")
    if not sep or kind not in OutboxTargetKind.values:
        raise InvalidOutboxInput.field("target", "Use queue:, stream:, channel:<group>/<name> "
                                       "or webhook:<app>.")  # fmt: skip
    if kind == OutboxTargetKind.WEBHOOK:
        return webhook(principals.app_get(ref=rest))
    group_ref, slash, name = rest.partition("/")
    if not slash or not group_ref:
        raise InvalidOutboxInput.field("target", f"Use {kind}:<group>/<name>.")
    return Target(OutboxTargetKind(kind), principals.group_get(ref=group_ref), name)


def target_of(row: OutboxMessage) -> Target:
    """The target an outbox row was published to."""
    return Target(OutboxTargetKind(row.target_kind), row.group, row.target_name, row.app)


class Adapter:
    """One target kind. ``in_database``: ``deliver`` writes only to this
    database, so the relay runs it inside the transaction that marks the row."""

    kind: ClassVar[OutboxTargetKind]
    in_database: ClassVar[bool]

    def validate(self, target: Target) -> None:
        """Refuse a target that cannot take messages (raises a domain error)."""
        raise NotImplementedError

    def deliver(self, row: OutboxMessage) -> None:
        """Deliver ``row`` (idempotent on ``row.id``); raise on failure."""
        raise NotImplementedError

    def deliver_many(self, rows: list[OutboxMessage]) -> None:
        """Deliver rows of one target together (all or nothing: the relay
        runs it in one transaction and falls back to ``deliver`` per row)."""
        for row in rows:
            self.deliver(row)


def _check_name(name: Any) -> None:
    try:
        COLLECTION_NAME_VALIDATOR(name)
    except (ValidationError, TypeError):
        raise InvalidOutboxInput.field(
            "target", "Names use 1-64 letters, digits, dots, underscores and hyphens."
        ) from None


class QueueAdapter(Adapter):
    kind = OutboxTargetKind.QUEUE
    in_database = True

    def validate(self, target: Target) -> None:
        _check_name(target.name)
        queues.collection_resolve_from(group=target.group, name=target.name)

    def deliver(self, row: OutboxMessage) -> None:
        collection = queues.collection_resolve_from(group=row.group, name=row.target_name)
        queues.message_enqueue(collection=collection, payload=row.payload,
                               enqueued_by=ENQUEUED_BY, idempotency_key=str(row.id))  # fmt: skip

    def deliver_many(self, rows: list[OutboxMessage]) -> None:
        """One batch enqueue (one statement on PostgreSQL) for up to 500 rows."""
        first = rows[0]
        collection = queues.collection_resolve_from(group=first.group, name=first.target_name)
        for start in range(0, len(rows), MAX_BATCH):
            batch = [NewMessage(row.payload, idempotency_key=str(row.id))
                     for row in rows[start : start + MAX_BATCH]]  # fmt: skip
            queues.message_enqueue_batch(collection=collection, messages=batch,
                                         enqueued_by=ENQUEUED_BY)  # fmt: skip


class StreamAdapter(Adapter):
    kind = OutboxTargetKind.STREAM
    in_database = True

    def validate(self, target: Target) -> None:
        _check_name(target.name)

    def deliver(self, row: OutboxMessage) -> None:
        """Append with the outbox id as the entry's idempotency key (a second
        delivery answers the same offset and appends nothing)."""
        topic = streams.topic_get(group=row.group, name=row.target_name)
        entry = streams.StreamEntryIn(row.payload, idempotency_key=str(row.id))
        streams.stream_append(topic=topic, entries=[entry], appended_by=ENQUEUED_BY)


class ChannelAdapter(Adapter):
    kind = OutboxTargetKind.CHANNEL
    in_database = True

    def validate(self, target: Target) -> None:
        _check_name(target.name)

    def deliver(self, row: OutboxMessage) -> None:
        """Publish with the outbox id as the idempotency key."""
        channel = channels.channel_get(group=row.group, name=row.target_name)
        channels.publish(channel=channel, payload=row.payload, idempotency_key=str(row.id))


class WebhookAdapter(Adapter):
    kind = OutboxTargetKind.WEBHOOK
    in_database = False

    def validate(self, target: Target) -> None:
        if target.app is None or not target.app.webhook_url:
            raise InvalidOutboxInput.field("target", f"App {target.name!r} has no webhook_url.")

    def deliver(self, row: OutboxMessage) -> None:
        app = row.app
        if app is None or not app.webhook_url:
            raise OutboxDeliveryFailed(f"app {row.target_name!r} has no webhook_url")
        result = webhooks.post_signed(
            app.webhook_url, app.webhook_secret, webhook_body(row), timeout=app.webhook_timeout,
            headers={OUTBOX_ID_HEADER: str(row.id)},
        )  # fmt: skip
        if not result.ok:
            raise OutboxDeliveryFailed(result.summary)


def webhook_body(row: OutboxMessage) -> dict[str, Any]:
    """What the app receives: the outbox id (also in ``X-Outbox-Id``), the
    payload, the publisher's key and when it was published."""
    return {"outbox_id": str(row.id), "key": row.key, "payload": row.payload,
            "published_at": row.created_at.isoformat()}  # fmt: skip


ADAPTERS: dict[str, Adapter] = {
    a.kind: a for a in (QueueAdapter(), StreamAdapter(), ChannelAdapter(), WebhookAdapter())
}


def adapter_for(kind: str) -> Adapter:
    return ADAPTERS[kind]
