"""A worker holds no transaction open while a handler runs (issue 12): an open
transaction holds back the xmin horizon, so vacuum could remove none of the
rows the queue deletes meanwhile and every claim would walk them again."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from groupqueues import services
from groupqueues.models import Message, MessageState
from tests.factories import GroupFactory
from tests.groupqueues.workers import start_command, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

HANDLER_SECONDS = 3.0


def worker_backends() -> list[tuple[int, str | None, float | None]]:
    """(pid, state, seconds the transaction has been open) of every other
    connection to this database: the worker's, as nothing else connects to a
    test database."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid, state, extract(epoch FROM clock_timestamp() - xact_start)"
            " FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            "   AND backend_type = 'client backend'"
        )
        return [(pid, state, float(age) if age is not None else None)
                for pid, state, age in cur.fetchall()]  # fmt: skip


def test_worker__holds_no_transaction_open_while_a_handler_runs():
    queue = services.collection_create(group=GroupFactory(slug="slow"), name="jobs")
    services.message_enqueue(
        collection=queue, payload={"seconds": HANDLER_SECONDS}, enqueued_by="app:test"
    )
    worker = start_command(
        "queue_worker", "--queue", "slow/jobs", "--handler", "sleep", "--until-empty",
    )  # fmt: skip
    try:
        wait_for(lambda: Message.objects.filter(state=MessageState.CLAIMED).exists())
        seen, deadline = [], time.monotonic() + HANDLER_SECONDS - 0.5
        while time.monotonic() < deadline:  # the handler is sleeping meanwhile
            seen += worker_backends()
            time.sleep(0.05)
        assert Message.objects.filter(state=MessageState.CLAIMED).exists(), "handler ended early"
        _, err = worker.communicate()
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    assert not Message.objects.exists()
    assert seen, "no connection of the worker was seen"
    # A transaction open across the handler would be seen idle in transaction
    # and older than a second; the worker's own short transactions are neither
    # for long (they may be caught between two statements).
    held = [b for b in seen if b[2] is not None and b[2] > 1.0]
    assert not held, held
    idle_in_xact = {pid for pid, state, _ in seen if state and state.startswith("idle in")}
    lingering = [b for b in seen if b[0] in idle_in_xact and b[2] is not None and b[2] > 0.2]
    assert not lingering, lingering
