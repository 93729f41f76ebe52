"""The hot queries: how many each operation sends, and (PostgreSQL) that they
use their partial indexes rather than scanning the message table."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from groupqueues import services, sql
from queueproject import clock
from tests.conftest import is_postgres
from tests.factories import GroupFactory
from tests.groupqueues.conftest import WORKER, claim, enqueue

pytestmark = pytest.mark.django_db


def expect(postgres: int, sqlite: int) -> int:
    """Queries on this database. On SQLite the service's own transaction shows
    as SAVEPOINT + RELEASE inside the test's transaction (2 of the count)."""
    return postgres if is_postgres() else sqlite


def test_claim__query_count_is_pinned(queue, django_assert_num_queries):
    for i in range(5):
        enqueue(queue, i)
    # PostgreSQL: the one locked-CTE UPDATE … RETURNING, in autocommit. SQLite:
    # paused check, two candidate reads, the claiming UPDATEs (one executemany),
    # the read-back.
    with django_assert_num_queries(expect(1, 2 + 5)):
        assert len(claim(queue, 3)) == 3


def test_ack__query_count_is_pinned(queue, django_assert_num_queries):
    enqueue(queue)
    enqueue(queue)
    first, second = claim(queue, 2)
    with django_assert_num_queries(1):
        services.message_ack(collection=queue, id=first.id, claim_token=first.claim_token)
    # one DELETE … RETURNING on both databases
    with django_assert_num_queries(expect(1, 1)):
        services.message_ack_batch(collection=queue, acks=[(second.id, second.claim_token)])


def test_ack_and_claim__query_count_is_pinned(queue, django_assert_num_queries):
    enqueue(queue)
    enqueue(queue)
    (held,) = claim(queue, 1)
    # PostgreSQL: the ack and the claim in one statement. SQLite: the ack's
    # DELETE, then the claim as above.
    with django_assert_num_queries(expect(1, 1 + 2 + 5)):
        result = services.message_ack_and_claim(
            collection=queue, id=held.id, claim_token=held.claim_token, worker_id=WORKER
        )
    assert result.acked and len(result.messages) == 1


def test_ack_batch_and_claim__query_count_is_pinned(queue, django_assert_num_queries):
    for _ in range(4):
        enqueue(queue)
    held = claim(queue, 2)
    # PostgreSQL: the acks and the claim in one statement. SQLite: the batch
    # ack's DELETE, then the claim as above.
    with django_assert_num_queries(expect(1, 1 + 2 + 5)):
        result = services.message_ack_batch_and_claim(
            collection=queue, acks=[(m.id, m.claim_token) for m in held], worker_id=WORKER, n=2
        )
    assert result.acks.acked == 2 and len(result.messages) == 2


def test_enqueue__query_count_is_pinned(queue, django_assert_num_queries):
    # PostgreSQL: one INSERT with the collection lock and the wake-up folded
    # in, in autocommit. SQLite: the collection row is read (it must still
    # exist), then the INSERT.
    with django_assert_num_queries(expect(1, 2 + 2)):
        enqueue(queue)
    batch = [services.NewMessage(payload=i) for i in range(50)]
    # SQLite: Django's bulk_create splits at 999 parameters (two INSERTs here).
    with django_assert_num_queries(expect(1, 2 + 3)):
        services.message_enqueue_batch(collection=queue, messages=batch, enqueued_by="t")


@pytest.mark.postgres
def test_hot_statements__are_prepared_once_and_keep_their_generic_plan(queue):
    # Django opens connections with psycopg's prepared statements off; the
    # claim, ack and enqueue must still be prepared (parsed and planned once
    # per connection), and the claim must not be re-planned on every call.
    for i in range(8):
        enqueue(queue, i)
    for _ in range(8):
        (m,) = claim(queue, 1)
        services.message_ack(collection=queue, id=m.id, claim_token=m.claim_token)
    with connection.cursor() as cur:
        cur.execute("SHOW plan_cache_mode")
        assert cur.fetchone()[0] == "force_generic_plan"
        cur.execute("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        prepared = cur.fetchall()
    uses = {name: [(g, c) for text, g, c in prepared if marker in text]
            for name, marker in (("claim", "lapsed AS MATERIALIZED"),
                                 ("ack", "DELETE FROM groupqueues_message\nWHERE id ="),
                                 ("enqueue", "INSERT INTO groupqueues_message"))}  # fmt: skip
    assert uses["claim"] == [(8, 0)]  # one statement, planned generically each time
    assert uses["ack"] == [(8, 0)]
    assert len(uses["enqueue"]) == 1 and uses["enqueue"][0][1] == 0


def test_prepared_statements__off_sends_plain_statements(queue, settings):
    settings.QUEUE_PREPARED_STATEMENTS = False  # e.g. behind PgBouncer in transaction mode
    enqueue(queue)
    (m,) = claim(queue, 1)
    services.message_ack(collection=queue, id=m.id, claim_token=m.claim_token)
    if is_postgres():
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                        ["%lapsed AS MATERIALIZED%"])  # fmt: skip
            assert cur.fetchone()[0] == 0


# ------------------------------------------------------------ EXPLAIN (PostgreSQL)


def _bulk_rows(queue, count, state):
    """Insert ``count`` rows in ``state`` with one statement (generate_series)."""
    dead = state == "dead"
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO groupqueues_message (id, group_id, collection_id, payload, priority,
                enqueued_at, deliver_after, state, claimed_by, attempt, max_attempts,
                dead_reason, died_at, enqueued_by)
            SELECT gen_random_uuid(), %(group)s, %(collection)s, to_jsonb(i), 0, %(now)s,
                %(now)s, %(state)s, '', %(attempt)s, 3, %(reason)s, %(died)s, 'bulk'
            FROM generate_series(1, %(count)s) AS i
            """,
            {"group": queue.group_id, "collection": queue.pk, "now": clock.now(),
             "state": state, "attempt": 3 if dead else 0, "reason": "failed" if dead else None,
             "died": clock.now() if dead else None, "count": count},
        )  # fmt: skip


def test_sqlite_claim_and_holder_actions__never_scan_the_message_table(queue, group):
    # Beside another collection's rows, every statement of a claim, the acks,
    # extend, nack and release reads through an index: the batch ack's
    # row-value IN alone made SQLite scan the whole table (23 ms per ack of
    # 100 beside 130,000 rows).
    if is_postgres():
        pytest.skip("SQLite plans (PostgreSQL: the EXPLAIN tests below)")
    other = services.collection_create(group=group, name="other")
    services.message_enqueue_batch(collection=other, enqueued_by="t", messages=[
        services.NewMessage(payload=i) for i in range(300)
    ])  # fmt: skip
    for i in range(7):
        enqueue(queue, i)
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    with CaptureQueriesContext(connection) as ctx:
        held = claim(queue, 2)
        services.message_ack_batch(collection=queue, acks=[(m.id, m.claim_token) for m in held])
        held = claim(queue, 2)
        a, b = services.message_ack_batch_and_claim(
            collection=queue, acks=[(m.id, m.claim_token) for m in held], worker_id=WORKER, n=2
        ).messages
        services.message_extend(collection=queue, id=a.id, claim_token=a.claim_token,
                                visibility_timeout=60)  # fmt: skip
        services.message_ack(collection=queue, id=a.id, claim_token=a.claim_token)
        services.message_nack(collection=queue, id=b.id, claim_token=b.claim_token)
        (c,) = claim(queue, 1)
        services.message_release(collection=queue, id=c.id, claim_token=c.claim_token)
    statements = [q["sql"] for q in ctx.captured_queries
                  if q["sql"].lstrip().startswith(("SELECT", "DELETE", "UPDATE"))]  # fmt: skip
    assert any("DELETE" in q for q in statements)
    for query in statements:
        with connection.cursor() as cur:
            cur.execute("EXPLAIN QUERY PLAN " + query)
            plan = " | ".join(row[-1] for row in cur.fetchall())
        assert "SCAN groupqueues_message" not in plan, (query, plan)


def _plan(query, params):
    with connection.cursor() as cur:
        cur.execute("EXPLAIN " + query, params)
        return "\n".join(row[0] for row in cur.fetchall())


@pytest.fixture
def big_queue(transactional_db):
    """A queue with 100,000 claimable and 100,000 dead messages, beside another
    queue's 100,000 dead messages; vacuumed and analysed as autovacuum would."""
    group = GroupFactory()
    queue = services.collection_create(group=group, name="big")
    other = services.collection_create(group=group, name="other")
    _bulk_rows(queue, 100_000, "ready")
    _bulk_rows(queue, 100_000, "dead")
    _bulk_rows(other, 100_000, "dead")
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE groupqueues_message")
    return queue


def _generic_plan(query, types):
    """The plan PostgreSQL keeps for a prepared statement whatever the values
    (``types``: the parameters' types in order of first appearance)."""
    positions: dict[str, int] = {}

    def number(match):
        return f"${positions.setdefault(match[1], len(positions) + 1)}"

    numbered = re.sub(r"%\((\w+)\)s", number, query)
    with connection.cursor() as cur:
        cur.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cur.execute(f"PREPARE generic_claim({', '.join(types)}) AS {numbered}")
        cur.execute(f"EXPLAIN EXECUTE generic_claim({', '.join('NULL' for _ in types)})")
        plan = "\n".join(row[0] for row in cur.fetchall())
        cur.execute("DEALLOCATE generic_claim")
    return plan


def _claim_plans(queue):
    """The claim's plan for these values, and the generic plan a prepared
    statement may keep."""
    now = clock.now()
    params = {"collection_id": queue.pk, "now": now, "n": 10, "worker_id": WORKER,
              "lease_expires_at": now, "async_commit": False}  # fmt: skip
    types = ["bigint", "boolean", "timestamptz", "int", "text", "timestamptz"]
    return _plan(sql.CLAIM_POSTGRES, params), _generic_plan(sql.CLAIM_POSTGRES, types)


@pytest.mark.postgres
def test_claim__uses_the_claimable_index(big_queue):
    # a queue the statistics know, and one created and filled since the last
    # ANALYZE (estimated at one row: the planner must still not sort it whole)
    fresh = services.collection_create(group=big_queue.group, name="fresh")
    services.message_enqueue_batch(
        collection=fresh, messages=[services.NewMessage(payload=i) for i in range(500)],
        enqueued_by="t",
    )  # fmt: skip
    for queue in (big_queue, fresh):
        for plan in _claim_plans(queue):
            assert "Seq Scan on groupqueues_message" not in plan, plan
            assert "gq_msg_claimable" in plan, plan
            assert "gq_msg_lease" in plan, plan
    assert len(claim(big_queue, 10)) == 10


@pytest.mark.postgres
def test_holder_actions__find_the_message_by_id_not_through_the_lease_index(big_queue):
    # The statistics saw no claimed row (gq_msg_lease looks empty and cheap)
    # while 1,000 claims are in flight: every ack, and the ORM's fenced
    # updates, must go to the row by id instead of reading them all.
    held = [m for _ in range(10) for m in claim(big_queue, 100)]
    first = held[0]
    now = clock.now()
    one = {"id": first.id, "token": first.claim_token, "collection_id": big_queue.pk, "now": now}
    batch = {"ids": "{" + ",".join(str(m.id) for m in held[:100]) + "}",
             "tokens": "{" + ",".join(str(m.claim_token) for m in held[:100]) + "}",
             "collection_id": big_queue.pk, "now": now}  # fmt: skip
    with CaptureQueriesContext(connection) as ctx:
        services.message_extend(collection=big_queue, id=first.id, claim_token=first.claim_token,
                                visibility_timeout=60)  # fmt: skip
    (extend_sql,) = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("UPDATE")]
    plans = {
        "ack": _plan(sql.ACK_POSTGRES, one),
        "ack generic": _generic_plan(sql.ACK_POSTGRES, ["uuid", "uuid", "bigint", "timestamptz"]),
        "batch ack": _plan(sql.ACK_BATCH_POSTGRES, batch),
        "batch ack generic": _generic_plan(sql.ACK_BATCH_POSTGRES,
                                           ["text", "text", "bigint", "timestamptz"]),
        "extend": _plan(extend_sql, None),
    }  # fmt: skip
    for name, plan in plans.items():
        assert "groupqueues_message_id_key" in plan, (name, plan)
        assert "gq_msg_lease" not in plan, (name, plan)
    types = ["text", "text", "bigint", "timestamptz", "boolean", "int", "text", "timestamptz",
             "int"]  # fmt: skip
    combined = _generic_plan(sql.ACK_BATCH_AND_CLAIM_POSTGRES, types)
    assert "Index Scan using groupqueues_message_id_key" in combined, combined


@pytest.mark.postgres
def test_stats__do_not_scan_the_message_table(big_queue):
    with CaptureQueriesContext(connection) as ctx:
        stats = services.collection_stats(collection=big_queue)
        services.collection_depth(collection=big_queue)
        services.collection_depth_pending(collection=big_queue)
    assert (stats.depth, stats.depth_pending, stats.dead) == (100_000, 100_000, 100_000)
    stats_params = {"collection_id": big_queue.pk, "now": clock.now()}
    plans = [_plan(sql.STATS_ONE_POSTGRES, stats_params),
             _generic_plan(sql.STATS_ONE_POSTGRES, ["timestamptz", "bigint"])]  # fmt: skip
    # the depths are ORM queries (Django records their SQL; a prepared
    # statement's it records as None)
    plans += [_plan(q["sql"], None) for q in ctx.captured_queries if q["sql"]]
    assert len(plans) >= 4, ctx.captured_queries  # the stats statement, the depths
    for plan in plans:
        assert "Seq Scan on groupqueues_message" not in plan, plan
        # each count reads its own state's partial index, never the full
        # collection_id index that holds the dead rows too
        assert "groupqueues_message_collection_id" not in plan, plan
