"""Built-in handlers (SPEC §5): ``noop``, ``log``, ``fail``; ``webhook`` (POST
to the consuming app's endpoint); ``django_task`` (runs Django Tasks enqueued
through ``groupqueues.tasks_backend``); ``sleep`` and ``poison`` for trying
workers and for tests."""

from __future__ import annotations

import json
import logging
import time

from groupqueues.handlers import Delivery, PermanentFailure, handlers

logger = logging.getLogger("groupqueues.handlers")


class HandlerFailed(Exception):
    """The built-in ``fail`` handler's error."""


class WebhookRejected(Exception):
    """The endpoint did not answer 2xx in time."""


@handlers.register("noop")
def noop(delivery: Delivery) -> None:
    """Succeeds without doing anything."""


@handlers.register("log")
def log(delivery: Delivery) -> None:
    """Logs the payload and succeeds."""
    logger.info("message %s on %s: %s", delivery.id, delivery.queue, json.dumps(delivery.payload))


@handlers.register("fail")
def fail(delivery: Delivery) -> None:
    """Always raises (the message is retried, then dies ``exhausted``)."""
    raise HandlerFailed(f"the fail handler fails every message (attempt {delivery.attempt})")


@handlers.register("sleep")
def sleep(delivery: Delivery) -> None:
    """Sleeps ``payload["seconds"]`` (default 1) and succeeds."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    time.sleep(float(payload.get("seconds", 1)))


@handlers.register("poison")
def poison(delivery: Delivery) -> None:
    """Sleeps ``payload["seconds"]`` (default 0), then succeeds unless the
    payload says ``{"poison": true}``: then it raises (retried, then dead
    ``exhausted``); ``{"poison": "fatal"}`` dies at once."""
    payload = delivery.payload if isinstance(delivery.payload, dict) else {}
    time.sleep(float(payload.get("seconds", 0)))
    if payload.get("poison") == "fatal":
        raise PermanentFailure("poison message")
    if payload.get("poison"):
        raise HandlerFailed("poison message")


@handlers.register("webhook")
def webhook(delivery: Delivery) -> None:
    """POST {id, attempt, payload, queue} to the consuming app's ``webhook_url``,
    signed (``queueproject.webhooks``); 2xx acks, anything else (or no answer)
    raises, so the message is retried with backoff (at least once)."""
    from principals.models import App
    from queueproject.webhooks import post_signed

    app = App.objects.filter(slug=delivery.app_slug).first()
    if app is None or not app.webhook_url:
        raise WebhookRejected(f"app {delivery.app_slug!r} has no webhook endpoint")
    body = {"id": str(delivery.id), "attempt": delivery.attempt, "queue": delivery.queue,
            "payload": delivery.payload}  # fmt: skip
    result = post_signed(app.webhook_url, app.webhook_secret, body, app.webhook_timeout)
    if not result.ok:
        raise WebhookRejected(result.summary)


@handlers.register("django_task")
def django_task(delivery: Delivery) -> None:
    """Run the Django Task whose result id is ``payload["task_run"]``."""
    from groupqueues.tasks_backend import task_run_execute

    task_run_execute(run_id=delivery.payload["task_run"], worker_id=delivery.worker_id)
