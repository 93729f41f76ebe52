"""``create_trigger`` and the demo consumers (SPEC §5)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from groupqueues import demo_consumers, services
from groupqueues.models import Consumer, Message, Trigger
from principals import demo as principals_demo


@pytest.fixture
def jobs(tree):
    return services.collection_create(group=tree["root"], name="jobs")


def test_create_trigger__shared_with_options(tree, jobs, capsys):
    call_command(
        "create_trigger",
        "child",
        "jobs",
        "--handler",
        "noop",
        "--shared",
        "--concurrency",
        "3",
        "--batch",
        "20",
    )
    trigger = Trigger.objects.get()
    assert (trigger.shared, trigger.concurrency, trigger.batch_size) == (True, 3, 20)
    assert Consumer.objects.count() == 2
    assert "2 consumer(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["nogroup", "jobs", "--handler", "noop"], "nogroup"),
        (["root", "nope", "--handler", "noop"], "No queue"),
        (["root", "jobs", "--handler", "nope"], "registered"),
        (["root", "jobs", "--handler", "webhook"], "shared"),
    ],
)
def test_create_trigger__bad_arguments(tree, jobs, args, problem):
    with pytest.raises(CommandError, match=problem):
        call_command("create_trigger", *args)


def test_create_trigger__duplicate_is_refused(tree, jobs):
    call_command("create_trigger", "root", "jobs", "--handler", "noop")
    with pytest.raises(CommandError, match="already"):
        call_command("create_trigger", "root", "jobs", "--handler", "noop")


def test_demo__triggers_and_messages_idempotently(db):
    principals_demo.seed(admin_user=None, log=lambda m: None)
    for _ in range(2):
        demo_consumers.seed(admin_user=None, log=lambda m: None)
    assert sorted(str(t) for t in Trigger.objects.all()) == [
        "acme/emails → log",
        "acme/thumbnails → noop",
    ]
    assert Message.objects.count() == 2 * demo_consumers.DEMO_MESSAGES
    assert Consumer.objects.filter(trigger__shared=True).count() == 2  # storefront, billing
