"""create_queue, queue_stats and the demo data."""

import subprocess
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from groupqueues import services
from groupqueues.models import Collection, Message
from tests.conftest import manage_cmd, subprocess_env
from tests.factories import GroupFactory
from tests.groupqueues.conftest import enqueue

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_queue__with_settings():
    GroupFactory(slug="acme")
    options = "--max-attempts 5 --visibility-timeout 60 --max-payload-bytes 1000 --max-depth 10"
    out = run("create_queue", "acme", "emails", *options.split(), "--dead-retention", "0")
    assert "Created queue acme/emails" in out
    queue = Collection.objects.get(name="emails")
    assert (queue.default_max_attempts, queue.visibility_timeout, queue.max_payload_bytes) == (
        5, 60, 1000,
    )  # fmt: skip
    assert (queue.max_depth, queue.dead_retention, queue.kind) == (10, 0, "queue")


def test_create_queue__with_keys_fairness_and_limits():
    GroupFactory(slug="acme")
    options = "--fairness enqueuer --max-in-flight 8 --max-in-flight-per-key 2 --rate-limit 50/s"
    out = run("create_queue", "acme", "fair", *options.split())
    assert "fairness=enqueuer" in out and "rate_limit=50/s" in out
    queue = Collection.objects.get(name="fair")
    assert (queue.fairness, queue.max_in_flight, queue.max_in_flight_per_key, queue.rate_limit) == (
        "enqueuer", 8, 2, "50/s",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create_queue", "acme", "q", "--rate-limit", "5/week"), "rate_limit"),
        (("create_queue", "missing", "q"), "No group"),
        (("create_queue", "acme", "bad name"), "name"),
        (("create_queue", "acme", "dup"), "already declares"),
        (("create_queue", "acme", "q", "--visibility-timeout", "99999"), "visibility_timeout"),
        (("queue_stats", "acme/missing"), "no queue"),
        (("queue_stats", "no-slash"), "GROUP/NAME"),
    ],
)
def test_commands__refuse_bad_arguments(args, message):
    group = GroupFactory(slug="acme")
    services.collection_create(group=group, name="dup")
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_create_queue__bad_number_exits_non_zero():
    result = subprocess.run(
        manage_cmd("create_queue", "acme", "q", "--max-attempts", "0"),
        env=subprocess_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "must be greater than 0" in result.stderr


def test_queue_stats__depth_table():
    group = GroupFactory(slug="acme")
    queue = services.collection_create(group=group, name="emails")
    services.collection_create(group=group, name="idle", paused=True)
    enqueue(queue)
    enqueue(queue, delay_seconds=60)
    lines = run("queue_stats").splitlines()
    assert lines[0].split() == [
        "queue", "depth", "pending", "delayed", "in_flight", "dead", "oldest_pending",
    ]  # fmt: skip
    assert lines[1].split()[:6] == ["acme/emails", "2", "1", "1", "0", "0"]
    assert lines[2].split() == ["acme/idle", "(paused)", "0", "0", "0", "0", "0", "-"]
    assert len(run("queue_stats", "acme/emails").splitlines()) == 2


def test_demo__is_idempotent():
    from groupqueues import demo
    from principals import demo as principals_demo

    logged: list[str] = []
    principals_demo.seed(admin_user=None, log=logged.append)
    demo.seed(admin_user=None, log=logged.append)
    demo.seed(admin_user=None, log=logged.append)
    assert set(Collection.objects.values_list("name", flat=True)) == {"emails", "thumbnails"}
    assert Message.objects.count() == 5
    assert sum("messages in" in line for line in logged) == 2
