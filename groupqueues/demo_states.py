"""Demo states for ``seed_demo`` (idempotent): queues no demo trigger drains,
so the admin and the API show every state a message can be in.

- ``acme/orders``: ready messages, a delayed one (due in a day) and one dead
  message for each reason (``failed``, ``exhausted``, ``expired``);
- ``acme/reports``: paused, holding ready messages nobody may claim.

Every message has an idempotency key, so a re-run adds nothing; a dead
message is made only when its keyed enqueue created it (it is then the only
high-priority message in ``orders`` and the next claim takes it).
"""

from __future__ import annotations

from typing import Any

from groupqueues import services
from groupqueues.exceptions import CollectionNotFound
from groupqueues.models import Collection, DeadReason
from principals.models import Group

ORDERS = "orders"
REPORTS = "reports"
DEMO_WORKER = "demo-seed"
DELAY_SECONDS = 24 * 3600
KILL_PRIORITY = 9  # above every demo message, so the claim that follows takes it

READY_ORDERS = [
    {"order": 5001, "items": 2, "total": "19.90"},
    {"order": 5002, "items": 1, "total": "7.50"},
    {"order": 5003, "items": 4, "total": "42.00"},
]
DELAYED_ORDER = {"order": 5004, "reminder": "payment due"}
DEAD_ORDERS = {
    DeadReason.FAILED: {"order": 4001, "error": "card declined"},
    DeadReason.EXHAUSTED: {"order": 4002, "error": "warehouse API timed out"},
    DeadReason.EXPIRED: {"order": 4003, "note": "offer ended before anyone took it"},
}
PAUSED_REPORTS = [{"report": "weekly-sales"}, {"report": "stock-levels"}]


def _queue(group: Group, name: str, log: Any) -> Collection:
    try:
        return services.collection_get(group=group, name=name)
    except CollectionNotFound:
        log(f"queue {group.slug}/{name}")
        return services.collection_create(group=group, name=name)


def _enqueue(collection: Collection, key: str, payload: Any, **options: Any) -> bool:
    result = services.message_enqueue(
        collection=collection,
        payload=payload,
        enqueued_by="demo",
        idempotency_key=f"demo-{collection.name}-{key}",
        **options,
    )
    return result.created


def _kill(collection: Collection, reason: str) -> None:
    """Make the just-enqueued high-priority message dead for ``reason``."""
    if reason == DeadReason.EXPIRED:
        services.messages_sweep_expired(collection=collection)
        return
    (held,) = services.message_claim(collection=collection, worker_id=DEMO_WORKER, n=1)
    if reason == DeadReason.FAILED:
        services.message_fail(
            collection=collection, id=held.id, claim_token=held.claim_token,
            error="PaymentDeclined: card declined (demo)",
        )  # fmt: skip
    else:  # exhausted: its one attempt is used, the nack ends it
        services.message_nack(
            collection=collection, id=held.id, claim_token=held.claim_token,
            error="TimeoutError: warehouse API did not answer within 30 s (demo)",
        )  # fmt: skip


def seed(*, admin_user: Any, log: Any) -> None:
    acme = Group.objects.filter(slug="acme").first()
    if acme is None:  # the principals demo did not run
        return
    orders = _queue(acme, ORDERS, log)
    for reason, payload in DEAD_ORDERS.items():
        options: dict[str, Any] = {"priority": KILL_PRIORITY, "max_attempts": 1}
        if reason == DeadReason.EXPIRED:
            options["expires_in_seconds"] = 0
        if _enqueue(orders, f"dead-{reason}", payload, **options):
            _kill(orders, reason)
            log(f"a dead ({reason}) message in acme/{ORDERS}")
    created = sum(_enqueue(orders, f"ready-{i}", p) for i, p in enumerate(READY_ORDERS))
    if _enqueue(orders, "delayed", DELAYED_ORDER, delay_seconds=DELAY_SECONDS):
        created += 1
    if created:
        log(f"{created} ready or delayed messages in acme/{ORDERS}")

    reports = _queue(acme, REPORTS, log)
    if not reports.paused:
        services.collection_update(collection=reports, paused=True)
        log(f"paused acme/{REPORTS}")
    if created := sum(_enqueue(reports, f"r{i}", p) for i, p in enumerate(PAUSED_REPORTS)):
        log(f"{created} messages in the paused acme/{REPORTS}")
