"""Exactly-once claims with real competing processes, and the races at a lease
deadline (threads with their own connections and their own clocks)."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.models import Message
from queueproject import clock
from tests.conftest import ROOT, is_postgres, subprocess_env
from tests.factories import GroupFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _fill(queue, count):
    for start in range(0, count, 500):
        services.message_enqueue_batch(
            collection=queue,
            messages=[
                services.NewMessage(payload=i) for i in range(start, min(count, start + 500))
            ],
            enqueued_by="app:test",
        )


def _run_workers(queue, processes, tmp_path):
    """Start ``processes`` claim workers together; their stdout lines."""
    go_file = tmp_path / "go"
    env = subprocess_env()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.groupqueues.claim_worker",
                str(queue.pk),
                str(i),
                str(go_file),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    for proc in procs:  # every worker is connected and waiting
        assert proc.stdout is not None and proc.stderr is not None  # both are PIPEs
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    go_file.touch()
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, stderr) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, stderr
        assert "locked" not in stderr
    return [line for stdout, _ in outputs for line in stdout.splitlines()]


def _assert_exactly_once(queue, lines, count):
    claimed = Counter(line.split()[0] for line in lines)
    assert len(claimed) == count, "some messages were never claimed"
    assert max(claimed.values()) == 1, "a message was claimed twice"
    assert all(line.endswith(" 1") for line in lines), "an ack of a held claim did not land"
    assert services.collection_depth(collection=queue) == 0
    assert not Message.objects.filter(collection=queue).exists()


@pytest.mark.postgres
def test_claim__exactly_once_with_8_processes_on_postgres(tmp_path):
    queue = services.collection_create(group=GroupFactory(), name="race", visibility_timeout=300)
    _fill(queue, 5000)
    lines = _run_workers(queue, 8, tmp_path)
    _assert_exactly_once(queue, lines, 5000)


def test_claim__exactly_once_with_4_processes(tmp_path):
    if is_postgres():
        pytest.skip("the PostgreSQL variant runs 8 processes")
    queue = services.collection_create(group=GroupFactory(), name="race", visibility_timeout=300)
    _fill(queue, 1000)
    lines = _run_workers(queue, 4, tmp_path)
    _assert_exactly_once(queue, lines, 1000)


# ---------------------------------------------------------------- lease races


@pytest.fixture
def thread_clocks(monkeypatch):
    """Each thread may set ``local.now``; ``clock.now()`` answers it there, so
    two threads can stand on either side of a lease deadline."""
    local = threading.local()
    real = clock.now
    monkeypatch.setattr(clock, "now", lambda: getattr(local, "now", None) or real())
    return local


def _both(local, a, b):
    """Run the (fn, now) pairs ``a`` and ``b`` at once in two threads, each with
    its own connection and its own time; their results (or exceptions)."""
    barrier = threading.Barrier(2)
    results: list = [None, None]

    def run(index, fn, at):
        local.now = at
        try:
            barrier.wait()
            results[index] = fn()
        except Exception as exc:  # the outcome is what the test inspects
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, *pair)) for i, pair in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def _ack(queue, m):
    return lambda: services.message_ack(collection=queue, id=m.id, claim_token=m.claim_token)


def _extend(queue, m):
    return lambda: services.message_extend(
        collection=queue, id=m.id, claim_token=m.claim_token, visibility_timeout=60
    )


def _claim_one_held(queue):
    """Enqueue a message and claim it for worker "a"; (message id, claim, the
    moments just before and just after its lease deadline)."""
    message_id = services.message_enqueue(collection=queue, payload=1, enqueued_by="t").id
    (held,) = services.message_claim(collection=queue, worker_id="a", visibility_timeout=5)
    tick = timedelta(milliseconds=1)
    return message_id, held, held.lease_expires_at - tick, held.lease_expires_at + tick


ITERATIONS = 40


def test_race__ack_vs_reclaim_at_the_deadline(thread_clocks):
    queue = services.collection_create(group=GroupFactory(), name="deadline")
    for _ in range(ITERATIONS):
        message_id, held, before, after = _claim_one_held(queue)
        acked, reclaimed = _both(
            thread_clocks,
            (_ack(queue, held), before),
            (lambda: services.messages_reclaim_expired(collection=queue), after),
        )
        row = Message.objects.filter(id=message_id).first()
        if acked is None:  # the ack landed: nothing may bring the message back
            assert reclaimed == 0
            assert row is None
        else:
            assert isinstance(acked, err.LeaseLost)
            assert reclaimed == 1
            assert row is not None
            assert row.state == "ready"
            services.message_cancel(collection=queue, id=message_id)


def test_race__ack_vs_new_claim_at_the_deadline(thread_clocks):
    queue = services.collection_create(group=GroupFactory(), name="deadline")
    for _ in range(ITERATIONS):
        message_id, held, before, after = _claim_one_held(queue)
        acked, claimed = _both(
            thread_clocks,
            (_ack(queue, held), before),
            (lambda: services.message_claim(collection=queue, worker_id="b"), after),
        )
        assert not isinstance(claimed, Exception), claimed
        if acked is None:  # acked: never handed out again
            assert claimed == []
            assert not Message.objects.filter(id=message_id).exists()
        else:
            assert isinstance(acked, err.LeaseLost)
            assert [m.id for m in claimed] == [message_id]
            services.message_cancel(collection=queue, id=message_id)


def test_race__late_extend_never_takes_the_message_back(thread_clocks):
    queue = services.collection_create(group=GroupFactory(), name="deadline")
    for _ in range(ITERATIONS):
        message_id, held, before, after = _claim_one_held(queue)
        extended, claimed = _both(
            thread_clocks,
            (_extend(queue, held), before),
            (lambda: services.message_claim(collection=queue, worker_id="b"), after),
        )
        row = Message.objects.get(id=message_id)
        if isinstance(extended, err.LeaseLost):
            (new,) = claimed
            assert (row.claim_token, row.claimed_by) == (new.claim_token, "b")
        else:
            assert not isinstance(extended, Exception), extended
            assert claimed == []
            assert (row.claim_token, row.claimed_by) == (held.claim_token, "a")
        services.message_cancel(collection=queue, id=message_id)


def _enqueue_until_gone(queue, started, result):
    """Enqueue (single and batches in turn) until the collection is gone; how
    many enqueues landed goes into ``result``."""
    sent = 0
    try:
        while True:
            if sent % 2:
                services.message_enqueue(collection=queue, payload=sent, enqueued_by="t")
            else:
                services.message_enqueue_batch(
                    collection=queue, enqueued_by="t",
                    messages=[services.NewMessage(payload=i) for i in range(20)],
                )  # fmt: skip
            sent += 1
            started.set()
    except err.CollectionNotFound:
        result.append(sent)
    finally:
        started.set()
        connection.close()


@pytest.mark.parametrize("delete", ["collection", "group"])
def test_race__enqueue_vs_collection_delete_leaves_no_orphans(delete):
    # Message.collection has no database constraint: the enqueue locks the
    # collection row, and the delete locks it before the cascade. Whoever
    # wins, no message outlives its collection.
    for i in range(10):
        group = GroupFactory()
        queue = services.collection_create(group=group, name=f"doomed-{i}")
        started = threading.Event()
        result: list = []
        enqueuer = threading.Thread(target=_enqueue_until_gone, args=(queue, started, result))
        enqueuer.start()
        started.wait(10)
        time.sleep(random.uniform(0, 0.01))
        (group if delete == "group" else queue).delete()
        enqueuer.join(30)
        assert result and result[0] >= 1  # it enqueued, then was told the queue is gone
        assert not Message.objects.filter(collection_id=queue.pk).exists()
