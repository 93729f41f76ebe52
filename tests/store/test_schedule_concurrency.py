"""Exactly one message per boundary (SPEC §6) while several real
``schedule_tick`` processes tick the same ``@every 1s`` schedules and the
leader is SIGKILLed again and again.

Two things keep it exact: the cursor moved by a fenced update in the enqueue's
transaction (a killed leader's transaction rolls back, a second ticker finds
the cursor moved), and the boundary's idempotency key. The test checks the
outcome: per schedule, the fired boundaries are every second from the first
boundary to the last fired, each once."""

from __future__ import annotations

import signal
import time
from collections import Counter
from datetime import datetime, timedelta

import pytest

from groupqueues import services as queues
from groupqueues.models import Message
from queueproject.models import Lease
from store import schedules
from store.models import Schedule
from store.schedule_tick import LEASE_NAME
from tests.conftest import is_postgres
from tests.factories import GroupFactory
from tests.groupqueues.workers import Started, run_command, start_command, wait_for

TTL = 1.0


def _tickers(n: int, start: int = 0) -> dict[str, Started]:
    return {
        f"t{i}": start_command("schedule_tick", "--interval", "0.2", "--ttl", str(TTL),
                               "--owner", f"t{i}")
        for i in range(start, start + n)
    }  # fmt: skip


def _kill_leader(tickers: dict[str, Started], serial: int) -> int:
    """SIGKILL the current leader and start a replacement; the next serial."""
    lease = Lease.objects.filter(name=LEASE_NAME).first()
    if lease is None or lease.owner not in tickers:
        return serial
    victim = tickers.pop(lease.owner)
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)
    tickers.update(_tickers(1, start=serial))
    return serial + 1


def _fired(schedule: Schedule) -> Counter[datetime]:
    prefix = f"schedule:{schedule.pk}:"
    keys = Message.objects.filter(idempotency_key__startswith=prefix).values_list(
        "idempotency_key", flat=True
    )
    return Counter(datetime.fromisoformat(k.removeprefix(prefix)) for k in keys if k)


def run_exactly_once(
    *, processes: int, n_schedules: int, seconds: float, kill_every: float
) -> None:
    group = GroupFactory(slug="cron")
    queues.collection_create(group=group, name="ticks")
    made = [
        schedules.schedule_create(group=group, name=f"s{i}", collection="ticks",
                                  expression="@every 1s", catch_up=1000, payload={"i": i})
        for i in range(n_schedules)
    ]  # fmt: skip
    tickers, serial = _tickers(processes), processes
    try:
        # The clock starts once a leader ticks (a loaded machine starts the
        # processes in seconds, not in tenths), and runs on until one was killed.
        wait_for(lambda: Lease.objects.filter(name=LEASE_NAME, owner__in=list(tickers)).exists(),
                 timeout=60)  # fmt: skip
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline or (serial == processes
                                              and time.monotonic() < deadline + 60):  # fmt: skip
            time.sleep(min(kill_every, max(0.1, deadline - time.monotonic())))
            if time.monotonic() < deadline or serial == processes:
                serial = _kill_leader(tickers, serial)
    finally:
        for ticker in tickers.values():
            ticker.send_signal(signal.SIGTERM)
        for ticker in tickers.values():
            ticker.communicate(timeout=30)
    assert serial > processes  # a leader was killed (more when the processes start fast)
    time.sleep(TTL)  # a lease of a leader killed last expires
    run_command("schedule_tick", "--once", "--ttl", str(TTL))  # fires what the last kill left
    for schedule in made:
        first_boundary = schedule.next_at
        schedule.refresh_from_db()
        assert first_boundary is not None and schedule.last_fired_at is not None
        fired = _fired(schedule)
        assert set(fired.values()) == {1}, fired  # none doubled
        span = int((schedule.last_fired_at - first_boundary).total_seconds())
        expected = {first_boundary + timedelta(seconds=s) for s in range(span + 1)}
        assert set(fired) == expected  # none missing, from the first boundary to the last fired
        assert len(fired) >= seconds - 2  # and it kept firing through the kills


@pytest.mark.django_db(transaction=True)
def test_schedule_tick__exactly_once_per_boundary_while_leaders_are_killed():
    if is_postgres():
        run_exactly_once(processes=4, n_schedules=5, seconds=10, kill_every=3)
    else:
        run_exactly_once(processes=2, n_schedules=3, seconds=6, kill_every=2)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_schedule_tick__exactly_once_30s_20_schedules():
    run_exactly_once(processes=4, n_schedules=20, seconds=30, kill_every=3)


@pytest.mark.django_db(transaction=True)
def test_queue_worker__ticks_schedules_within_a_second_and_resigns_at_exit():
    group = GroupFactory(slug="wsched")
    queues.collection_create(group=group, name="ticks")
    queues.collection_create(group=group, name="idle")
    schedules.schedule_create(group=group, name="s", collection="ticks", expression="@every 1s")
    proc = start_command("queue_worker", "--queue", "wsched/idle", "--handler", "noop",
                         "--worker-id", "ws-1")  # fmt: skip
    try:
        wait_for(lambda: Lease.objects.filter(name=LEASE_NAME, owner="ws-1").exists())
        wait_for(lambda: Message.objects.filter(collection__name="ticks").count() >= 2)
        lateness = [
            (m.enqueued_at - datetime.fromisoformat((m.idempotency_key or "").split(":", 2)[2]))
            for m in Message.objects.filter(collection__name="ticks")
        ]
        assert max(lateness) < timedelta(seconds=1), lateness
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert not Lease.objects.filter(name=LEASE_NAME, owner="ws-1").exists()  # resigned (freed)
