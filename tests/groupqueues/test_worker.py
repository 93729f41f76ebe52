"""``manage.py queue_worker`` as a real subprocess (SPEC §2, §5)."""

from __future__ import annotations

import signal
import time

import pytest

from groupqueues import services, trigger_services
from groupqueues.models import Message, MessageState
from tests.factories import GroupFactory
from tests.groupqueues.workers import outcome_lines, run_command, start_command, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def group():
    return GroupFactory(slug="owners")


@pytest.fixture
def queue(group):
    return services.collection_create(
        group=group, name="jobs", retry_backoff_base=0.001, retry_backoff_max=0.001
    )


def enqueue_many(queue, payloads):
    news = [services.NewMessage(payload=p) for p in payloads]
    for i in range(0, len(news), services.MAX_BATCH):
        services.message_enqueue_batch(
            collection=queue, messages=news[i : i + 500], enqueued_by="app:test"
        )


def test_worker__drains_through_a_registered_handler(queue):
    enqueue_many(queue, [{"n": i} for i in range(300)])
    done = run_command(
        "queue_worker",
        "--queue",
        "owners/jobs",
        "--handler",
        "noop",
        "--batch",
        "50",
        "--concurrency",
        "2",
        "--until-empty",
    )
    assert done.returncode == 0, done.stderr
    assert not Message.objects.exists()
    assert "processed=300 acked=300" in done.stdout
    lines = outcome_lines(done.stderr)
    assert len(lines) == 300
    assert {(x["outcome"], x["queue"], x["attempt"]) for x in lines} == {
        ("acked", "owners/jobs", 1)
    }
    assert all("duration_ms" in x and x["id"] for x in lines)


def test_worker__batch_1_acks_each_with_the_next_claim(queue):
    # --batch 1 chains the acks with the claims: every message handled and acked
    # exactly once, in order, and --max-messages still counts every one.
    enqueue_many(queue, [{"n": i} for i in range(40)])
    done = run_command(
        "queue_worker", "--queue", "owners/jobs", "--handler", "noop", "--batch", "1",
        "--max-messages", "25",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "processed=25 acked=25" in done.stdout
    assert Message.objects.count() == 15
    assert not Message.objects.filter(state=MessageState.CLAIMED).exists()
    done = run_command(
        "queue_worker", "--queue", "owners/jobs", "--handler", "noop", "--batch", "1",
        "--until-empty",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "processed=15 acked=15" in done.stdout
    assert not Message.objects.exists()
    lines = outcome_lines(done.stderr)
    assert [x["outcome"] for x in lines] == ["acked"] * 15
    assert len({x["id"] for x in lines}) == 15


def test_worker__batches_ack_with_the_next_claim_around_failures(queue):
    # Each batch's successes are acked with the next claim
    # (message_ack_batch_and_claim); failures in the middle of a batch are
    # settled on their own, and --max-messages still counts every message.
    payloads = [{"n": i, "poison": "fatal" if i % 7 == 3 else False} for i in range(60)]
    enqueue_many(queue, payloads)
    done = run_command(
        "queue_worker", "--queue", "owners/jobs", "--handler", "poison", "--batch", "8",
        "--max-messages", "45",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = outcome_lines(done.stderr)
    assert len(lines) == 45 and len({x["id"] for x in lines}) == 45
    assert not Message.objects.filter(state=MessageState.CLAIMED).exists()
    dead = Message.objects.filter(state=MessageState.DEAD)
    assert sorted(m.payload["n"] for m in dead) == [3, 10, 17, 24, 31, 38]  # first 45 only
    assert Message.objects.filter(state=MessageState.READY).count() == 15
    assert sorted(x["outcome"] for x in lines).count("dead") == 6
    done = run_command(
        "queue_worker", "--queue", "owners/jobs", "--handler", "poison", "--batch", "8",
        "--until-empty",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "processed=15 acked=12 retried=0 dead=3" in done.stdout
    assert sorted(m.payload["n"] for m in Message.objects.all()) == list(range(3, 60, 7))


def test_worker__runs_trigger_consumers_without_queue_option(queue, group):
    trigger_services.trigger_create(
        group=group, collection_name="jobs", handler="log", concurrency=2
    )
    enqueue_many(queue, [{"n": i} for i in range(20)])
    done = run_command("queue_worker", "--until-empty")
    assert done.returncode == 0, done.stderr
    assert not Message.objects.exists()
    assert '"n": 7' in done.stderr  # the log handler logs payloads


def test_worker__handler_exception_nacks_then_dead_exhausted(queue):
    enqueue_many(queue, [{"n": 1}])
    done = run_command(
        "queue_worker", "--queue", "owners/jobs", "--handler", "fail", "--max-messages", "3"
    )
    assert done.returncode == 0, done.stderr
    message = Message.objects.get()
    assert (message.state, message.dead_reason, message.attempt) == ("dead", "exhausted", 3)
    assert message.last_error is not None
    assert "HandlerFailed" in message.last_error
    assert [x["outcome"] for x in outcome_lines(done.stderr)] == ["retried", "retried", "dead"]


def test_worker__max_messages_stops_early(queue):
    enqueue_many(queue, [{"n": i} for i in range(30)])
    done = run_command(
        "queue_worker",
        "--queue",
        "owners/jobs",
        "--handler",
        "noop",
        "--batch",
        "4",
        "--max-messages",
        "10",
    )
    assert done.returncode == 0, done.stderr
    assert Message.objects.count() == 20
    assert not Message.objects.filter(state=MessageState.CLAIMED).exists()


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--handler", "noop"], "--handler needs"),
        (["--queue", "owners/jobs", "--handler", "nope"], "Unknown handler"),
        (["--queue", "nogroup/jobs", "--handler", "noop"], ""),
        (["--queue", "owners/none", "--handler", "noop"], "no queue"),
        (["--queue", "owners", "--handler", "noop"], "GROUP/NAME"),
        (["--queue", "owners/jobs"], "No enabled trigger"),
        (["--app", "nobody"], "nobody"),
        (["--queue", "owners/jobs", "--handler", "noop", "--batch", "0"], "greater than 0"),
        (["--queue", "owners/jobs", "--handler", "noop", "--batch", "101"], "at most 100"),
        (["--queue", "owners/jobs", "--handler", "noop", "--worker-id", ""], "worker_id"),
    ],
)
def test_worker__bad_arguments_fail_clearly(queue, args, problem):
    done = run_command("queue_worker", *args, "--until-empty")
    assert done.returncode != 0
    assert problem in done.stderr


def test_worker__sigterm_finishes_running_handlers_and_releases_the_rest(queue):
    enqueue_many(queue, [{"seconds": 3} for _ in range(6)])
    proc = start_command(
        "queue_worker",
        "--queue",
        "owners/jobs",
        "--handler",
        "sleep",
        "--concurrency",
        "2",
        "--batch",
        "3",
        "--grace",
        "20",
    )
    try:
        wait_for(lambda: Message.objects.filter(state=MessageState.CLAIMED).count() == 6)
        time.sleep(1.0)  # both slots are inside their first handler
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    # ~2 s of the running handlers plus the exit; running the rest too would
    # take at least 2 + 3 + 3 s, so this still tells the two apart on a busy machine.
    assert time.monotonic() - started < 7
    outcomes = sorted(x["outcome"] for x in outcome_lines(stderr))
    assert outcomes == ["acked"] * 2 + ["released"] * 4
    rest = list(Message.objects.values_list("state", "attempt"))
    assert rest == [("ready", 0)] * 4


def test_worker__second_signal_exits_at_once(queue):
    enqueue_many(queue, [{"seconds": 30}])
    proc = start_command("queue_worker", "--queue", "owners/jobs", "--handler", "sleep")
    wait_for(lambda: Message.objects.filter(state=MessageState.CLAIMED).exists())
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode != 0
    assert Message.objects.get().state == MessageState.CLAIMED  # left to its lease


def test_worker__heartbeat_extends_leases_of_long_handlers(group):
    queue = services.collection_create(group=group, name="slow", visibility_timeout=2)
    enqueue_many(queue, [{"seconds": 3.5}])
    done = run_command(
        "queue_worker", "--queue", "owners/slow", "--handler", "sleep", "--until-empty"
    )
    assert done.returncode == 0, done.stderr
    assert [x["outcome"] for x in outcome_lines(done.stderr)] == ["acked"]
    assert "processed=0 acked=0" in done.stderr  # --until-empty progress while it runs
    assert "processed=1 acked=1" in done.stdout  # the summary line


def test_worker__max_messages_with_several_threads_handles_exactly_that_many(queue):
    enqueue_many(queue, [{"seconds": 0.05} for _ in range(30)])
    done = run_command(
        "queue_worker",
        "--queue",
        "owners/jobs",
        "--handler",
        "sleep",
        "--batch",
        "4",
        "--concurrency",
        "3",
        "--max-messages",
        "10",
    )
    assert done.returncode == 0, done.stderr
    assert "processed=10 acked=10 retried=0 dead=0 released=0" in done.stdout
    assert Message.objects.filter(state=MessageState.READY, attempt=0).count() == 20


def test_worker__grace_period_over_exits_nonzero_and_leaves_the_lease(queue):
    enqueue_many(queue, [{"seconds": 30}])
    proc = start_command(
        "queue_worker", "--queue", "owners/jobs", "--handler", "sleep", "--grace", "1"
    )
    try:
        wait_for(lambda: Message.objects.filter(state=MessageState.CLAIMED).exists())
        # Claimed is not yet started: a SIGTERM between the claim's commit and
        # the handler's start releases the message and exits 0 (as it should).
        # The handler starts within milliseconds of the claim; give it time.
        time.sleep(1.0)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 1
    assert time.monotonic() - started < 10
    assert "grace period" in stderr
    assert Message.objects.get().state == MessageState.CLAIMED  # reclaimed once the lease lapses


def test_worker__polls_when_listen_is_disabled(queue):
    enqueue_many(queue, [{"n": i} for i in range(5)])
    proc = start_command(
        "queue_worker",
        "--queue",
        "owners/jobs",
        "--handler",
        "noop",
        QUEUE_LISTEN_NOTIFY="0",
        QUEUE_WORKER_POLL_INTERVAL="0.1",
    )
    try:
        wait_for(lambda: not Message.objects.exists())
        enqueue_many(queue, [{"n": 9}])
        wait_for(lambda: not Message.objects.exists(), timeout=5)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "waking by polling every 0.1s" in stderr


def test_worker__app_option_runs_only_that_apps_consumers(queue, group):
    from tests.factories import AppFactory

    AppFactory(slug="one", group=group)
    AppFactory(slug="two", group=group)
    trigger_services.trigger_create(
        group=group, collection_name="jobs", handler="noop", shared=True
    )
    enqueue_many(queue, [{"n": i} for i in range(5)])
    done = run_command("queue_worker", "--app", "two", "--until-empty")
    assert done.returncode == 0, done.stderr
    assert "jobs → noop as two" in done.stderr
    assert "as one" not in done.stderr
    assert not Message.objects.exists()


def test_worker__until_empty_without_consumers_exits_at_once():
    done = run_command("queue_worker", "--until-empty", timeout=20)
    assert done.returncode == 0, done.stderr
    assert "processed=0" in done.stdout


def test_worker__starts_no_thread_before_run(queue):
    """The command installs the signal handlers between building the Worker and
    running it: a slot thread started in the constructor could claim a message
    before them, and a SIGTERM in that window killed the process outright
    (status -15, the lease left to lapse) instead of stopping it gracefully."""
    import threading

    from groupqueues.worker import Lane, Worker, WorkerOptions

    lane = Lane(queue, "owners/jobs", "noop", batch=1, concurrency=2, visibility_timeout=30)
    before = set(threading.enumerate())
    worker = Worker([lane], WorkerOptions(maintenance=False, reload=False))
    assert set(threading.enumerate()) == before
    worker.request_stop()
    worker.run()  # starts the threads, sees the stop, joins the slots
    assert worker.summary()
