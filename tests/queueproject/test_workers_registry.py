"""The worker registry (``queueproject.workers_registry``): rows appear,
heartbeat and expire; ``manage.py queue_workers``; the admin's Workers page
and the message page's link from ``claimed_by`` to its worker."""

from __future__ import annotations

import json
import signal

import pytest
from django.core.management import call_command

from groupqueues import services
from queueproject import clock
from queueproject.models import WorkerProcess
from queueproject.workers_registry import (
    Registration,
    worker_deregister,
    worker_heartbeat,
    workers_expire,
    workers_live,
)
from tests.factories import GroupFactory, UserFactory
from tests.groupqueues.workers import start_command, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def beat(id: str, **counts: int) -> WorkerProcess:
    return worker_heartbeat(id=id, kind="queue_worker", queues=["g/q"], counts=counts,
                            started_at=clock.now())  # fmt: skip


def test_heartbeat__creates_then_refreshes_the_row():
    with clock.frozen():
        beat("w1", acked=1)
        first = WorkerProcess.objects.get(id="w1")
        clock.advance(5)
        beat("w1", acked=7)
    row = WorkerProcess.objects.get(id="w1")
    assert row.counts == {"acked": 7}
    assert (row.last_seen_at - first.last_seen_at).total_seconds() == 5
    assert row.started_at == first.started_at
    assert row.host and row.pid and row.version


def test_expire__deletes_rows_not_seen_for_the_expiry_time(settings):
    settings.QUEUE_WORKER_EXPIRE_SECONDS = 30
    with clock.frozen():
        beat("old")
        clock.advance(20)
        beat("young")
        clock.advance(15)  # old: 35 s unseen; young: 15 s
        assert [w.id for w in workers_live()] == ["young"]
        assert workers_expire() == 1
    assert list(WorkerProcess.objects.values_list("id", flat=True)) == ["young"]
    assert worker_deregister(id="young") and not worker_deregister(id="young")


def test_registration__thread_heartbeats_and_removes_its_row_at_stop(settings):
    settings.QUEUE_WORKER_REGISTRY = True
    counts = {"acked": 0}
    reg = Registration(worker_id="thread-w", kind="queue_worker", queues=lambda: ["g/q"],
                       counts=lambda: dict(counts), interval=0.05)  # fmt: skip
    reg.start()
    try:
        wait_for(lambda: WorkerProcess.objects.filter(id="thread-w").exists(), timeout=10)
        counts["acked"] = 3
        wait_for(lambda: WorkerProcess.objects.filter(id="thread-w", counts__acked=3).exists())
    finally:
        reg.stop()
    assert not WorkerProcess.objects.filter(id="thread-w").exists()


def test_registration__off_writes_nothing(settings):
    settings.QUEUE_WORKER_REGISTRY = False
    reg = Registration(worker_id="off", kind="queue_worker", queues=list, counts=dict)
    reg.start()
    reg.stop()
    assert not WorkerProcess.objects.exists()


def test_a_killed_worker_leaves_its_row_and_a_live_one_expires_it(settings):
    group = GroupFactory(slug="reg")
    services.collection_create(group=group, name="jobs")
    worker = start_command(
        "queue_worker", "--queue", "reg/jobs", "--handler", "noop", "--worker-id", "doomed",
        "--no-maintenance", QUEUE_WORKER_REGISTRY="1", QUEUE_WORKER_HEARTBEAT_SECONDS="0.2",
    )  # fmt: skip
    try:
        first = wait_for(lambda: WorkerProcess.objects.filter(id="doomed").first())
        wait_for(lambda: WorkerProcess.objects.get(id="doomed").last_seen_at > first.last_seen_at)
        assert first.queues == ["reg/jobs"] and first.kind == "queue_worker"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.communicate()
    assert WorkerProcess.objects.filter(id="doomed").exists()  # no clean exit
    settings.QUEUE_WORKER_EXPIRE_SECONDS = 60
    settings.QUEUE_WORKER_REGISTRY = True
    with clock.frozen():
        clock.advance(61)
        Registration(worker_id="survivor", kind="queue_worker", queues=list, counts=dict).beat()
    assert list(WorkerProcess.objects.values_list("id", flat=True)) == ["survivor"]


def test_queue_workers_command__text_and_json(capsys):
    beat("cmd-w", claimed=4, acked=3)
    call_command("queue_workers")
    out = capsys.readouterr().out
    assert "cmd-w  queue_worker" in out and "claimed=4 acked=3" in out and "queues=g/q" in out
    call_command("queue_workers", "--json")
    data = json.loads(capsys.readouterr().out)
    assert [(d["id"], d["counts"]["acked"], d["queues"]) for d in data] == [("cmd-w", 3, ["g/q"])]


def test_queue_workers_command__none(capsys):
    call_command("queue_workers", "--expire")
    assert capsys.readouterr().out.strip() == "No live workers."


def test_admin__workers_page_and_the_claimed_by_link(client):
    admin = UserFactory(is_staff=True, is_superuser=True)
    client.force_login(admin)
    beat("adm-w", acked=2)
    page = client.get("/admin/queueproject/workerprocess/")
    assert page.status_code == 200 and b"adm-w" in page.content
    queue = services.collection_create(group=GroupFactory(slug="adm"), name="jobs")
    services.message_enqueue(collection=queue, payload={}, enqueued_by="app:t")
    (claimed,) = services.message_claim(collection=queue, worker_id="adm-w", n=1)
    message = services.message_get(collection=queue, id=claimed.id)
    detail = client.get(f"/admin/groupqueues/message/{message.pk}/change/")
    assert detail.status_code == 200
    assert b'href="/admin/queueproject/workerprocess/adm-w/change/"' in detail.content
