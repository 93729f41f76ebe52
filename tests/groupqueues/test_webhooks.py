"""Webhook consumers: signed POSTs to the app's endpoint (SPEC §2)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from groupqueues import services, trigger_services
from groupqueues.models import Message
from principals.services import app_set_webhook
from queueproject import webhooks
from tests.factories import AppFactory, GroupFactory
from tests.groupqueues.workers import run_command

SECRET = "s3cret-of-the-app"


class Endpoint:
    """A local HTTP server answering ``status`` (after ``delay`` seconds) and
    recording what it received."""

    def __init__(self, status: int = 200, delay: float = 0.0):
        self.status, self.delay = status, delay
        self.received: list[tuple[dict[str, str], bytes]] = []  # (headers, body) per request
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                endpoint.received.append((dict(self.headers), body))
                time.sleep(endpoint.delay)
                self.send_response(endpoint.status)
                self.end_headers()
                self.wfile.write(b"boom" if endpoint.status >= 300 else b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint_factory():
    made = []

    def make(**kwargs):
        made.append(Endpoint(**kwargs))
        return made[-1]

    yield make
    for e in made:
        e.close()


@pytest.fixture
def setup(db):
    group = GroupFactory(slug="hooks")
    app = AppFactory(slug="receiver", group=group)
    queue = services.collection_create(
        group=group,
        name="events",
        default_max_attempts=2,
        retry_backoff_base=0.001,
        retry_backoff_max=0.001,
    )
    trigger_services.trigger_create(
        group=group, collection_name="events", handler="webhook", shared=True
    )
    return app, queue


@pytest.mark.django_db(transaction=True)
def test_webhook__delivers_signed_message_and_acks_on_2xx(setup, endpoint_factory):
    app, queue = setup
    server = endpoint_factory(status=204)
    app_set_webhook(app=app, url=server.url, secret=SECRET)
    message_id = services.message_enqueue(
        collection=queue, payload={"order": 42}, enqueued_by="app:test"
    ).id
    done = run_command("queue_worker", "--until-empty")
    assert done.returncode == 0, done.stderr
    assert not Message.objects.exists()
    ((headers, body),) = server.received
    headers = {k.lower(): v for k, v in headers.items()}
    timestamp = int(headers[webhooks.TIMESTAMP_HEADER.lower()])
    assert abs(timestamp - time.time()) < 60
    assert webhooks.verify(SECRET, body, timestamp, headers[webhooks.SIGNATURE_HEADER.lower()])
    sent = json.loads(body)
    assert sent == {
        "id": str(message_id),
        "attempt": 1,
        "queue": "hooks/events",
        "payload": {"order": 42},
    }


@pytest.mark.django_db(transaction=True)
def test_webhook__500_is_retried_then_dead_exhausted(setup, endpoint_factory):
    app, queue = setup
    server = endpoint_factory(status=500)
    app_set_webhook(app=app, url=server.url, secret=SECRET)
    services.message_enqueue(collection=queue, payload={"x": 1}, enqueued_by="app:test")
    done = run_command("queue_worker", "--max-messages", "2")
    assert done.returncode == 0, done.stderr
    message = Message.objects.get()
    assert (message.state, message.dead_reason, message.attempt) == ("dead", "exhausted", 2)
    assert message.last_error is not None
    assert "HTTP 500: boom" in message.last_error
    assert len(server.received) == 2


@pytest.mark.django_db(transaction=True)
def test_webhook__timeout_is_retried_then_dead_exhausted(setup, endpoint_factory):
    app, queue = setup
    server = endpoint_factory(status=200, delay=1.0)
    app_set_webhook(app=app, url=server.url, secret=SECRET, timeout=0.2)
    services.message_enqueue(collection=queue, payload={"x": 1}, enqueued_by="app:test")
    done = run_command("queue_worker", "--max-messages", "2")
    assert done.returncode == 0, done.stderr
    message = Message.objects.get()
    assert (message.state, message.dead_reason) == ("dead", "exhausted")
    assert message.last_error is not None
    assert "timed out" in message.last_error


@pytest.mark.django_db(transaction=True)
def test_webhook__connection_refused_is_a_nack(setup):
    app, queue = setup
    app_set_webhook(app=app, url="http://127.0.0.1:9/hook", secret=SECRET)
    services.message_enqueue(collection=queue, payload={"x": 1}, enqueued_by="app:test")
    done = run_command("queue_worker", "--max-messages", "2")
    assert done.returncode == 0, done.stderr
    message = Message.objects.get()
    assert message.dead_reason == "exhausted"
    assert message.last_error is not None
    assert "not sent: ConnectError" in message.last_error
