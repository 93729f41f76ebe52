"""create_schedule and schedule_list (schedule_tick runs as a real
subprocess in test_schedule_concurrency)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from groupqueues import services as queues
from store.models import Schedule

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(tree):
    return queues.collection_create(group=tree["root"], name="jobs")


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_schedule__creates_and_updates_with_every_option(tree, jobs):
    out = run("create_schedule", "child", "nightly", "--collection", "jobs", "--schedule",
              "0 3 * * *", "--timezone", "Europe/Berlin", "--payload", '{"a": 1}', "--priority",
              "5", "--max-attempts", "2", "--expires-in", "60", "--catch-up", "3")  # fmt: skip
    assert out.startswith("Created schedule root/child/nightly")
    schedule = Schedule.objects.get()
    assert (schedule.payload, schedule.priority, schedule.max_attempts, schedule.catch_up) == (
        {"a": 1}, 5, 2, 3)  # fmt: skip
    assert schedule.expires_in_seconds == 60 and schedule.timezone == "Europe/Berlin"
    out = run("create_schedule", "child", "nightly", "--collection", "jobs", "--schedule",
              "@hourly", "--update")  # fmt: skip
    assert out.startswith("Updated") and Schedule.objects.get().expression == "@hourly"


@pytest.mark.parametrize(
    "extra",
    [["--schedule", "61 * * * *"], ["--schedule", "@daily", "--timezone", "No/Where"],
     ["--schedule", "@daily", "--payload", "{bad"]],
)  # fmt: skip
def test_create_schedule__bad_input_fails_clearly(tree, jobs, extra):
    with pytest.raises((CommandError, SystemExit)):
        run("create_schedule", "child", "s", "--collection", "jobs", *extra)
    assert not Schedule.objects.exists()


def test_schedule_list__table_and_json(tree, jobs):
    run("create_schedule", "child", "s", "--collection", "jobs", "--schedule", "@every 5m")
    assert "child/s\t'@every 5m' (UTC) -> jobs" in run("schedule_list")
    (row,) = json.loads(run("schedule_list", "--json"))
    assert row["name"] == "s" and len(row["upcoming"]) == 5
