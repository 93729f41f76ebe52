"""Many consumers, bounded threads and connections (issue 19): a worker
serving 500 apps under one shared trigger runs on ``concurrency`` slots,
opens at most ``connections_needed`` database connections (sampled from
``pg_stat_activity`` by its application name while it drains), and delivers
to every app's consumer in turn; a worker whose settings would exceed its
connection budget refuses to start."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection, connections

from groupqueues import services
from groupqueues.models import Collection, Consumer, Message, Trigger
from groupqueues.trigger_services import consumers_sync
from groupqueues.worker import Worker, WorkerOptions, connections_needed, lanes_of_consumers
from groupqueues.worker import supervisor as supervisor_module
from principals.models import App, Group
from tests.conftest import is_postgres
from tests.factories import AppFactory, GroupFactory
from tests.groupqueues.recorder.consumers import recorded
from tests.groupqueues.workers import outcome_lines, run_command, start_command, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

APPS = 500
BATCH = 2
# 1,000 full claims or more: every app's turn comes before the queue runs dry.
MESSAGES = 3 * APPS
CONCURRENCY = 4
RECORDER = "tests.groupqueues.recorder.settings"


def tenants(
    n: int, *, handler: str = "record", concurrency: int = CONCURRENCY
) -> tuple[Group, Collection]:
    """A group with ``n`` apps, a queue and a shared trigger on it."""
    group = GroupFactory(slug="tenants")
    queue = services.collection_create(group=group, name="jobs")
    App.objects.bulk_create([App(slug=f"t{i:03d}", name=f"T{i}", group=group) for i in range(n)])
    # Written directly: the test process does not register the recorder's handler.
    trigger = Trigger.objects.create(
        group=group, collection_name="jobs", handler=handler, shared=True, batch_size=BATCH,
        concurrency=concurrency,
    )  # fmt: skip
    consumers_sync(trigger=trigger)
    return group, queue


def enqueue(queue: Collection, n: int, start: int = 0) -> None:
    news = [services.NewMessage(payload={"n": i}) for i in range(start, start + n)]
    for i in range(0, n, services.MAX_BATCH):
        services.message_enqueue_batch(collection=queue, messages=news[i : i + services.MAX_BATCH],
                                       enqueued_by="app:test")  # fmt: skip


def connections_named(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name])
        return int(cursor.fetchone()[0])


def threads_of(pid: int) -> int | None:
    """The process's thread count (Linux), None where /proc is missing."""
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return None


def test_worker__500_apps_under_one_shared_trigger_on_bounded_connections(tmp_path: Path) -> None:
    _, queue = tenants(APPS)
    assert Consumer.objects.count() == APPS
    enqueue(queue, MESSAGES)
    record_to = tmp_path / "deliveries"
    worker_id = "tenants-worker"
    proc = start_command(
        "queue_worker", "--until-empty", "--worker-id", worker_id, "--concurrency",
        str(CONCURRENCY), DJANGO_SETTINGS_MODULE=RECORDER, RECORD_DELIVERIES_TO=str(record_to),
    )  # fmt: skip
    bound = connections_needed(concurrency=CONCURRENCY, listen=is_postgres())
    samples: list[int] = []
    threads: list[int] = []
    try:
        while proc.poll() is None:
            if is_postgres():
                samples.append(connections_named(f"queue_worker {worker_id}"))
            count = threads_of(proc.proc.pid)
            if count is not None and proc.poll() is None:
                threads.append(count)
            time.sleep(0.02)
        _, stderr = proc.communicate()
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert not Message.objects.exists()
    deliveries = recorded(str(record_to))
    assert len(deliveries) == MESSAGES and len({m for _, m in deliveries}) == MESSAGES
    per_app = Counter(app for app, _ in deliveries)
    assert set(per_app) == {f"t{i:03d}" for i in range(APPS)}  # every consumer was served
    # In turn: at most ceil(claims / APPS) claims of at most BATCH each per app.
    assert max(per_app.values()) <= BATCH * -(-MESSAGES // APPS)
    lines = outcome_lines(stderr)
    assert Counter(x["app"] for x in lines) == per_app  # the outcome lines name the same app
    if is_postgres():
        assert 2 <= max(samples) <= bound, samples
    if threads:
        assert max(threads) <= CONCURRENCY + 3, threads


def test_worker__consumers_of_two_triggers_on_one_queue_share_it(tmp_path: Path) -> None:
    group, queue = tenants(3)
    Trigger.objects.create(group=group, collection_name="jobs", handler="noop", batch_size=1)
    consumers_sync()
    enqueue(queue, 60)
    record_to = tmp_path / "deliveries"
    done = run_command(
        "queue_worker", "--until-empty", "--batch", "1",
        DJANGO_SETTINGS_MODULE=RECORDER, RECORD_DELIVERIES_TO=str(record_to),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    by_handler = Counter(x["handler"] for x in outcome_lines(done.stderr))
    assert by_handler["noop"] > 0 and by_handler["record"] > 0
    assert sum(by_handler.values()) == 60
    assert {app for app, _ in recorded(str(record_to))} == {"t000", "t001", "t002"}


def test_worker__refuses_to_start_over_its_connection_budget():
    done = run_command("queue_worker", "--concurrency", "10", "--until-empty",
                       QUEUE_WORKER_MAX_CONNECTIONS="11")  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    needed = connections_needed(concurrency=10, listen=is_postgres())
    assert f"needs up to {needed} database connections" in lines[0]
    assert "QUEUE_WORKER_MAX_CONNECTIONS=11" in lines[0]


def test_worker__default_slots_count_against_the_budget_too():
    done = run_command("queue_worker", "--until-empty", QUEUE_WORKER_CONCURRENCY="40")
    assert done.returncode != 0
    assert "QUEUE_WORKER_MAX_CONNECTIONS=32" in done.stderr
    needed = connections_needed(concurrency=40, listen=is_postgres())
    done = run_command("queue_worker", "--until-empty", QUEUE_WORKER_CONCURRENCY="40",
                       QUEUE_WORKER_MAX_CONNECTIONS=str(needed))  # fmt: skip
    assert done.returncode == 0, done.stderr  # exactly at the budget: it runs


def test_connections_needed__slots_plus_main_and_acker_plus_listen():
    assert connections_needed(concurrency=4, listen=True) == 7
    assert connections_needed(concurrency=4, listen=False) == 6


def test_worker__reload_serves_apps_added_and_stops_serving_apps_removed(monkeypatch):
    """The consumers are re-read while the worker runs (every RELOAD_EVERY
    seconds, shortened here): an app added gets deliveries, one removed none."""
    monkeypatch.setattr(supervisor_module, "RELOAD_EVERY", 0.1)
    group, queue = tenants(2, handler="noop", concurrency=2)
    seen: list[str | None] = []

    def source():
        return lanes_of_consumers(Consumer.objects.runnable())

    worker = Worker(source(), WorkerOptions(worker_id="reloading", concurrency=2,
                                            maintenance=False), lane_source=source)  # fmt: skip
    worker.slot_loop.handlers["noop"] = lambda delivery: seen.append(delivery.app_slug)

    def run() -> None:
        try:
            worker.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        enqueue(queue, 10)
        wait_for(lambda: len(seen) == 10)
        assert set(seen) == {"t000", "t001"}
        AppFactory(slug="t002", group=group)  # its consumer is created (signal)
        App.objects.filter(slug="t000").delete()  # and this one's deleted
        wait_for(lambda: {lane.app_slug for r in worker.pool.rotations() for lane in r.lanes}
                 == {"t001", "t002"})  # fmt: skip
        enqueue(queue, 20, start=10)
        wait_for(lambda: len(seen) == 30)
        assert set(seen[10:]) == {"t001", "t002"}
    finally:
        worker.request_stop()
        thread.join(30)
    assert not thread.is_alive()
