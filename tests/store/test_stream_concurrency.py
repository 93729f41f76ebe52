"""Offsets under concurrent appenders, with a reader racing them (real
processes, ``tests.store.stream_racer``): offsets increase in commit order.

The reader's every page must start right after the offset it asked from and
run on without a hole: with a hole, an entry below an offset the reader has
already seen would commit later (the "gap then fill" this rules out). Across
pages, no offset comes twice, and the reader ends with exactly 1..N, N being
every offset the appenders were given (dense: no offset lost or shared).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from store import streams
from store.models import StreamEntry
from tests.conftest import ROOT, is_postgres, subprocess_env
from tests.factories import GroupFactory

pytestmark = pytest.mark.django_db(transaction=True)


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.stream_racer", *args],
        cwd=ROOT, env=subprocess_env(), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def race(tmp_path: Any, *, appenders: int, batches: int) -> tuple[list[list[int]], list[int]]:
    """Run the appenders and one reader; (the reader's pages, every offset given)."""
    topic = streams.topic_create(group=GroupFactory(slug="race"), name="race")
    go = str(tmp_path / "go")
    writers = [spawn("append", str(topic.pk), str(i), go, str(batches)) for i in range(appenders)]
    # Each batch appends 2 to 9 entries: the reader stops after about half of
    # them, so it reads while the appenders append; the rest is read below.
    reader = spawn("read", str(topic.pk), "0", go, str(appenders * batches * 3))
    for proc in [*writers, reader]:
        assert proc.stdout and proc.stderr
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    (tmp_path / "go").touch()
    given: list[int] = []
    for proc in writers:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        given += json.loads(out)
    out, err = reader.communicate(timeout=180)
    assert reader.returncode == 0, err
    pages = json.loads(out)
    # The reader may stop before the last appends: read on to the end here.
    since = pages[-1][-1] if pages else 0
    while rest := streams.stream_read(topic=topic, since=since, limit=streams.READ_MAX).entries:
        pages.append([since] + [e.offset for e in rest])
        since = rest[-1].offset
    return pages, given


def assert_commit_order(pages: list[list[int]], given: list[int]) -> None:
    total = len(set(given))
    assert total == StreamEntry.objects.count()
    assert sorted(set(given)) == list(range(1, total + 1)), "offsets are not dense"
    seen: list[int] = []
    for since, *offsets in pages:
        expected = list(range(since + 1, since + 1 + len(offsets)))
        assert offsets == expected, f"after {since} the reader got {offsets}: a gap"
        seen += offsets
    assert len(seen) == len(set(seen)), "an offset came twice"
    assert seen == list(range(1, total + 1))
    assert len(pages) > 3, "the reader did not race the appenders"


@pytest.mark.postgres
def test_offsets__8_appender_processes_and_a_racing_reader_on_postgres(tmp_path):
    pages, given = race(tmp_path, appenders=8, batches=20)
    assert_commit_order(pages, given)


def test_offsets__3_appender_processes_and_a_racing_reader(tmp_path):
    if is_postgres():
        pytest.skip("the PostgreSQL variant runs 8 appenders")
    pages, given = race(tmp_path, appenders=3, batches=40)
    assert_commit_order(pages, given)
