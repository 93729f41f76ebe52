"""One claim order (``models.CLAIM_ORDER``): the ORM path, the Python sort key,
the claim SQL and the claimable index all say the same, so a second spelling
cannot drift."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from groupqueues import sql
from groupqueues.models import CLAIM_ORDER, Message, claim_order_key


def _sql_order() -> list[str]:
    """CLAIM_ORDER as the SQL says it (ASC is the default)."""
    return [f"{name} DESC" if desc else name for name, desc in CLAIM_ORDER]


def test_claim_order__is_priority_desc_then_ready_time_then_enqueue_order():
    assert CLAIM_ORDER == (("priority", True), ("deliver_after", False), ("seq", False))


def test_in_claim_order__orders_by_claim_order():
    qs = Message.objects.in_claim_order()
    assert list(qs.query.order_by) == [("-" if d else "") + n for n, d in CLAIM_ORDER]


def test_claim_order_key__sorts_objects_and_dicts_in_claim_order():
    t = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        {"priority": 0, "deliver_after": t, "seq": 2},
        {"priority": 5, "deliver_after": t + timedelta(seconds=1), "seq": 3},
        {"priority": 0, "deliver_after": t, "seq": 1},
        {"priority": 5, "deliver_after": t, "seq": 4},
        {"priority": 0, "deliver_after": t - timedelta(seconds=1), "seq": 5},
    ]
    expected = [4, 3, 5, 1, 2]
    assert [r["seq"] for r in sorted(rows, key=claim_order_key("item"))] == expected
    objects = [SimpleNamespace(**r) for r in rows]
    assert [o.seq for o in sorted(objects, key=claim_order_key("attr"))] == expected


def test_claim_sql__every_order_by_is_the_claim_order():
    statements = {
        "CLAIM_POSTGRES": sql.CLAIM_POSTGRES,
        "ACK_AND_CLAIM_POSTGRES": sql.ACK_AND_CLAIM_POSTGRES,
        "ACK_BATCH_AND_CLAIM_POSTGRES": sql.ACK_BATCH_AND_CLAIM_POSTGRES,
    }
    for name, text in statements.items():
        orders = re.findall(r"ORDER BY\s+(.+?)\s*\n", text)
        assert len(orders) == 4, (name, orders)  # lapsed, ready, ready_above, picked
        for order in orders:
            columns = [re.sub(r"\s+ASC$", "", c.strip()) for c in order.split(",")]
            assert columns == _sql_order(), (name, order)


def test_claimable_index__columns_follow_the_claim_order():
    (index,) = [i for i in Message._meta.indexes if i.name == "gq_msg_claimable"]
    columns = [str(e) for e in index.expressions]
    assert columns[0] == "F(collection)"
    spelled = [f"OrderBy(F({n}), descending=True)" if d else f"F({n})" for n, d in CLAIM_ORDER]
    assert columns[1:] == spelled


def test_featured_claim_sql__every_claim_ordered_by_is_the_claim_order():
    """The featured claims (ordering keys, fairness, limits) order candidates,
    ranks and picks by CLAIM_ORDER too (fairness puts its round, ``rn``, after
    priority; lapsed leases and the partition scan order by their own columns)."""
    statements = {**{f"pg{k}": v for k, v in sql.CLAIM_FEATURED_POSTGRES.items()},
                  **{f"sqlite{k}": v for k, v in sql.CLAIM_FEATURED_SQLITE.items()}}  # fmt: skip
    for name, text in statements.items():
        orders = re.findall(r"ORDER BY\s+(.+?)(?:\s+LIMIT|\)|\n)", text)
        by_priority = [o for o in orders if "priority" in o]
        assert len(by_priority) >= 2, (name, orders)
        for order in by_priority:
            columns = [re.sub(r"^\w+\.", "", c.strip()) for c in order.split(",")]
            columns = [c for c in columns if c != "rn"]
            assert columns == _sql_order(), (name, order)
