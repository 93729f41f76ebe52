"""stream_create, stream_append, stream_read, stream_reset, stream_prune."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from store import streams
from store.models import Topic

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_append_read_commit_reset(tree):
    assert run("stream_create", "child", "audit", "--max-entries", "100",
               "--no-age-limit").startswith("Created topic child/audit")  # fmt: skip
    topic = Topic.objects.get()
    assert (topic.max_entries, topic.retention_seconds) == (100, None)
    assert run("stream_append", "child", "audit", '{"a": 1}', '"b"', "3").split() == ["1", "2", "3"]
    assert run("stream_append", "child", "audit", "4", "--key", "k").strip() == "4"
    assert run("stream_append", "child", "audit", "5", "--key", "k").strip() == "4"
    lines = run("stream_read", "child", "audit", "--since", "1", "--limit", "2").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"offset": 2, "payload": "b"}, {"offset": 3, "payload": 3},
    ]  # fmt: skip
    run("stream_read", "child", "audit", "--consumer", "c", "--limit", "3", "--commit")
    assert streams.consumer_get(topic=topic, name="c").committed_offset == 3
    out = run("stream_read", "child", "audit", "--consumer", "c")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [4]
    assert "at 1 (lag 3)" in run("stream_reset", "child", "audit", "c", "--offset", "1")
    assert "at 4 (lag 0)" in run("stream_reset", "child", "audit", "c", "--latest")


def test_prune_and_errors(tree):
    run("stream_create", "child", "audit", "--max-entries", "2")
    run("stream_append", "child", "audit", "1", "2", "3", "4", "5")
    assert run("stream_prune").strip() == "Pruned 3 entries."
    with pytest.raises(CommandError, match="first available offset is 4"):
        run("stream_read", "child", "audit")
    with pytest.raises(CommandError, match="no topic"):
        run("stream_append", "child", "nope", "1")
    with pytest.raises(CommandError):
        run("stream_append", "child", "audit", "1", "2", "--key", "k")
    with pytest.raises(CommandError, match="not both"):
        run("stream_read", "child", "audit", "--since", "3", "--consumer", "c")
