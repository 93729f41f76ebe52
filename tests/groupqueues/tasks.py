"""Django Tasks used by the tasks backend tests (importable by worker subprocesses)."""

import time

from django_tasks import TaskContext, task


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def explode(message: str) -> None:
    raise ValueError(message)


@task
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


@task(takes_context=True)
def which_attempt(context: TaskContext) -> int:
    return context.attempt


def not_a_task() -> None:  # a plain function: the worker must refuse it
    raise AssertionError("must never run")


@task
def stamp(label: str, seconds: float) -> str:
    time.sleep(seconds)
    return label
