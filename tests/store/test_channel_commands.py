"""create_channel and channel_publish (in-process call_command)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from store import channels

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def test_create_then_publish_prints_ids(tree):
    assert "Created channel" in run("create_channel", "child", "news")
    assert run("channel_publish", "child", "news", '{"a": 1}') == "1"
    assert run("channel_publish", "child", "news", "2", "--idempotency-key", "k") == "2"
    assert run("channel_publish", "child", "news", "3", "--idempotency-key", "k") == "2"
    channel = channels.channel_get(group=tree["child"], name="news")
    assert [n.payload for n in channels.notifications_after(channel=channel, after=0)] == [
        {"a": 1}, 2,
    ]  # fmt: skip


def test_errors_are_command_errors(tree):
    with pytest.raises(CommandError):
        run("create_channel", "child", "bad name")
    with pytest.raises(CommandError):
        run("channel_publish", "child", "missing", "1")
