"""The session dispatcher: in-process with Python deliverers, and as a real
``manage.py session_dispatch`` subprocess delivering to a local signed webhook."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from queueproject import backoff, webhooks
from sessionqueues import services
from sessionqueues.delivery import DeliveryFailed, DeliveryUncertain, deliverer
from sessionqueues.dispatcher import RETRY_BASE, RETRY_MAX, Dispatcher
from sessionqueues.models import QueuedMessage, Session
from tests.conftest import manage_cmd, subprocess_env
from tests.db_outage import terminate_other_sessions
from tests.sessionqueues.conftest import contents, put

SECRET = "webhook-test-secret"


@pytest.fixture
def ready_session(session):
    return services.session_set_agent_ready(session_id=session.pk, ready=True)


class Recorder:
    """A Python deliverer that records entries and fails on request."""

    def __init__(self, *, ready: bool = True, fail_on: str | None = None, uncertain: bool = False):
        self.seen: list[str] = []
        self.ready, self.fail_on, self.uncertain = ready, fail_on, uncertain

    def __call__(self, delivery: Any) -> bool:
        content = delivery.entry["content"]
        if content == self.fail_on:
            raise (DeliveryUncertain if self.uncertain else DeliveryFailed)("refused")
        self.seen.append(content)
        return self.ready


_current: list[Callable[[Any], bool]] = []


@deliverer("test-recorder")
def _recorder(delivery: Any) -> bool:
    """A registered name can hold one callable only: delegate to the test's recorder."""
    return _current[-1](delivery)


def dispatch(recorder: Recorder, **kwargs: Any) -> Any:
    _current.append(recorder)
    dispatcher = Dispatcher(deliverer_name="test-recorder", until_empty=True, **kwargs)
    dispatcher.run()
    return dispatcher.stats


@pytest.mark.django_db(transaction=True)
def test_python_deliverer__drains_in_fifo_order_and_acknowledges(ready_session):
    for text in "abc":
        put(ready_session, text)
    recorder = Recorder()
    stats = dispatch(recorder)
    assert recorder.seen == ["a", "b", "c"] and stats.delivered == 3
    assert not QueuedMessage.objects.filter(session=ready_session).exists()


@pytest.mark.django_db(transaction=True)
def test_python_deliverer__a_busy_agent_gets_one_entry_per_ready(ready_session):
    put(ready_session, "a")
    put(ready_session, "b")
    recorder = Recorder(ready=False)
    dispatch(recorder)
    assert recorder.seen == ["a"]
    assert Session.objects.get(pk=ready_session.pk).agent_ready is False
    services.session_set_agent_ready(session_id=ready_session.pk, ready=True)
    dispatch(recorder)
    assert recorder.seen == ["a", "b"]


@pytest.mark.django_db(transaction=True)
def test_python_deliverer__a_failed_delivery_is_released_to_its_position(ready_session):
    for text in "abc":
        put(ready_session, text)
    recorder = Recorder(fail_on="a")
    stats = dispatch(recorder)
    assert stats.released == 1 and recorder.seen == []
    assert contents(ready_session) == ["a", "b", "c"]
    assert [r.position for r in QueuedMessage.objects.filter(session=ready_session)] == [1, 2, 3]
    assert Session.objects.get(pk=ready_session.pk).agent_ready is True


@pytest.mark.django_db(transaction=True)
def test_python_deliverer__a_failed_session_retries_after_the_project_backoff(
    ready_session, monkeypatch
):
    # Pin the jitter factor: the formula (not a private copy) decides the delay.
    monkeypatch.setattr(backoff.random, "uniform", lambda low, high: low)
    put(ready_session, "a")
    _current.append(Recorder(fail_on="a"))
    dispatcher = Dispatcher(deliverer_name="test-recorder", until_empty=True)
    dispatcher.run()
    wait = dispatcher._retry_at[ready_session.pk] - time.monotonic()
    expected = backoff.backoff_delay(1, base=RETRY_BASE, cap=RETRY_MAX, jitter=0.5)
    assert expected - 0.2 < wait <= expected


@pytest.mark.django_db(transaction=True)
def test_python_deliverer__an_uncertain_delivery_is_dropped(ready_session):
    put(ready_session, "a")
    put(ready_session, "b")
    stats = dispatch(Recorder(fail_on="a", uncertain=True))
    assert stats.dropped == 1
    assert contents(ready_session) == ["b"]


@pytest.mark.django_db(transaction=True)
def test_paused_or_not_ready_sessions_get_nothing(session, other_session):
    put(session, "paused")
    services.session_set_agent_ready(session_id=session.pk, ready=True)
    services.session_set_auto_run(session_id=session.pk, enabled=False)
    put(other_session, "not ready")
    recorder = Recorder()
    assert dispatch(recorder).delivered == 0
    assert recorder.seen == []


# --- the webhook, through a real subprocess ---------------------------------


class Hook:
    """A local HTTP server that verifies signatures and answers a fixed status."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.received: list[Any] = []  # the decoded JSON bodies
        self.valid: list[bool] = []  # whether each body's signature verified
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.valid.append(
                    webhooks.verify(
                        SECRET,
                        body,
                        self.headers[webhooks.TIMESTAMP_HEADER],
                        self.headers[webhooks.SIGNATURE_HEADER],
                    )
                )
                hook.received.append(json.loads(body))
                answer = json.dumps({"ready": True}).encode()
                self.send_response(hook.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook_app(ready_session):
    app = ready_session.task.app
    return app


def run_dispatch(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        manage_cmd("session_dispatch", "--until-empty", *args),
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.django_db(transaction=True)
def test_webhook_subprocess__delivers_signed_entries(ready_session, hook_app):
    hook = Hook(200)
    try:
        hook_app.webhook_url, hook_app.webhook_secret = hook.url, SECRET
        hook_app.save()
        put(ready_session, "a")
        put(ready_session, "b")
        done = run_dispatch("--deliverer", "webhook")
    finally:
        hook.close()
    assert done.returncode == 0, done.stderr
    assert "delivered=2" in done.stdout
    assert [p["message"]["content"] for p in hook.received] == ["a", "b"]
    assert all(hook.valid) and len(hook.valid) == 2
    assert hook.received[0]["session_id"] == str(ready_session.pk)
    assert not QueuedMessage.objects.filter(session=ready_session).exists()


@pytest.mark.django_db(transaction=True)
def test_webhook_subprocess__a_refused_entry_goes_back_to_its_position(ready_session, hook_app):
    hook = Hook(503)
    try:
        hook_app.webhook_url, hook_app.webhook_secret = hook.url, SECRET
        hook_app.save()
        put(ready_session, "a")
        put(ready_session, "b")
        done = run_dispatch("--deliverer", "webhook", "--session", str(ready_session.pk))
    finally:
        hook.close()
    assert done.returncode == 0, done.stderr
    assert "released=1" in done.stdout
    assert len(hook.received) == 1
    assert contents(ready_session) == ["a", "b"]
    assert [r.position for r in QueuedMessage.objects.filter(session=ready_session)] == [1, 2]


@pytest.mark.django_db(transaction=True)
def test_session_dispatch__unknown_deliverer_is_refused():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="Unknown deliverer"):
        call_command("session_dispatch", "--deliverer", "nope", "--once")


@pytest.mark.django_db(transaction=True)
def test_session_dispatch__stops_cleanly_on_sigterm(ready_session):
    import signal
    import time

    process = subprocess.Popen(
        manage_cmd("session_dispatch", "--deliverer", "log"),
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None and stderr is not None  # both are PIPEs
    try:
        # Signal only once it is running (signal handlers installed): a loaded
        # machine may take longer than any fixed sleep to import Django.
        started, lines = threading.Event(), []

        def read_stderr() -> None:
            for line in stderr:
                lines.append(line)
                if "dispatching" in line:
                    started.set()

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        started.wait(30)
        time.sleep(0.5)  # go idle
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
        out = stdout.read()
        reader.join(5)
        err = "".join(lines)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "delivered=0" in out


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_dispatcher__wakes_on_notify_within_1s(ready_session):
    import time

    from django.db import connection

    delivered_at: list[float] = []

    def record(delivery: Any) -> bool:
        delivered_at.append(time.monotonic())
        return True

    _current.append(record)
    dispatcher = Dispatcher(
        deliverer_name="test-recorder", session_id=ready_session.pk, max_deliveries=1
    )

    def run() -> None:
        try:
            dispatcher.run()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)  # idle: on PostgreSQL it now sleeps on LISTEN (up to 5 s)
    queued_at = time.monotonic()
    put(ready_session, "wake up")
    thread.join(15)
    assert not thread.is_alive()
    assert delivered_at and delivered_at[0] - queued_at < 1.0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_dispatcher__survives_a_lost_database_connection(ready_session):
    import time

    from django.db import connection

    recorder = Recorder()
    _current.append(recorder)
    dispatcher = Dispatcher(
        deliverer_name="test-recorder", session_id=ready_session.pk, max_deliveries=1
    )
    crashed: list[BaseException] = []

    def run() -> None:
        try:
            dispatcher.run()
        except BaseException as exc:  # the test fails on any escape
            crashed.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)  # idle, holding its connection (and the LISTEN connection)
    assert terminate_other_sessions() >= 1
    # The wake-up may be lost while the listener reconnects: the safety poll finds it.
    put(ready_session, "after the outage")
    thread.join(20)
    assert not thread.is_alive() and not crashed
    assert recorder.seen == ["after the outage"] and dispatcher.stats.delivered == 1


# --- recovery at start, settling where the reservation went, options ------------


@pytest.mark.django_db(transaction=True)
def test_start__recovers_what_a_crashed_dispatcher_under_this_id_held(ready_session):
    put(ready_session, "a")
    put(ready_session, "b")
    left = services.reservation_reserve_for_agent(session_id=ready_session.pk, holder="disp-1")
    assert left is not None and left.content == "a"
    recorder = Recorder()
    stats = dispatch(recorder, worker_id="disp-1")
    assert recorder.seen == ["a", "b"] and stats.delivered == 2
    assert not QueuedMessage.objects.filter(session=ready_session).exists()


@pytest.mark.django_db(transaction=True)
def test_start__another_dispatchers_reservation_holds_the_session(ready_session):
    put(ready_session, "a")
    put(ready_session, "b")
    services.reservation_reserve_for_agent(session_id=ready_session.pk, holder="other")
    services.session_set_agent_ready(session_id=ready_session.pk, ready=True)
    recorder = Recorder()
    # Registry off (tests): "other" is not judged gone, and "b" waits behind "a".
    assert dispatch(recorder, worker_id="disp-2").delivered == 0
    assert recorder.seen == []


@pytest.mark.django_db(transaction=True)
def test_without_recovery__a_crashed_reservation_stays(ready_session):
    put(ready_session, "a")
    services.reservation_reserve_for_agent(session_id=ready_session.pk, holder="disp-1")
    assert dispatch(Recorder(), worker_id="disp-1", recover=False).delivered == 0
    assert QueuedMessage.objects.get(session=ready_session).reserved_by == "disp-1"


@pytest.mark.django_db(transaction=True)
def test_acknowledge__follows_a_reservation_a_transfer_moved(ready_session, other_session):
    put(ready_session, "a")
    put(other_session, "there before")

    def transfer_while_delivering(delivery: Any) -> bool:
        services.queue_transfer(source_id=ready_session.pk, destination_id=other_session.pk)
        return True

    _current.append(transfer_while_delivering)
    dispatcher = Dispatcher(deliverer_name="test-recorder", session_id=ready_session.pk, once=True)
    dispatcher.run()
    assert dispatcher.stats.delivered == 1
    # The delivered entry was acknowledged in the session it moved to.
    assert contents(other_session) == ["there before"]
    assert not QueuedMessage.objects.filter(reservation_id__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_at_most_once__a_failed_delivery_is_dropped(ready_session):
    put(ready_session, "a")
    put(ready_session, "b")
    stats = dispatch(Recorder(fail_on="a"), at_most_once=True)
    assert stats.dropped == 1 and stats.released == 0
    assert contents(ready_session) == ["b"]  # "b" waits for the back-off (not in this run)
    assert Session.objects.get(pk=ready_session.pk).agent_ready is True  # it did not get "a"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("concurrency", [0, 257])
def test_concurrency__out_of_range_is_refused(concurrency):
    from sessionqueues.exceptions import InvalidSessionInput

    with pytest.raises(InvalidSessionInput) as caught:
        Dispatcher(deliverer_name="log", concurrency=concurrency)
    assert "concurrency" in caught.value.details


@pytest.mark.django_db(transaction=True)
def test_session_dispatch__refuses_a_bad_concurrency():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="concurrency"):
        call_command("session_dispatch", "--deliverer", "log", "--once", "--concurrency", "0")
