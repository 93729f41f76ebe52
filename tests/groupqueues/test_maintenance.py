"""Maintenance: one leader at a time among many loops (SPEC §2, §6 TTL locks)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable

import pytest

from groupqueues import services
from groupqueues.maintenance import maintenance_pass
from groupqueues.models import Message, MessageState
from queueproject import clock
from tests.db_outage import terminate_other_sessions
from tests.factories import GroupFactory
from tests.groupqueues.workers import Started, run_command, start_command, wait_for

TTL = 2.0


def acting_owners(loops: Iterable[Started]) -> dict[str, int]:
    """owner → number of passes it printed."""
    counts: dict[str, int] = {}
    for loop in loops:
        for line in loop.read()[0].splitlines():
            owner, _, rest = line.partition(": ")
            if rest.startswith("reclaimed="):
                counts[owner] = counts.get(owner, 0) + 1
    return counts


@pytest.mark.django_db(transaction=True)
def test_leader__one_loop_acts_and_another_takes_over_when_it_dies():
    loops = [
        start_command("queue_maintenance", "--interval", "0.2", "--ttl", str(TTL),
                      "--owner", f"m{i}")
        for i in range(3)
    ]  # fmt: skip
    try:
        wait_for(lambda: sum(acting_owners(loops).values()) >= 5)
        time.sleep(1.0)
        first = acting_owners(loops)
        assert len(first) == 1, first  # at most one acts
        (leader,) = first
        victim = loops[int(leader[1:])]
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        killed_at = time.monotonic()
        new = wait_for(lambda: set(acting_owners(loops)) - {leader}, timeout=TTL + 5)
        assert time.monotonic() - killed_at <= TTL + 1.5
        assert len(new) == 1
        time.sleep(1.0)
        assert set(acting_owners(loops)) == {leader, *new}
    finally:
        for loop in loops:
            loop.kill()


@pytest.mark.django_db(transaction=True)
def test_queue_maintenance__once_prints_counts():
    group = GroupFactory(slug="maint")
    queue = services.collection_create(group=group, name="jobs", visibility_timeout=1)
    services.message_enqueue(collection=queue, payload={}, enqueued_by="t")
    services.message_enqueue(collection=queue, payload={}, enqueued_by="t", expires_in_seconds=0.5)
    services.message_claim(collection=queue, worker_id="w", n=1)
    time.sleep(1.1)
    done = run_command("queue_maintenance", "--once", "--owner", "solo")
    assert done.returncode == 0, done.stderr
    assert "solo: reclaimed=1 expired=1 pruned=0 exhausted=0" in done.stdout


def test_maintenance_pass__reclaims_sweeps_and_drops(db):
    group = GroupFactory(slug="m")
    queue = services.collection_create(group=group, name="jobs", dead_retention=10)
    with clock.frozen():
        claimed = services.message_enqueue(collection=queue, payload={}, enqueued_by="t").id
        services.message_claim(collection=queue, worker_id="w", n=1)
        services.message_enqueue(collection=queue, payload={}, enqueued_by="t",
                                 expires_in_seconds=5)  # fmt: skip
        clock.advance(31)
        report = maintenance_pass()
        assert (report.reclaimed, report.expired) == (1, 1)
        assert Message.objects.get(id=claimed).state == MessageState.READY
        clock.advance(11)
        assert maintenance_pass().pruned == 1


@pytest.mark.django_db(transaction=True)
def test_worker__leads_maintenance_and_resigns_at_exit():
    from queueproject.models import Lease

    group = GroupFactory(slug="wm")
    queue = services.collection_create(group=group, name="jobs", visibility_timeout=1)
    services.message_enqueue(collection=queue, payload={}, enqueued_by="t")
    services.message_claim(collection=queue, worker_id="gone", n=1)
    proc = start_command(
        "queue_worker",
        "--queue",
        "wm/jobs",
        "--handler",
        "noop",
        "--worker-id",
        "wm-1",
        QUEUE_MAINTENANCE_INTERVAL="0.2",
    )
    try:
        wait_for(lambda: Lease.objects.filter(owner="wm-1").exists())
        wait_for(lambda: not Message.objects.exists())  # reclaimed, then handled
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert not Lease.objects.filter(owner="wm-1").exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_worker__resigns_maintenance_although_its_connection_was_killed():
    """SIGTERM just after the database dropped the worker's connections (a
    failover, a restart): the resign reconnects instead of leaving the lease
    to expire (TTL 30 s) with a traceback in the log."""

    from queueproject.models import Lease

    group = GroupFactory(slug="wk")
    services.collection_create(group=group, name="jobs")
    proc = start_command("queue_worker", "--queue", "wk/jobs", "--handler", "noop",
                         "--worker-id", "wk-1", QUEUE_MAINTENANCE_INTERVAL="10")  # fmt: skip
    try:
        wait_for(lambda: Lease.objects.filter(owner="wk-1").exists())
        time.sleep(1.0)  # the first pass is over: maintenance idles on its connection
        assert terminate_other_sessions() >= 1, "the worker had connections"
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        wait_for(lambda: not Lease.objects.filter(owner="wk-1").exists(), timeout=15)
        released_after = time.monotonic() - signalled
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert released_after < 10.0  # the TTL is 30 s: an expiry would take that long
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("args", [["--interval", "0"], ["--interval", "soon"], ["--ttl", "-1"]])
def test_queue_maintenance__bad_arguments(args):
    done = run_command("queue_maintenance", "--once", *args)
    assert done.returncode != 0
    assert "must be greater than 0" in done.stderr or "is not a number" in done.stderr
