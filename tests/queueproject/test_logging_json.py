"""``LOG_FORMAT=json``: every line the worker, maintenance, the scheduler and
the dispatcher log is one JSON object (``json.loads`` on each stderr line);
the text format stays the default."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from groupqueues import services
from queueproject import clock
from store.schedules import schedule_create
from tests.factories import GroupFactory
from tests.groupqueues.workers import per_message, run_command

pytestmark = pytest.mark.django_db(transaction=True)


def json_lines(stderr: str) -> list[dict]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "nothing was logged"
    parsed = [json.loads(line) for line in lines]  # raises on any non-JSON line
    assert all(isinstance(p, dict) and {"time", "level", "logger", "event"} <= set(p)
               for p in parsed), parsed  # fmt: skip
    return parsed


@pytest.fixture
def queue():
    group = GroupFactory(slug="logs")
    return services.collection_create(group=group, name="jobs", default_max_attempts=1)


def test_worker__every_line_is_json_with_the_message_fields(queue):
    for payload in ({"n": 1}, {"n": 2}, {"poison": "fatal"}):
        services.message_enqueue(collection=queue, payload=payload, enqueued_by="app:t")
    done = run_command("queue_worker", "--queue", "logs/jobs", "--handler", "poison",
                       "--worker-id", "json-w", "--until-empty", LOG_FORMAT="json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = json_lines(done.stderr)
    outcomes = per_message([x for x in lines if x["event"] in ("message", "messages")])
    assert sorted(x["outcome"] for x in outcomes) == ["acked", "acked", "dead"]
    for x in outcomes:
        assert x["queue"] == "logs/jobs" and x["worker"] == "json-w" and x["attempt"] == 1
        assert x["id"] and x["duration_ms"] >= 0 and x["logger"] == "groupqueues.worker"
    assert any(x["logger"] == "groupqueues.worker" and x["event"].startswith("worker json-w")
               for x in lines)  # fmt: skip
    assert all(x["worker"] == "json-w" for x in lines)
    assert "error" in next(x for x in outcomes if x["outcome"] == "dead")


@pytest.mark.parametrize(
    "command",
    [
        ("queue_maintenance", "--once", "--owner", "json-m"),
        ("schedule_tick", "--once", "--owner", "json-s"),
        ("session_dispatch", "--once"),
    ],
)
def test_maintenance_scheduler_dispatcher__lines_are_json(command, queue):
    # A due schedule, so that the scheduler has something to fire and log.
    schedule = schedule_create(group=queue.group, name="every", collection="jobs",
                               expression="@hourly")  # fmt: skip
    overdue = clock.now() - timedelta(hours=2)  # an hourly boundary has passed
    type(schedule).objects.filter(pk=schedule.pk).update(next_at=overdue)
    done = run_command(*command, LOG_FORMAT="json", LOG_LEVEL="DEBUG")
    assert done.returncode == 0, done.stderr
    json_lines(done.stderr)


def test_text_is_the_default(queue):
    services.message_enqueue(collection=queue, payload={}, enqueued_by="app:t")
    done = run_command("queue_worker", "--queue", "logs/jobs", "--handler", "noop", "--until-empty")
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert not first.startswith("{") and " INFO groupqueues.worker " in first
