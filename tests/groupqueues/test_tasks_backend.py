"""The Django Tasks backend on group queues (SPEC §2): enqueue, run by
``queue_worker``, results, failure, priority, run_after and ordering keys."""

from __future__ import annotations

import itertools
import subprocess
from datetime import datetime, timedelta
from typing import Any

import pytest
from django_tasks import TaskResultStatus, task_backends
from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist

from groupqueues import services
from groupqueues.models import Collection, Message, TaskRun, Trigger
from groupqueues.tasks_backend import GroupQueueTask
from queueproject import clock
from tests.factories import GroupFactory
from tests.groupqueues import tasks
from tests.groupqueues.workers import run_command, start_command, wait_for


@pytest.fixture
def tasks_group(db):
    return GroupFactory(slug="tasks")


def drain(*options: str) -> subprocess.CompletedProcess:
    done = run_command("queue_worker", "--until-empty", *options)
    assert done.returncode == 0, done.stderr
    return done


def test_enqueue__stores_a_ready_result_and_a_message(tasks_group):
    result = tasks.add.using(priority=7).enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    run = TaskRun.objects.get(pk=result.id)
    assert (run.task_path, run.args, run.priority) == ("tests.groupqueues.tasks.add", [2, 3], 7)
    assert run.message_id is not None
    message = Message.objects.get(id=run.message_id)
    assert message.payload == {"task_run": result.id}
    assert message.priority == 7
    assert str(message.collection) == "tasks/default"
    assert Trigger.objects.filter(group=tasks_group, collection_name="default",
                                  handler="django_task").exists()  # fmt: skip


def test_enqueue__without_the_group_is_a_configuration_error(db):
    with pytest.raises(Exception, match="no group 'tasks'"):
        tasks.add.enqueue(1, 1)


def test_get_result__unknown_id(tasks_group):
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("nope")


@pytest.mark.django_db(transaction=True)
def test_run__worker_runs_the_task_and_records_success(tasks_group):
    result = tasks.add.enqueue(2, 3)
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.started_at and result.finished_at and len(result.worker_ids) == 1
    assert not Message.objects.exists()
    context = tasks.which_attempt.enqueue()
    drain()
    assert tasks.which_attempt.get_result(context.id).return_value == 1


@pytest.mark.django_db(transaction=True)
def test_run__status_goes_ready_running_successful(tasks_group):
    result = tasks.nap.enqueue(1.0)
    assert result.status == TaskResultStatus.READY
    worker = start_command("queue_worker", "--until-empty")
    try:
        wait_for(lambda: tasks.nap.get_result(result.id).status == TaskResultStatus.RUNNING)
        worker.communicate(timeout=30)
    finally:
        worker.kill()
    assert tasks.nap.get_result(result.id).return_value == "rested"


@pytest.mark.django_db(transaction=True)
def test_run__failure_records_the_exception_and_is_not_retried(tasks_group):
    result = tasks.explode.enqueue("kaboom")
    drain()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    (error,) = result.errors
    assert error.exception_class is ValueError
    assert "kaboom" in error.traceback and "Traceback" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    message = Message.objects.get()
    assert (message.dead_reason, message.attempt) == ("failed", 1)


@pytest.mark.django_db(transaction=True)
def test_run__refuses_a_path_that_is_not_a_task(tasks_group):
    result = tasks.add.enqueue(1, 1)
    TaskRun.objects.filter(pk=result.id).update(task_path="tests.groupqueues.tasks.not_a_task")
    drain()
    run = TaskRun.objects.get(pk=result.id)
    assert run.status == "FAILED"
    assert "is not a task" in run.errors[0]["traceback"]


@pytest.mark.django_db(transaction=True)
def test_priority__higher_runs_first(tasks_group):
    low = [tasks.add.using(priority=-5).enqueue(i, 0) for i in range(3)]
    high = [tasks.add.using(priority=50).enqueue(i, 1) for i in range(3)]
    drain()
    started: dict[str, datetime] = {}
    for r in low + high:
        started_at = TaskRun.objects.get(pk=r.id).started_at
        assert started_at is not None, r.id
        started[r.id] = started_at
    assert max(started[r.id] for r in high) <= min(started[r.id] for r in low)


@pytest.mark.django_db(transaction=True)
def test_run_after__not_run_before_its_time(tasks_group):
    later = clock.now() + timedelta(hours=1)
    result = tasks.add.using(run_after=later).enqueue(1, 2)
    soon = tasks.add.enqueue(3, 4)
    message_id = TaskRun.objects.get(pk=result.id).message_id
    assert message_id is not None
    message = Message.objects.get(id=message_id)
    assert message.deliver_after == later
    drain()
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY
    assert tasks.add.get_result(soon.id).status == TaskResultStatus.SUCCESSFUL


def test_enqueue__sends_the_enqueued_signal(tasks_group):
    from django_tasks.signals import task_enqueued

    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        result = tasks.add.enqueue(1, 2)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [result.id]


# --- ordering keys (SPEC §7) --------------------------------------------------------


def keyed(t: Any) -> GroupQueueTask:
    """``t`` as the backend's task class (``@task`` is typed as a plain Task)."""
    assert isinstance(t, GroupQueueTask)
    return t


def message_of(result: Any) -> Message:
    message_id = TaskRun.objects.get(pk=result.id).message_id
    assert message_id is not None
    return Message.objects.get(id=message_id)


def test_ordering_key__the_message_and_the_result_carry_it(tasks_group):
    task = keyed(tasks.add).using(ordering_key="order-42", priority=3)
    assert (task.ordering_key, task.priority) == ("order-42", 3)
    assert task.using(priority=4).ordering_key == "order-42"  # kept by later using()
    result = task.enqueue(1, 2)
    assert TaskRun.objects.get(pk=result.id).ordering_key == "order-42"
    assert message_of(result).ordering_key == "order-42"
    assert keyed(task_backends["default"].get_result(result.id).task).ordering_key == "order-42"
    assert message_of(tasks.add.enqueue(1, 2)).ordering_key is None


@pytest.mark.parametrize("bad", ["", "x" * 201, 42, "nul\x00"])
def test_ordering_key__a_bad_key_is_refused_naming_it(tasks_group, bad):
    with pytest.raises(InvalidTaskError, match="ordering_key: Must"):
        keyed(tasks.add).using(ordering_key=bad)
    assert not TaskRun.objects.exists() and not Message.objects.exists()


def test_ordering_key__one_claim_hands_out_only_the_head(tasks_group):
    first = keyed(tasks.add).using(ordering_key="k").enqueue(1, 1)
    keyed(tasks.add).using(ordering_key="k").enqueue(2, 2)
    other = tasks.add.enqueue(3, 3)
    collection = Collection.objects.get(group=tasks_group, name="default")
    claimed = services.message_claim(collection=collection, worker_id="w", n=10)
    runs = {TaskRun.objects.get(message_id=m.id).pk for m in claimed}
    assert runs == {first.id, other.id}


@pytest.mark.django_db(transaction=True)
def test_ordering_key__tasks_of_one_key_run_one_at_a_time_in_order(tasks_group):
    one_key = keyed(tasks.stamp).using(ordering_key="order-7")
    results = [one_key.enqueue(f"k{i}", 0.3) for i in range(3)]
    # four slots claiming one message each: without the key they would overlap
    Trigger.objects.filter(group=tasks_group).update(concurrency=4, batch_size=1)
    drain("--concurrency", "4")
    runs = [TaskRun.objects.get(pk=r.id) for r in results]
    assert [r.return_value for r in runs] == ["k0", "k1", "k2"]
    for earlier, later in itertools.pairwise(runs):
        assert earlier.finished_at is not None and later.started_at is not None
        assert earlier.finished_at <= later.started_at
