"""The invariants of ordering keys and max_in_flight under real competing
processes (``key_worker``), checked from a recorder table the handlers write:
never two claimed messages of one key at once, each key handled in enqueue
order, max_in_flight never exceeded, nothing lost. PostgreSQL: 8 processes;
SQLite: 4. The default run is sized to stay well under a minute; the
``slow`` variant runs the full 20,000 messages on 200 keys."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict

import pytest
from django.db import connection

from groupqueues import services
from groupqueues.models import Message
from tests.conftest import ROOT, is_postgres, subprocess_env
from tests.factories import GroupFactory

pytestmark = pytest.mark.django_db(transaction=True)

RECORDER = "gq_test_key_recorder"
MAX_IN_FLIGHT = 25


@pytest.fixture
def recorder():
    serial = "bigserial" if is_postgres() else "integer"
    extra = "" if is_postgres() else " AUTOINCREMENT"
    with connection.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {RECORDER}")
        cur.execute(
            f"CREATE TABLE {RECORDER} (n {serial} PRIMARY KEY{extra}, worker text, msg text,"
            " okey text, idx integer, event text, acked boolean)"
        )
    yield RECORDER
    with connection.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {RECORDER}")


def _fill(queue, count, keys):
    """``count`` messages round-robin over ``keys`` keys, payload {k, i}: i is
    the message's place in its key's enqueue order."""
    for start in range(0, count, 500):
        services.message_enqueue_batch(
            collection=queue,
            messages=[
                services.NewMessage(
                    payload={"k": f"key{j % keys}", "i": j // keys}, ordering_key=f"key{j % keys}"
                )
                for j in range(start, min(count, start + 500))
            ],
            enqueued_by="app:test",
        )


def _run(queue, processes, tmp_path, timeout):
    go_file = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.groupqueues.key_worker",
                str(queue.pk),
                str(i),
                str(go_file),
                RECORDER,
            ],
            cwd=ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    go_file.touch()
    for proc in procs:
        _, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, stderr


def _check(queue, count, keys):
    with connection.cursor() as cur:
        cur.execute(f"SELECT okey, idx, event, acked FROM {RECORDER} ORDER BY n")
        events = cur.fetchall()
    holding: dict[str, int | None] = defaultdict(lambda: None)
    handled: dict[str, list[int]] = defaultdict(list)
    in_flight = peak = 0
    for key, idx, event, acked in events:
        if event == "start":
            assert holding[key] is None, f"{key}: {idx} started while {holding[key]} was held"
            holding[key] = idx
            in_flight += 1
            peak = max(peak, in_flight)
        else:
            assert holding[key] == idx
            holding[key] = None
            in_flight -= 1
            if acked:
                handled[key].append(idx)
    assert peak <= MAX_IN_FLIGHT, f"{peak} in flight at once"
    assert len(handled) == keys
    per_key = count // keys
    for key, order in handled.items():
        assert order == list(range(per_key)), f"{key} handled out of order: {order[:20]}"
    assert not Message.objects.filter(collection=queue).exists(), "something was left"
    return peak


def _scenario(tmp_path, *, count, keys, processes, timeout=300):
    queue = services.collection_create(
        group=GroupFactory(), name="keys", visibility_timeout=300, default_max_attempts=1000
    )
    services.collection_update(collection=queue, max_in_flight=MAX_IN_FLIGHT)
    _fill(queue, count, keys)
    _run(queue, processes, tmp_path, timeout)
    return _check(queue, count, keys)


@pytest.mark.postgres
def test_keys__invariants_with_8_processes_on_postgres(tmp_path, recorder):
    _scenario(tmp_path, count=1200, keys=40, processes=8)


@pytest.mark.postgres
@pytest.mark.slow
def test_keys__invariants_with_8_processes_20000_messages_200_keys(tmp_path, recorder):
    _scenario(tmp_path, count=20000, keys=200, processes=8, timeout=1800)


def test_keys__invariants_with_4_processes(tmp_path, recorder):
    if is_postgres():
        pytest.skip("the PostgreSQL variant runs 8 processes")
    _scenario(tmp_path, count=600, keys=20, processes=4)


@pytest.mark.slow
def test_keys__invariants_with_4_processes_more(tmp_path, recorder):
    if is_postgres():
        pytest.skip("the PostgreSQL variant runs 8 processes")
    _scenario(tmp_path, count=4000, keys=100, processes=4, timeout=1800)
