"""``/metrics``: every family with the right values after a scripted scenario
(enqueue, claim, ack, nack, dead) run by a real worker process, and who may
scrape (docs/observability.md)."""

from __future__ import annotations

import signal
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from groupqueues import services
from principals.models import Role
from queueproject import clock
from queueproject.models import WorkerProcess
from queueproject.workers_registry import worker_heartbeat
from sessionqueues.services import entries as session_entries
from sessionqueues.services import reservations, sessions
from store.schedules import schedule_create
from tests.conftest import with_bearer
from tests.factories import AppFactory, GroupFactory, UserFactory, make_token, member
from tests.groupqueues.workers import start_command, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def staff_scraper(*scopes: str) -> APIClient:
    user = UserFactory(is_staff=True)
    _, secret = make_token(user=user, scopes=list(scopes))
    return with_bearer(APIClient(), secret)


def scrape(client: APIClient | None = None) -> Samples:
    client = client or staff_scraper("metrics:read")
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return parse(response.content.decode())


@pytest.fixture
def queue():
    group = GroupFactory(slug="obs")
    return services.collection_create(
        group=group, name="jobs", default_max_attempts=2, retry_backoff_base=0.001,
        retry_backoff_max=0.001,
    )  # fmt: skip


def enqueue(queue: Any, payload: Any, **kwargs: Any) -> None:
    services.message_enqueue(collection=queue, payload=payload, enqueued_by="app:t", **kwargs)


def test_metrics__scenario_by_a_real_worker(queue):
    for i in range(3):
        enqueue(queue, {"n": i})
    enqueue(queue, {"poison": True})  # nacked once (retried), then dead: exhausted
    enqueue(queue, {"poison": "fatal"})  # dead at once: failed
    enqueue(queue, {"later": True}, delay_seconds=3600)  # delayed
    worker = start_command(
        "queue_worker", "--queue", "obs/jobs", "--handler", "poison", "--worker-id", "obs-w1",
        "--no-maintenance",
        QUEUE_WORKER_REGISTRY="1", QUEUE_WORKER_HEARTBEAT_SECONDS="0.2",
    )  # fmt: skip
    try:
        row = wait_for(
            lambda: WorkerProcess.objects.filter(
                id="obs-w1", counts__acked=3, counts__dead=2
            ).first(),
            timeout=40,
        )
        assert row.kind == "queue_worker" and row.queues == ["obs/jobs"]
        by_worker = scrape()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate()
    # A clean stop removes the row: the worker is no longer listed.
    assert not WorkerProcess.objects.filter(id="obs-w1").exists()
    # One message claimed and held (now that the worker is gone); the dead snapshot.
    enqueue(queue, {"held": True}, priority=1000)
    assert services.message_claim(collection=queue, worker_id="t", n=1)
    services.dead_counts_refresh()
    samples = scrape()
    key = {"group": "obs", "queue": "jobs"}
    assert value(samples, "queue_messages", **key, state="ready") == 0
    assert value(samples, "queue_messages", **key, state="delayed") == 1
    assert value(samples, "queue_messages", **key, state="claimed") == 1
    assert value(samples, "queue_messages", **key, state="dead") == 2
    assert value(samples, "queue_dead_messages", **key, reason="exhausted") == 1
    assert value(samples, "queue_dead_messages", **key, reason="failed") == 1
    assert value(samples, "queue_dead_messages", **key, reason="expired") == 0
    assert value(samples, "queue_oldest_pending_age_seconds", **key) == 0
    assert 0 <= value(samples, "queue_dead_snapshot_age_seconds") < 30
    w = {"worker": "obs-w1"}
    samples = by_worker
    assert value(samples, "queue_worker_claimed_total", **w) == 6  # 5 + the poison's retry
    assert value(samples, "queue_worker_acked_total", **w) == 3
    assert value(samples, "queue_worker_nacked_total", **w) == 1
    assert value(samples, "queue_worker_failed_total", **w) == 2
    assert value(samples, "queue_worker_lease_expiries_total", **w) == 0
    assert value(samples, "queue_worker_handler_duration_seconds_count", **w) == 6
    assert value(samples, "queue_worker_handler_duration_seconds_bucket", **w, le="+Inf") == 6
    assert value(samples, "queue_worker_handler_duration_seconds_sum", **w) >= 0
    up = [k for k in samples if k[0] == "queue_worker_up" and ("worker", "obs-w1") in k[1]]
    assert len(up) == 1


def test_metrics__oldest_pending_age(queue):
    with clock.frozen():
        enqueue(queue, {"n": 1})
        clock.advance(42)
        samples = scrape()
    assert value(samples, "queue_oldest_pending_age_seconds", group="obs", queue="jobs") == 42
    assert value(samples, "queue_messages", group="obs", queue="jobs", state="ready") == 1


def test_metrics__session_queues_and_dispatchers(settings):
    settings.SESSIONQUEUES_AUTO_MERGE = False  # three entries stay three
    app = AppFactory(slug="agentapp")
    task = sessions.task_create(app=app)
    session = sessions.session_create(task=task)
    for text in ("one", "two", "three"):
        session_entries.entry_insert(
            session_id=session.pk, entry=session_entries.NewEntry(content=text, queued_by="user:1")
        )
    sessions.session_set_agent_ready(session_id=session.pk, ready=True)
    reserved = reservations.reservation_reserve_for_agent(session_id=session.pk, holder="disp-1")
    assert reserved is not None
    worker_heartbeat(id="disp-1", kind="session_dispatch", queues=["sessions"],
                     counts={"delivered": 5, "failed": 2}, started_at=clock.now())  # fmt: skip
    samples = scrape()
    assert value(samples, "session_queue_entries", app="agentapp") == 2
    assert value(samples, "session_queue_reserved", app="agentapp") == 1
    assert value(samples, "session_dispatcher_deliveries_total", worker="disp-1") == 5
    assert value(samples, "session_dispatcher_failures_total", worker="disp-1") == 2


def test_metrics__schedule_lateness():
    group = GroupFactory(slug="sched")
    services.collection_create(group=group, name="jobs")
    schedule = schedule_create(group=group, name="nightly", collection="jobs", expression="@daily")
    overdue = clock.now() - timedelta(seconds=90)
    type(schedule).objects.filter(pk=schedule.pk).update(next_at=overdue)
    samples = scrape()
    late = value(samples, "store_schedule_lateness_seconds", group="sched", schedule="nightly")
    assert 90 <= late < 120


def test_metrics__outbox_rows_by_state_and_stream_consumer_lag():
    from django.db import transaction

    from store import outbox, outbox_targets, streams
    from store.models import OutboxMessage, OutboxState

    group = GroupFactory(slug="store-metrics")
    services.collection_create(group=group, name="jobs")
    with transaction.atomic():
        for i in range(3):
            outbox.publish(outbox_targets.queue(group, "jobs"), {"n": i})
    OutboxMessage.objects.filter(pk=OutboxMessage.objects.order_by("pk")[0].pk).update(
        state=OutboxState.DEAD
    )
    done = OutboxMessage.objects.order_by("pk")[1]
    OutboxMessage.objects.filter(pk=done.pk).update(state=OutboxState.DONE, done_at=clock.now())
    topic = streams.topic_create(group=group, name="orders")
    streams.append(topic=topic, entries=[streams.StreamEntryIn(i) for i in range(5)])
    streams.consumer_commit(topic=topic, name="billing", offset=2)
    samples = scrape()
    assert value(samples, "store_outbox_messages", group="store-metrics", state="pending") == 1
    assert value(samples, "store_outbox_messages", group="store-metrics", state="dead") == 1
    assert not any(  # delivered rows are never counted
        name == "store_outbox_messages" and ("state", "done") in labels for name, labels in samples
    )
    lag = value(samples, "store_stream_consumer_lag", group="store-metrics", topic="orders",
                consumer="billing")  # fmt: skip
    assert lag == 3


# ------------------------------------------------------------------ access


def test_metrics__anonymous_is_refused_with_401():
    response = APIClient().get("/metrics")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("scopes", [["queue:read"], ["queue:admin", "session:read"]])
def test_metrics__a_token_without_metrics_read_is_refused(scopes):
    response = staff_scraper(*scopes).get("/metrics")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_metrics__non_staff_users_and_app_tokens_are_refused():
    group = GroupFactory(slug="g")
    user = member(group, Role.OWNER)
    _, secret = make_token(user=user, scopes=["metrics:read"])
    assert with_bearer(APIClient(), secret).get("/metrics").status_code == 403
    _, app_secret = make_token(app=AppFactory(group=group), scopes=["metrics:read"])
    assert with_bearer(APIClient(), app_secret).get("/metrics").status_code == 403


def test_metrics__refused_from_outside_the_allowed_networks(settings):
    client = staff_scraper("metrics:read")
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    response = client.get("/metrics")  # the test client is 127.0.0.1
    assert response.status_code == 403
    assert "address" in response.json()["error"]["message"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200


def test_metrics__default_networks_are_loopback_only():
    client = staff_scraper("metrics:read")
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.5").status_code == 403


def test_metrics__token_optional_when_turned_off(settings):
    settings.METRICS_REQUIRE_TOKEN = False
    assert APIClient().get("/metrics").status_code == 200
    assert APIClient().get("/metrics", REMOTE_ADDR="192.168.1.5").status_code == 403


def test_metrics__prometheus_accept_header_gets_text():
    client = staff_scraper("metrics:read")
    accept = "application/openmetrics-text;version=1.0.0;q=0.75,text/plain;version=0.0.4;q=0.5"
    response = client.get("/metrics", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert b"# TYPE queue_messages gauge" in response.content
