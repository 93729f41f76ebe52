"""Built-in deliverers: ``webhook`` (the app's signed HTTP endpoint), ``log``
(logs the entry; the agent stays ready) and ``fail`` (always fails; tests)."""

from __future__ import annotations

import logging

from principals.models import App
from queueproject import webhooks
from sessionqueues.delivery import Delivery, DeliveryFailed, DeliveryUncertain, deliverer

logger = logging.getLogger("sessionqueues.deliver")

WEBHOOK_TIMEOUT = 10.0


@deliverer("webhook")
def webhook(delivery: Delivery) -> bool:
    """POST the delivery, signed, to the app's ``webhook_url``. A 2xx answer is
    delivered; ``{"ready": true}`` in the answer keeps the agent ready."""
    app = App.objects.get(slug=delivery.app)
    if not app.webhook_url:
        raise DeliveryFailed(f"app {app.slug} has no webhook_url")
    result = webhooks.post_signed(
        app.webhook_url, app.webhook_secret, delivery.as_payload(), timeout=WEBHOOK_TIMEOUT
    )
    if result.uncertain:
        raise DeliveryUncertain(result.summary)
    if not result.ok:
        raise DeliveryFailed(result.summary)
    return isinstance(result.data, dict) and result.data.get("ready") is True


@deliverer("log")
def log(delivery: Delivery) -> bool:
    """Log the entry (a stand-in agent that is always ready)."""
    logger.info("entry for session %s: %s", delivery.session_id, delivery.entry["content"][:200])
    return True


@deliverer("fail")
def fail(delivery: Delivery) -> bool:
    """Refuse every entry (it goes back to its position)."""
    raise DeliveryFailed("the fail deliverer refuses every entry")
