"""Concurrent dispatch (``session_dispatch --concurrency N``): deliveries to
different sessions run in parallel, never two at once for one session (in one
process: the slots; across processes: the reserve refuses a session with an
open dispatcher reservation), every session is served in FIFO order, and a
long queue does not hold back the other sessions' heads. Checked by recorders
on the delivering side, in-process threads and real processes, on both
databases (SQLite with fewer processes)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sessionqueues import services
from sessionqueues.delivery import Delivery
from sessionqueues.dispatcher import Dispatcher
from sessionqueues.models import QueuedMessage, Session, Task
from tests.conftest import is_postgres
from tests.groupqueues.workers import start_command
from tests.sessionqueues.conftest import put
from tests.sessionqueues.test_dispatcher import _current

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 30.0  # generous: a loaded 2-core machine


class InFlight:
    """Counts deliveries in flight, per session and in all, and remembers the
    order deliveries started and what each session got."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.per_session: Counter[str] = Counter()
        self.total = self.most = 0
        self.overlaps: list[str] = []  # sessions that had two deliveries at once
        self.started: list[tuple[str, str]] = []
        self.got: dict[str, list[str]] = defaultdict(list)
        self.parallel = threading.Event()

    def begin(self, session_id: str, content: str) -> None:
        with self.lock:
            self.per_session[session_id] += 1
            if self.per_session[session_id] > 1:
                self.overlaps.append(session_id)
            self.total += 1
            self.most = max(self.most, self.total)
            if self.total > 1:
                self.parallel.set()
            self.started.append((session_id, content))

    def end(self, session_id: str, content: str) -> None:
        with self.lock:
            self.per_session[session_id] -= 1
            self.total -= 1
            self.got[session_id].append(content)


def sessions_with(task: Task, count: int, entries: int) -> list[Session]:
    made = []
    for _ in range(count):
        session = services.session_create(task=task)
        services.session_set_auto_merge(session_id=session.pk, enabled=False)
        for n in range(entries):
            put(session, f"{n}")
        made.append(services.session_set_agent_ready(session_id=session.pk, ready=True))
    return made


def recording_deliverer(
    seen: InFlight, hold: float = 0.01, holds: dict[str, float] | None = None
) -> Any:
    """A deliverer that records into ``seen`` and takes ``hold`` seconds
    (``holds[content]`` for those contents)."""

    def deliver(delivery: Delivery) -> bool:
        content = delivery.entry["content"]
        seen.begin(delivery.session_id, content)
        try:
            # The first delivery waits (bounded) for a second one to overlap it:
            # proof that deliveries run in parallel, without a timing bet.
            if len(seen.started) == 1:
                seen.parallel.wait(WAIT)
            time.sleep((holds or {}).get(content, hold))
        finally:
            seen.end(delivery.session_id, content)
        return True

    return deliver


def test_threads__parallel_never_two_for_one_session_every_session_in_order(task):
    sessions = sessions_with(task, count=24, entries=3)
    seen = InFlight()
    _current.append(recording_deliverer(seen))
    dispatcher = Dispatcher(deliverer_name="test-recorder", until_empty=True, concurrency=6)
    dispatcher.run()
    assert seen.overlaps == []
    assert 2 <= seen.most <= 6
    assert dispatcher.stats.delivered == 72
    assert {str(s.pk): ["0", "1", "2"] for s in sessions} == dict(seen.got)
    assert not QueuedMessage.objects.exists()


def test_threads__a_long_queue_does_not_hold_back_the_other_heads(task):
    concurrency = 2
    [long] = sessions_with(task, count=1, entries=10)
    short = sessions_with(task, count=12, entries=1)
    seen = InFlight()
    _current.append(recording_deliverer(seen, hold=0.005))
    Dispatcher(deliverer_name="test-recorder", until_empty=True, concurrency=concurrency).run()
    order = [sid for sid, _ in seen.started]
    second_of_long = [i for i, sid in enumerate(order) if sid == str(long.pk)][1]
    heads_before = {sid for sid in order[:second_of_long]} - {str(long.pk)}
    # One pass hands every session one entry before the long queue's second;
    # at most the other slots' items may start after it.
    assert len(heads_before) >= len(short) - (concurrency - 1)
    assert len(seen.got[str(long.pk)]) == 10 and len(seen.got) == 13


# --- real processes, a webhook recorder -------------------------------------------------


class RecordingHook:
    """A webhook that counts requests in flight per session (across every
    dispatcher process) and answers ready after ``hold`` seconds."""

    def __init__(self, hold: float = 0.02) -> None:
        self.seen = InFlight()
        self.ids: Counter[str] = Counter()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                sid, content = body["session_id"], body["message"]["content"]
                hook.seen.begin(sid, content)
                with hook.seen.lock:
                    hook.ids[body["message"]["id"]] += 1
                time.sleep(hold)
                hook.seen.end(sid, content)
                answer = json.dumps({"ready": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_processes__never_two_for_one_session_across_processes(task):
    processes, concurrency = (3, 4) if is_postgres() else (2, 2)
    hook = RecordingHook()
    app = task.app
    app.webhook_url, app.webhook_secret = hook.url, "secret"
    app.save()
    sessions = sessions_with(task, count=30, entries=3)
    args = ["session_dispatch", "--until-empty", "--concurrency", str(concurrency)]
    started = [start_command(*args, "--worker-id", f"racer-{n}") for n in range(processes)]
    try:
        outputs = [p.communicate(timeout=120) for p in started]
    finally:
        for p in started:
            p.kill()
        hook.close()
    for p, (_, err) in zip(started, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
    delivered = sum(int(out.split("delivered=")[1].split()[0]) for out, _ in outputs)
    assert delivered == 90
    assert hook.seen.overlaps == []
    assert sorted(hook.ids.values()) == [1] * 90  # no entry twice
    assert {str(s.pk): ["0", "1", "2"] for s in sessions} == dict(hook.seen.got)
    assert not QueuedMessage.objects.exists()


def test_two_dispatchers__an_agent_ready_mid_delivery_does_not_start_a_second(task):
    """The agent reports ready before its webhook answer is back: the other
    dispatcher still may not deliver to that session while the first
    delivery's reservation is open (the reserve's guard, not the flag)."""
    sessions = sessions_with(task, count=2, entries=4)
    seen = InFlight()
    # Each head is held longer than an idle dispatcher's poll (0.5 s on
    # SQLite; on PostgreSQL the ready's NOTIFY wakes it at once), so the
    # other dispatcher certainly looks while the delivery is in flight.
    record = recording_deliverer(seen, holds={"0": 1.0})

    def ready_early(delivery: Delivery) -> bool:
        services.session_set_agent_ready(session_id=delivery.session_id, ready=True)
        return record(delivery)

    _current.append(ready_early)
    dispatchers = [
        Dispatcher(deliverer_name="test-recorder", until_empty=True, worker_id=f"d{n}")
        for n in range(2)
    ]
    threads = [threading.Thread(target=d.run) for d in dispatchers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 4)
    assert not any(thread.is_alive() for thread in threads)
    assert seen.overlaps == []
    assert {str(s.pk): ["0", "1", "2", "3"] for s in sessions} == dict(seen.got)


def test_reserve__skips_a_session_another_dispatcher_served_since_the_pass_began(task):
    from queueproject import clock

    [session] = sessions_with(task, count=1, entries=2)
    with clock.frozen():
        pass_began = clock.now()
        clock.advance(1)
        first = services.reservation_reserve_for_agent(session_id=session.pk, holder="other")
        assert first is not None
        services.reservation_acknowledge_delivery(
            session_id=session.pk, reservation_id=first.reservation_id, holder="other",
            agent_ready=True,
        )  # fmt: skip
        # Served after this pass began: its second prompt waits for the next pass.
        assert (
            services.reservation_reserve_for_agent(
                session_id=session.pk, holder="me", not_served_since=pass_began
            )
            is None
        )
        row = services.reservation_reserve_for_agent(
            session_id=session.pk, holder="me", not_served_since=clock.now()
        )
    assert row is not None and row.content == "1"
