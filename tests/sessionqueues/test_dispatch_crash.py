"""Crash recovery with real processes (PostgreSQL): a ``session_dispatch``
SIGKILLed between reserve and acknowledge, while the webhook holds its
request, loses no entry and delivers none twice once its reservation is
recovered (docs/session-dispatch.md).

"Delivered" is what the webhook answered 2xx: the request the killed
dispatcher made is never answered (its connection is gone), so that entry
comes again, under a new reservation and the same entry id, and is answered
once. An entry the dispatcher marked attempted (``--at-most-once``) is
dropped instead and never comes again."""

from __future__ import annotations

import json
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from queueproject.models import WorkerProcess
from sessionqueues import services
from sessionqueues.models import QueuedMessage, Session
from tests.groupqueues.workers import Started, run_command, start_command, wait_for
from tests.sessionqueues.conftest import contents, put

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SECRET = "crash-test-secret"
BLOCK_TIMEOUT = 60.0  # the held request is let go by the test long before this


class HoldingHook:
    """A webhook that holds the first request for ``hold`` until the test lets
    it go, and records every request and every 2xx it managed to send."""

    def __init__(self, hold: str) -> None:
        self.received: list[dict[str, Any]] = []
        self.accepted: list[dict[str, Any]] = []
        self.arrived, self.let_go = threading.Event(), threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.received.append(body)
                held = body["message"]["content"] == hold and not hook.arrived.is_set()
                if held:
                    hook.arrived.set()
                    hook.let_go.wait(BLOCK_TIMEOUT)
                try:
                    self._answer(503 if held else 200)
                except OSError:
                    return  # the dispatcher is gone: nobody got an answer
                if not held:
                    hook.accepted.append(body)

            def _answer(self, status: int) -> None:
                answer = json.dumps({"ready": True}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                self.wfile.flush()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def contents(self, bodies: list[dict[str, Any]]) -> list[str]:
        return [body["message"]["content"] for body in bodies]

    def close(self) -> None:
        self.let_go.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook(session):
    hook = HoldingHook(hold="a")
    app = session.task.app
    app.webhook_url, app.webhook_secret = hook.url, SECRET
    app.save()
    services.session_set_agent_ready(session_id=session.pk, ready=True)
    put(session, "a")
    put(session, "b")
    yield hook
    hook.close()


def kill_mid_delivery(hook: HoldingHook, *args: str, **env: str) -> None:
    """Start a dispatcher, SIGKILL it while the webhook holds its request for
    "a", then let the held request go (its answer reaches nobody)."""
    victim: Started = start_command("session_dispatch", *args, **env)
    try:
        assert hook.arrived.wait(60), victim.read()[1][-2000:]
        victim.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=30)
    finally:
        victim.kill()
    hook.let_go.set()


def reserved_by(session: Session) -> list[tuple[str, str]]:
    rows = QueuedMessage.objects.filter(session=session, reservation_id__isnull=False)
    return [(row.content, row.reserved_by) for row in rows]


def dispatch_until_empty(*args: str, **env: str) -> str:
    done = run_command("session_dispatch", "--until-empty", *args, timeout=120, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_sigkill__a_restart_under_the_same_id_delivers_it_once(session, hook):
    kill_mid_delivery(hook, "--worker-id", "crash-1")
    assert reserved_by(session) == [("a", "crash-1")]
    assert Session.objects.get(pk=session.pk).agent_ready is False  # stuck until recovered

    out = dispatch_until_empty("--worker-id", "crash-1")

    assert "delivered=2" in out
    assert hook.contents(hook.accepted) == ["a", "b"]  # each answered once, in order
    first, again = (body for body in hook.received if body["message"]["content"] == "a")
    assert first["message"]["id"] == again["message"]["id"]
    assert first["reservation_id"] != again["reservation_id"]
    assert not QueuedMessage.objects.filter(session=session).exists()


def test_sigkill__session_recover_after_the_registry_row_expires(session, hook):
    registry = {
        "QUEUE_WORKER_REGISTRY": "1",
        "QUEUE_WORKER_HEARTBEAT_SECONDS": "0.5",
        "QUEUE_WORKER_EXPIRE_SECONDS": "2",
    }
    kill_mid_delivery(hook, "--worker-id", "crash-2", **registry)
    assert WorkerProcess.objects.filter(id="crash-2").exists()  # it died without a word
    assert reserved_by(session) == [("a", "crash-2")]

    from django.utils import timezone

    def expired() -> bool:
        row = WorkerProcess.objects.get(id="crash-2")
        return (timezone.now() - row.last_seen_at).total_seconds() > 2.5

    wait_for(expired, timeout=30)
    done = run_command("session_recover", "--json", timeout=120, **registry)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["counts"] == {"released": 1, "dropped": 0, "removed": 0}
    assert [(e["holder"], e["reason"]) for e in report["entries"]] == [("crash-2", "holder_gone")]
    assert contents(session) == ["a", "b"]

    out = dispatch_until_empty("--worker-id", "survivor", **registry)

    assert "delivered=2" in out
    assert hook.contents(hook.accepted) == ["a", "b"]
    assert hook.contents(hook.received) == ["a", "a", "b"]
    assert not QueuedMessage.objects.filter(session=session).exists()


def test_sigkill__an_at_most_once_entry_stays_dropped(session, hook):
    kill_mid_delivery(hook, "--worker-id", "amo", "--at-most-once")
    assert QueuedMessage.objects.get(content="a").delivery_attempted

    out = dispatch_until_empty("--worker-id", "amo", "--at-most-once")

    # Recovered at start: dropped (it may have reached the agent), and the
    # agent stays busy until it says it is ready.
    assert "delivered=0" in out
    assert contents(session) == ["b"] and reserved_by(session) == []
    services.session_set_agent_ready(session_id=session.pk, ready=True)
    assert "delivered=1" in dispatch_until_empty("--worker-id", "amo", "--at-most-once")
    assert hook.contents(hook.received) == ["a", "b"]
    assert hook.contents(hook.accepted) == ["b"]
