"""Crash safety of workers on PostgreSQL: a worker killed with SIGKILL loses
no message; its claims are processed by another worker once their lease
lapses (SPEC §2)."""

from __future__ import annotations

import signal
import uuid

import pytest
from django.conf import settings as django_settings

from groupqueues import services
from groupqueues.models import Message, MessageState
from tests.db_outage import terminate_other_sessions
from tests.factories import GroupFactory
from tests.groupqueues.workers import Started, outcome_lines, start_command, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TOTAL = 2000
POISON_EVERY = 200  # 10 poison messages


def worker(worker_id: str) -> Started:
    return start_command(
        "queue_worker", "--queue", "crash/work", "--handler", "poison", "--concurrency", "2",
        "--batch", "20", "--worker-id", worker_id, "--no-maintenance",
        LOG_LEVEL="INFO",
    )  # fmt: skip


def kill_mid_run(victim: Started) -> set[uuid.UUID]:
    """SIGKILL the victim while it holds claims; returns the ids it held."""
    wait_for(lambda: Message.objects.filter(claimed_by="victim").count() >= 20, every=0.01)
    victim.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)
    held = set(
        Message.objects.filter(state=MessageState.CLAIMED, claimed_by="victim").values_list(
            "id", flat=True
        )
    )
    assert held, "the victim died holding claims"
    return held


def test_crash__sigkilled_worker_loses_nothing():
    group = GroupFactory(slug="crash")
    queue = services.collection_create(
        group=group, name="work", visibility_timeout=2, default_max_attempts=3,
        retry_backoff_base=0.01, retry_backoff_max=0.01,
    )  # fmt: skip
    poison_ids = set()
    for start in range(0, TOTAL, 500):
        news = [
            services.NewMessage(payload={"n": n, "poison": n % POISON_EVERY == 0, "seconds": 0.005})
            for n in range(start, start + 500)
        ]
        results = services.message_enqueue_batch(
            collection=queue, messages=news, enqueued_by="app:test"
        )
        poison_ids |= {r.id for r, new in zip(results, news, strict=True) if new.payload["poison"]}
    victim, survivor = worker("victim"), worker("survivor")
    try:
        held_by_victim = kill_mid_run(victim)
        wait_for(
            lambda: not Message.objects.filter(state__in=["ready", "claimed"]).exists(),
            timeout=60,
            every=0.2,
        )
        survivor.send_signal(signal.SIGTERM)
        _, stderr = survivor.communicate(timeout=30)
    finally:
        victim.kill()
        survivor.kill()
    assert survivor.returncode == 0, stderr[-2000:]

    dead = Message.objects.all()
    assert {m.id for m in dead} == poison_ids
    assert {(m.state, m.dead_reason) for m in dead} == {("dead", "exhausted")}
    acked_later = {
        line["id"]
        for line in outcome_lines(stderr)
        if line["outcome"] == "acked" and line["attempt"] >= 2
    }
    rescued = {str(i) for i in held_by_victim - poison_ids}
    assert rescued and rescued <= acked_later


def test_reconnect__worker_survives_its_connections_being_killed():

    group = GroupFactory(slug="flaky")
    queue = services.collection_create(group=group, name="work")

    def enqueue(n):
        news = [services.NewMessage(payload={"n": i}) for i in range(n)]
        services.message_enqueue_batch(collection=queue, messages=news, enqueued_by="t")

    def drained():
        return not Message.objects.exists()

    proc = start_command("queue_worker", "--queue", "flaky/work", "--handler", "noop")
    try:
        enqueue(10)
        wait_for(drained)
        assert terminate_other_sessions(), "the worker had connections"
        enqueue(10)
        wait_for(drained)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    if not django_settings.DATABASE_TRANSACTION_POOLER:
        # Behind a pooler the killed sessions were the pooler's: it opens new
        # ones and the worker never sees a dropped connection (it drained).
        assert "database unavailable" in stderr or "listen connection lost" in stderr
