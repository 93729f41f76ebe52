"""``queueclient.RemoteWorker`` as real processes against a real server:
two remote workers drain 2,000 messages, one SIGKILLed midway, nothing lost;
SIGTERM finishes and releases; a raising handler nacks with the error."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from queueclient import Client, Queue, RemoteWorker

from tests.blackbox.conftest import World
from tests.blackbox.test_client import new_queue

PROC = Path(__file__).with_name("remote_worker_proc.py")


def start_worker(world: World, queue: str, record: Path, *, visibility: int = 3,
                 concurrency: int = 2, batch: int = 10) -> subprocess.Popen[str]:  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, str(PROC), world.server.url, world.editor_token, f"acme/{queue}",
         str(record), str(concurrency), str(batch), str(visibility)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def recorded(record: Path) -> list[str]:
    return record.read_text().split() if record.exists() else []


def wait_until(check, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_two_workers_one_killed_midway__nothing_lost(world: World, tmp_path: Path) -> None:
    name = new_queue(world)
    with Client(world.server.url, world.editor_token) as client:
        queue = client.queue(f"acme/{name}")
        ids: set[str] = set()
        for start in range(0, 2000, 500):
            ids.update(queue.enqueue_many([{"n": i} for i in range(start, start + 500)]))
        a_record, b_record = tmp_path / "a.txt", tmp_path / "b.txt"
        a = start_worker(world, name, a_record)
        b = start_worker(world, name, b_record)
        assert wait_until(lambda: len(recorded(a_record)) >= 300, 120), "worker a handled nothing"
        a.send_signal(signal.SIGKILL)
        a.wait()
        assert wait_until(lambda: queue.stats().depth == 0, 180), queue.stats()
        b.send_signal(signal.SIGTERM)
        out, err = b.communicate(timeout=30)
        assert b.returncode == 0, err[-2000:]
        handled = recorded(a_record) + recorded(b_record)
        assert set(handled) == ids  # every message handled, none unknown
        assert queue.stats().dead == 0
        assert len(recorded(b_record)) > 0 and "handled" in out


def test_sigterm_releases_what_was_not_started(world: World, tmp_path: Path) -> None:
    name = new_queue(world)
    with Client(world.server.url, world.editor_token) as client:
        queue = client.queue(f"acme/{name}")
        queue.enqueue_many([{"n": i} for i in range(40)])
        record = tmp_path / "r.txt"
        # One slow handler thread, big batches: most claimed messages wait.
        proc = start_worker(world, name, record, visibility=60, concurrency=1, batch=40)
        assert wait_until(lambda: len(recorded(record)) >= 1, 60)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err[-2000:]
        stats = queue.stats()
        assert stats.in_flight == 0  # released at once, not left to lapse (60 s)
        assert stats.depth == 40 - len(recorded(record))


def test_in_process_worker__failures_nacked_leases_extended(world: World) -> None:
    name = new_queue(world, default_max_attempts=1)
    with Client(world.server.url, world.editor_token) as client:
        queue: Queue = client.queue(f"acme/{name}")
        queue.enqueue_many([{"slow": True}, {"fail": True}, {"n": 3}])
        seen: list[object] = []

        def handle(message) -> None:  # type: ignore[no-untyped-def]
            if message.payload.get("fail"):
                raise ValueError("bad payload")
            if message.payload.get("slow"):
                time.sleep(3.5)  # longer than the 2 s lease: must be extended
            seen.append(message.payload)

        worker = RemoteWorker(client, queue, handle, concurrency=2, batch=5,
                              visibility_timeout=2, wait_seconds=0)  # fmt: skip
        done = worker.run(until_empty=True, install_signals=False)
        assert done == 3 and worker.failed == 1
        assert sorted(map(str, seen)) == sorted(map(str, [{"slow": True}, {"n": 3}]))
        stats = queue.stats()
        assert (stats.depth, stats.dead) == (0, 1)
        (dead,) = queue.dead().results
        assert "bad payload" in dead["last_error"] and dead["attempt"] == 1


def test_stop_from_another_thread(world: World) -> None:
    name = new_queue(world)
    with Client(world.server.url, world.editor_token) as client:
        worker = RemoteWorker(client, f"acme/{name}", lambda m: None, wait_seconds=1)
        threading.Timer(1.0, worker.stop).start()
        start = time.monotonic()
        assert worker.run(install_signals=False) == 0
        assert time.monotonic() - start < 10
