"""The outbox with real processes (issue 15): a publisher killed between its
write and its commit leaves nothing; relays SIGKILLed again and again mid-batch
still put every row into the queue exactly once; webhooks get every row at
least once, signed, with the outbox id in a header; ``queue_worker`` runs a
relay."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from django.db import connection, transaction

from groupqueues import services as queues
from groupqueues.models import Collection, Message, new_message_ids
from principals.models import App, Group
from principals.services import app_set_webhook
from queueproject import clock, webhooks
from store import outbox, outbox_targets
from store.models import OutboxMessage, OutboxState
from store.outbox_relay import OutboxRelay
from tests.conftest import ROOT, is_postgres, subprocess_env
from tests.factories import AppFactory, GroupFactory
from tests.groupqueues.test_webhooks import Endpoint
from tests.groupqueues.workers import Started, run_command, start_command, wait_for

LEASE = "1"
PUBLISH_EVERY = 0.1  # seconds between the chunks the SIGKILL test publishes


def _publisher(tmp_path: Path, app_slug: str, mode: str) -> tuple[subprocess.Popen[str], Path]:
    ready = tmp_path / f"{app_slug}.ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.outbox_publisher", "shop", app_slug, str(ready), mode],
        cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc, ready


@pytest.mark.django_db(transaction=True)
def test_publish__a_crash_between_write_and_commit_leaves_neither_row(tmp_path):
    group = GroupFactory(slug="shop")
    queues.collection_create(group=group, name="emails")
    proc, ready = _publisher(tmp_path, "crashed", "hang")
    try:
        wait_for(ready.exists, timeout=30)  # both rows written, not committed
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert not App.objects.filter(slug="crashed").exists()
    assert not OutboxMessage.objects.exists()
    committed, _ = _publisher(tmp_path, "committed", "commit")
    _, err = committed.communicate(timeout=60)
    assert committed.returncode == 0, err
    assert App.objects.filter(slug="committed").exists()
    assert OutboxMessage.objects.get().payload == {"app": "committed"}


def _relays(n: int, start: int) -> dict[str, Started]:
    return {
        f"r{i}": start_command("outbox_relay", "--lease-seconds", LEASE, "--batch", "50",
                               "--interval", "0.1", "--relay-id", f"r{i}")
        for i in range(start, start + n)
    }  # fmt: skip


def _publish_chunk(group: Group, n: int, start: int) -> list[str]:
    """``n`` outbox rows as ``outbox.publish`` writes them, in one statement
    (publish itself is tested elsewhere; here the relays are under test)."""
    if n <= 0:
        return []
    now = clock.now()
    made = [
        OutboxMessage(id=id, group=group, target_kind="queue", target_name="emails",
                      payload={"n": start + i}, max_attempts=10, deliver_after=now,
                      created_at=now)
        for i, id in enumerate(new_message_ids(n))
    ]  # fmt: skip
    OutboxMessage.objects.bulk_create(made)
    return [str(row.id) for row in made]


def _holding(running: dict[str, Started]) -> list[str]:
    """The running relays that hold claimed rows now, oldest first."""
    claimed = OutboxMessage.objects.filter(state=OutboxState.CLAIMED, claimed_by__in=running)
    return sorted(set(claimed.values_list("claimed_by", flat=True)), key=lambda r: int(r[1:]))


def _kill_mid_batch(
    collection: Collection, running: dict[str, Started], publish: Callable[[], None]
) -> tuple[str | None, bool]:
    """SIGKILL a relay in the middle of delivering a batch: (the relay killed
    or None, whether its claimed rows were left undelivered)."""
    if is_postgres():
        victim = _kill_stalled(collection, running, publish)
        return victim, victim is not None
    return _kill_caught(running)


def _kill_stalled(
    collection: Collection, running: dict[str, Started], publish: Callable[[], None]
) -> str | None:
    """PostgreSQL: hold the queue's collection row on a connection of its own
    (the relays' batch enqueue locks it, as the queue has a max_depth), then
    publish a chunk: the relays claim it and stall inside their delivery
    transaction; SIGKILL one that holds claimed rows. (Publishing first would
    race the relays: on a quiet machine they deliver a chunk within their 0.1
    s interval, before the lock is taken, and none is ever caught.)"""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params) as holder:
        holder.execute("UPDATE groupqueues_collection SET max_depth = max_depth WHERE id = %s",
                       [collection.pk])  # fmt: skip
        publish()  # committed at once (autocommit), claimable while the row is held
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            holders = _holding(running)
            if holders:
                _kill(running, holders[0])
                return holders[0]
            time.sleep(0.05)
    return None


def _kill_caught(running: dict[str, Started]) -> tuple[str | None, bool]:
    """SQLite: its one write lock would hold back the claims too, so look
    often (WAL: reads do not wait) for a relay between its claim and the end
    of its delivery and SIGKILL it at once; mid-batch when its rows are still
    claimed afterwards (killed before the delivery committed: the delivery's
    transaction, if begun, rolls back)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        holders = _holding(running)
        if holders:
            _kill(running, holders[0])
            left = OutboxMessage.objects.filter(state=OutboxState.CLAIMED, claimed_by=holders[0])
            return holders[0], left.exists()
        time.sleep(0.002)
    return None, False


def _kill(running: dict[str, Started], relay_id: str) -> None:
    victim = running.pop(relay_id)
    victim.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=10)


def run_sigkill_relays(*, rows: int, seconds: float, kill_every: float, relays: int = 3) -> None:
    """Publish ``rows`` rows in chunks over ``seconds`` while ``relays`` relays
    deliver them; every ``kill_every`` seconds SIGKILL a relay in the middle of
    delivering a claimed batch and start a replacement. Then every outbox id is
    in the queue exactly once.

    Catching a relay mid-batch is a race (on SQLite the window is the moment
    between its claim and its delivery transactions), so publishing goes on
    past ``rows`` and ``seconds`` until two kills landed (at most a minute)."""
    group = GroupFactory(slug="shop")
    collection = queues.collection_create(group=group, name="emails", max_depth=1_000_000)
    ids: set[str] = set()
    running, serial, kills = _relays(relays, 0), relays, 0
    chunk = max(1, int(rows / (seconds / PUBLISH_EVERY)))
    try:
        started = next_kill = time.monotonic()
        give_up = started + seconds + 60
        while (len(ids) < rows or time.monotonic() < started + seconds
               or (kills < 2 and time.monotonic() < give_up)):  # fmt: skip
            due = rows - len(ids) if len(ids) < rows else chunk * (kills < 2)
            ids.update(_publish_chunk(group, min(chunk, due), len(ids)))
            time.sleep(PUBLISH_EVERY)
            if time.monotonic() >= next_kill + kill_every:
                next_kill = time.monotonic()

                def publish() -> None:
                    ids.update(_publish_chunk(group, chunk, len(ids)))

                victim, mid_batch = _kill_mid_batch(collection, running, publish)
                if victim is not None:
                    kills += mid_batch
                    running.update(_relays(1, serial))
                    serial += 1
        wait_for(lambda: not pending.exists(), timeout=120)
    finally:
        for relay in running.values():
            relay.send_signal(signal.SIGTERM)
        for relay in running.values():
            relay.communicate(timeout=30)
    time.sleep(float(LEASE))  # a lease of a relay killed last lapses
    done = run_command("outbox_relay", "--once", "--lease-seconds", LEASE)
    assert done.returncode == 0, done.stderr
    assert not pending.exists()
    keys = list(Message.objects.values_list("idempotency_key", flat=True))
    assert len(keys) == len(ids) >= rows and set(keys) == ids  # every row once, none twice
    assert kills >= 2, kills
    # the kills landed mid-batch: rows of a killed relay's claim were claimed again
    assert OutboxMessage.objects.filter(attempt__gte=2).exists()


pending = OutboxMessage.objects.exclude(state=OutboxState.DONE)


@pytest.mark.django_db(transaction=True)
def test_relay__exactly_once_into_a_queue_while_relays_are_sigkilled():
    if is_postgres():
        run_sigkill_relays(rows=600, seconds=6, kill_every=1.0)
    else:
        run_sigkill_relays(rows=200, seconds=6, kill_every=1.0, relays=2)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_relay__exactly_once_5000_rows_relays_killed_every_2s():
    run_sigkill_relays(rows=5000, seconds=30, kill_every=2.0)


@pytest.mark.django_db(transaction=True)
def test_webhook__at_least_once_signed_with_the_outbox_id_header():
    group = GroupFactory(slug="shop")
    app = app_set_webhook(app=AppFactory(slug="hooked", group=group), url="http://x/",
                          secret="s3cret", timeout=5.0)  # fmt: skip
    failing = Endpoint(status=500)
    app_set_webhook(app=app, url=failing.url, secret="s3cret", timeout=5.0)
    with transaction.atomic():
        row = outbox.publish(outbox_targets.webhook(app), {"order": 7}, key="order-7")
    relay = OutboxRelay(relay_id="w", once=True)
    try:
        relay.tick()
    finally:
        failing.close()
    row.refresh_from_db()
    assert row.state == OutboxState.PENDING and row.attempt == 1 and "HTTP 500" in row.last_error
    ok = Endpoint(status=200)
    try:
        app_set_webhook(app=app, url=ok.url, secret="s3cret", timeout=5.0)
        OutboxMessage.objects.filter(id=row.id).update(deliver_after=row.created_at)
        relay.tick()
    finally:
        ok.close()
    row.refresh_from_db()
    assert row.state == OutboxState.DONE
    received = failing.received + ok.received
    assert len(received) == 2  # at least once: the failed attempt, then the retry
    for headers, body in received:
        assert headers["X-Outbox-Id"] == str(row.id)
        stamp = headers[webhooks.TIMESTAMP_HEADER]
        assert webhooks.verify("s3cret", body, stamp, headers[webhooks.SIGNATURE_HEADER])
        assert json.loads(body) == {"outbox_id": str(row.id), "key": "order-7",
                                    "payload": {"order": 7},
                                    "published_at": row.created_at.isoformat()}  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_queue_worker__runs_a_relay():
    group = GroupFactory(slug="shop")
    queues.collection_create(group=group, name="emails")
    queues.collection_create(group=group, name="idle")
    with transaction.atomic():
        row = outbox.publish("queue:shop/emails", {"n": 1})
    proc = start_command("queue_worker", "--queue", "shop/idle", "--handler", "noop",
                         "--worker-id", "wo-1")  # fmt: skip
    try:
        wait_for(lambda: Message.objects.filter(idempotency_key=str(row.id)).exists())
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0
    row.refresh_from_db()
    assert row.state == OutboxState.DONE and row.claimed_by == "" and row.attempt == 1
