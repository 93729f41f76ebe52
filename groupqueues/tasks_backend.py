"""A backend for Django's Tasks API that stores tasks as group-queue messages.

Configure it in ``TASKS`` (``django.tasks`` on Django ≥ 6, the ``django-tasks``
package on Django 5.2; both are supported)::

    TASKS = {"default": {
        "BACKEND": "groupqueues.tasks_backend.GroupQueueTaskBackend",
        "QUEUES": [],                    # any queue name (or list the allowed ones)
        "OPTIONS": {"GROUP": "tasks"},   # the group whose collections take the tasks
    }}

Each task queue name is a queue collection of that group. On first use the
backend creates the collection (defaults, ``default_max_attempts`` = 3 so a
worker crash is retried) and a trigger running the built-in ``django_task``
handler, so a bare ``manage.py queue_worker`` runs the tasks; set
``"CREATE_QUEUES": False`` in OPTIONS to require them to exist instead. The
group itself must exist.

``task.enqueue(...)`` writes a ``TaskRun`` row (the durable result) and the
message in one transaction: priority → message priority, ``run_after`` →
``deliver_after``. The worker imports the task by its module path (only
objects made with ``@task`` are run), marks the run RUNNING, calls it and
records SUCCESSFUL with the return value or FAILED with the exception class
and traceback. A task that raises is not retried (Django Tasks semantics): its
message dies ``failed``. ``get_result(id)`` reads the TaskRun.

Ordering keys (docs/ordering-and-limits.md): the backend's tasks are
``GroupQueueTask`` (its ``task_class``, so ``@task`` makes them), whose
``using()`` also takes ``ordering_key``::

    charge.using(ordering_key="order-42").enqueue(42)
    refund.using(ordering_key="order-42").enqueue(42)   # runs after charge, never beside it

The message carries the key: tasks with one key in a queue run one at a time,
in enqueue order (a task that fails dies and unblocks its key). The key is
checked when the task is made (a text of 1 to 200 characters, else
InvalidTaskError naming ``ordering_key``) and kept on the TaskRun, so a
result's ``task`` has it too.
"""

from __future__ import annotations

import contextlib
import json
import traceback
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from django.db import transaction
from django.utils.crypto import get_random_string
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    # Checked against what runs on the pinned Django 5.2: the django-tasks package. (The
    # Django stubs also describe Django 6's django.tasks, the same API under other names.)
    from django_tasks import TaskContext, TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import (
        InvalidTaskBackendError,
        InvalidTaskError,
        TaskResultDoesNotExist,
    )
    from django_tasks.signals import task_enqueued, task_finished, task_started
else:
    try:  # Django >= 6
        from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import TaskError
        from django.tasks.exceptions import InvalidTask as InvalidTaskError
        from django.tasks.exceptions import InvalidTaskBackend as InvalidTaskBackendError
        from django.tasks.exceptions import TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:  # Django 5.2 with the django-tasks package
        from django_tasks import TaskContext, TaskResult, TaskResultStatus
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskError
        from django_tasks.exceptions import (
            InvalidTaskBackendError,
            InvalidTaskError,
            TaskResultDoesNotExist,
        )
        from django_tasks.signals import task_enqueued, task_finished, task_started

from groupqueues import services
from groupqueues import validation as check
from groupqueues.exceptions import (
    CollectionExists,
    CollectionNotFound,
    InvalidQueueInput,
    TriggerExists,
)
from groupqueues.handlers import PermanentFailure
from groupqueues.models import Collection, TaskRun, TaskRunStatus, Trigger
from groupqueues.trigger_services import trigger_create
from principals.models import Group
from queueproject import clock

TASK_HANDLER = "django_task"
RESULT_ID_LENGTH = 32
ENQUEUED_BY = "tasks"


class TaskFailed(PermanentFailure):
    """The task raised; the TaskRun holds the error (no retry)."""


P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class GroupQueueTask(Task[P, T]):
    """A Django Task that may carry an ordering key (the backend's
    ``task_class``): ``task.using(ordering_key="order-42")``. ``@task`` is
    typed as returning a plain Task: typed code that sets a key says
    ``cast(GroupQueueTask[P, T], my_task).using(ordering_key=…)``."""

    ordering_key: str | None = None
    """Tasks with one key in a queue run one at a time, in enqueue order."""

    def using(self, *, ordering_key: str | None = None, **changes: Any) -> GroupQueueTask[P, T]:
        """``Task.using`` plus ``ordering_key`` (None: unchanged, as the
        others). Raises InvalidTaskError for a bad key."""
        task = super().using(**changes)
        if ordering_key is None:
            return task
        return replace(task, ordering_key=ordering_key)


def ordering_key_of(task: Task) -> str | None:
    """The task's ordering key (None for a plain Task, made with another
    backend's task class)."""
    return getattr(task, "ordering_key", None)


class GroupQueueTaskBackend(BaseTaskBackend):
    task_class = GroupQueueTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.group_slug = self.options.get("GROUP", "tasks")
        self.create_queues = self.options.get("CREATE_QUEUES", True)

    def validate_task(self, task: Task) -> None:
        """Django's checks, and the ordering key's (InvalidTaskError naming
        ``ordering_key``: a text of 1 to 200 characters)."""
        super().validate_task(task)
        key = ordering_key_of(task)
        if key is not None:
            try:
                check.check_text(key, "ordering_key", low=1, high=check.IDEMPOTENCY_KEY_MAX)
            except InvalidQueueInput as exc:
                raise InvalidTaskError(str(exc)) from None

    # --- enqueue ----------------------------------------------------------------
    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Store the run and its message in one transaction. Raises
        InvalidTaskError (validation), InvalidTaskBackendError (no such group,
        or no such queue with CREATE_QUEUES off)."""
        self.validate_task(task)
        now = clock.now()
        run = TaskRun(
            id=get_random_string(RESULT_ID_LENGTH), backend=self.alias, task_path=task.module_path,
            queue_name=task.queue_name, priority=task.priority,
            ordering_key=ordering_key_of(task), args=normalize_json(args),
            kwargs=normalize_json(kwargs), enqueued_at=now, run_after=task.run_after,
        )  # fmt: skip
        collection = self._collection(task.queue_name)
        with transaction.atomic():
            run.save(force_insert=True)
            message = services.message_enqueue(
                collection=collection, payload={"task_run": run.id}, enqueued_by=ENQUEUED_BY,
                priority=task.priority, deliver_after=task.run_after,
                ordering_key=run.ordering_key,
            )  # fmt: skip
            TaskRun.objects.filter(pk=run.pk).update(message_id=message.id)
        result = task_result(run, task)
        task_enqueued.send(type(self), task_result=result)
        return result

    def _collection(self, queue_name: str) -> Collection:
        group = Group.objects.filter(slug=self.group_slug).first()
        if group is None:
            raise InvalidTaskBackendError(
                f"Tasks backend {self.alias!r}: no group {self.group_slug!r} (OPTIONS GROUP)."
            )
        try:
            return services.collection_get(group=group, name=queue_name)
        except CollectionNotFound:
            if not self.create_queues:
                raise InvalidTaskBackendError(
                    f"Tasks backend {self.alias!r}: group {group.slug!r} has no queue "
                    f"{queue_name!r} and CREATE_QUEUES is off."
                ) from None
        return _create_queue(group, queue_name)

    # --- results ------------------------------------------------------------------
    def get_result(self, result_id: str) -> TaskResult:
        """The stored result. Raises TaskResultDoesNotExist."""
        run = TaskRun.objects.filter(pk=result_id, backend=self.alias).first()
        if run is None:
            raise TaskResultDoesNotExist(result_id)
        return task_result(run, _task_of(run))


def _create_queue(group: Group, name: str) -> Collection:
    """The collection and its ``django_task`` trigger, tolerating a concurrent
    creator."""
    try:
        collection = services.collection_create(group=group, name=name)
    except CollectionExists:
        return services.collection_get(group=group, name=name)
    if not Trigger.objects.filter(group=group, collection_name=name, handler=TASK_HANDLER).exists():
        with contextlib.suppress(TriggerExists):
            trigger_create(group=group, collection_name=name, handler=TASK_HANDLER)
    return collection


def _task_of(run: TaskRun) -> Task:
    """The ``@task`` object at ``run.task_path`` with the run's options.
    Raises TaskFailed when the path does not name a Task."""
    try:
        obj = import_string(run.task_path)
    except ImportError as exc:
        raise TaskFailed(f"cannot import task {run.task_path!r}: {exc}") from exc
    if not isinstance(obj, Task):
        raise TaskFailed(f"{run.task_path!r} is not a task (define it with @task)")
    task = obj.using(priority=run.priority, queue_name=run.queue_name, run_after=run.run_after,
                     backend=run.backend)  # fmt: skip
    if run.ordering_key is not None and isinstance(task, GroupQueueTask):
        task = replace(task, ordering_key=run.ordering_key)
    return task


def normalize_json(value: Any) -> Any:
    """``value`` as plain JSON types (tuples become lists); TypeError/ValueError
    for anything JSON cannot carry."""
    return json.loads(json.dumps(value, allow_nan=False))


def task_result(run: TaskRun, task: Task) -> TaskResult[Any]:
    result: TaskResult[Any] = TaskResult(
        task=task, id=run.id, status=TaskResultStatus(run.status), enqueued_at=run.enqueued_at,
        started_at=run.started_at, finished_at=run.finished_at,
        last_attempted_at=run.last_attempted_at, args=run.args, kwargs=run.kwargs,
        backend=run.backend,
        errors=[TaskError(exception_class_path=e["exception_class_path"],
                          traceback=e["traceback"]) for e in run.errors],
        worker_ids=list(run.worker_ids),
    )  # fmt: skip
    object.__setattr__(result, "_return_value", run.return_value)
    return result


# --- the worker side: state transitions of a run ---------------------------------


def task_run_execute(*, run_id: str, worker_id: str) -> None:
    """Run the task of ``run_id`` (the ``django_task`` handler): READY →
    RUNNING → SUCCESSFUL / FAILED. A finished run is not run again (a message
    delivered twice after a lost lease). Raises TaskFailed when the task
    raised (after recording it), so the message dies without a retry."""
    run = task_run_start(run_id=run_id, worker_id=worker_id)
    if run is None:
        return
    try:
        task = _task_of(run)
        _signal(task_started, run_id)
        value = _call(task, run)
    except Exception as exc:
        task_run_finish(run_id=run_id, error=exc)
        _signal(task_finished, run_id)
        raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
    task_run_finish(run_id=run_id, return_value=value)
    _signal(task_finished, run_id)


def _signal(signal: Any, run_id: str) -> None:
    """Send a Tasks signal with the run's current result; receivers' errors are
    logged by ``send_robust``, never raised into the run."""
    run = TaskRun.objects.get(pk=run_id)
    try:
        result = task_result(run, _task_of(run))
    except TaskFailed:
        return  # not a task: nothing to describe
    signal.send_robust(GroupQueueTaskBackend, task_result=result)


def _call(task: Task, run: TaskRun) -> Any:
    if task.takes_context:
        context = TaskContext(task_result=task_result(run, task))
        return normalize_json(task.call(context, *run.args, **run.kwargs))
    return normalize_json(task.call(*run.args, **run.kwargs))


def task_run_start(*, run_id: str, worker_id: str) -> TaskRun | None:
    """Mark the run RUNNING (from READY or RUNNING: a retry after a crash) and
    record the attempt; one conditional UPDATE under a row lock. None when the
    run is finished or gone."""
    now = clock.now()
    with transaction.atomic():
        run = (
            TaskRun.objects.select_for_update()
            .filter(pk=run_id, status__in=[TaskRunStatus.READY, TaskRunStatus.RUNNING])
            .first()
        )
        if run is None:
            return None
        run.status = TaskRunStatus.RUNNING
        run.started_at = run.started_at or now
        run.last_attempted_at = now
        run.worker_ids = [*run.worker_ids, worker_id]
        run.save(update_fields=["status", "started_at", "last_attempted_at", "worker_ids"])
    return run


def task_run_finish(
    *, run_id: str, return_value: Any = None, error: BaseException | None = None
) -> None:
    """Record the end of a RUNNING run: SUCCESSFUL with ``return_value`` or
    FAILED with the error's class path and traceback (fenced by RUNNING)."""
    changes: dict[str, Any] = {"finished_at": clock.now()}
    if error is None:
        changes.update(status=TaskRunStatus.SUCCESSFUL, return_value=return_value)
    else:
        entry = {
            "exception_class_path": f"{type(error).__module__}.{type(error).__qualname__}",
            "traceback": "".join(traceback.format_exception(error)),
        }
        errors = TaskRun.objects.filter(pk=run_id).values_list("errors", flat=True).first() or []
        changes.update(status=TaskRunStatus.FAILED, errors=[*errors, entry])
    TaskRun.objects.filter(pk=run_id, status=TaskRunStatus.RUNNING).update(**changes)
