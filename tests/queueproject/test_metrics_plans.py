"""A ``/metrics`` scrape does not scan dead history (issue 16): with
1,000,000 dead messages (bulk-inserted with generate_series) every query of
the scrape is planned and run without a sequential scan of the message
table and without reading the dead rows; the number of queries does not
grow with them (PostgreSQL)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from groupqueues import services
from queueproject import metrics
from tests.factories import GroupFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

# The million runs in the slow set (about 45 s of bulk insert on a
# shared machine); the default run pins the same plans with 100,000.
DEAD_ROWS = [
    pytest.param(100_000, id="100k"),
    pytest.param(1_000_000, id="1M", marks=pytest.mark.slow),
]
MESSAGE_TABLE = "groupqueues_message"

# Every NOT NULL column of the message table, filled in the database.
BULK_DEAD = f"""
INSERT INTO {MESSAGE_TABLE} (id, group_id, collection_id, payload, priority, enqueued_at,
    deliver_after, state, claimed_by, attempt, max_attempts, dead_reason, died_at, enqueued_by)
SELECT gen_random_uuid(), %(group)s, %(collection)s, '{{}}'::jsonb, 0, now(), now(), 'dead', '',
    3, 3, CASE WHEN i %% 2 = 0 THEN 'exhausted' ELSE 'failed' END,
    now() - (i || ' seconds')::interval, ''
FROM generate_series(1, %(n)s) AS i
"""


def scrape_queries() -> tuple[bytes, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        text = metrics.render()
    return text, [q["sql"] for q in captured.captured_queries]


def plan_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    nodes = [plan]
    for child in plan.get("Plans", []):
        nodes += plan_nodes(child)
    return nodes


def explain(sql: str) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        (raw,) = cursor.fetchone()
    doc = raw if isinstance(raw, list) else json.loads(raw)
    return plan_nodes(doc[0]["Plan"])


@pytest.fixture
def queue():
    return services.collection_create(group=GroupFactory(slug="big"), name="jobs")


@pytest.mark.parametrize("dead_rows", DEAD_ROWS)
def test_scrape__reads_no_dead_history_with_a_million_dead_rows(queue, dead_rows):
    for i in range(20):
        services.message_enqueue(collection=queue, payload={"n": i}, enqueued_by="app:t")
    services.message_claim(collection=queue, worker_id="w", n=5)
    services.dead_counts_refresh()
    _, before = scrape_queries()

    with connection.cursor() as cursor:
        cursor.execute(BULK_DEAD, {"group": queue.group_id, "collection": queue.pk, "n": dead_rows})
        cursor.execute(f"ANALYZE {MESSAGE_TABLE}")
    services.dead_counts_refresh()  # the maintenance leader's job, off the scrape
    text, queries = scrape_queries()

    assert len(queries) == len(before)  # no query per row, per state or per reason
    exhausted = (
        f'queue_dead_messages{{group="big",queue="jobs",reason="exhausted"}} {dead_rows / 2}'
    )
    assert exhausted.encode() in text
    assert b'queue_messages{group="big",queue="jobs",state="ready"} 15.0' in text
    assert b'queue_messages{group="big",queue="jobs",state="claimed"} 5.0' in text
    for sql in queries:
        for node in explain(sql):
            on_messages = node.get("Relation Name") == MESSAGE_TABLE
            assert not (on_messages and node["Node Type"] == "Seq Scan"), (sql, node)
            assert node.get("Index Name") != "gq_msg_dead", (sql, node)
            if on_messages:  # only live rows are read
                assert node["Actual Rows"] * node["Actual Loops"] <= 100, (sql, node)
