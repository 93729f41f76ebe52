"""``manage.py queue_health`` (issue 12: the guardrails name the holder of the
xmin horizon), run as a real subprocess against the test database."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest

from tests.conftest import manage_cmd, subprocess_env


def queue_health(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        manage_cmd("queue_health", *args), env=env or subprocess_env(),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def held_transaction(transactional_db: None) -> Iterator[int]:
    """A separate connection inside ``BEGIN; SELECT txid_current();``: its pid."""
    with psycopg.connect(subprocess_env()["DATABASE_URL"], application_name="bb-holder") as conn:
        conn.execute("SELECT txid_current()")  # psycopg opens the transaction (not autocommit)
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        yield row[0]
        conn.rollback()


@pytest.mark.postgres
def test_queue_health__names_the_transaction_holding_the_xmin_horizon(held_transaction):
    time.sleep(1.5)
    done = queue_health("--max-xact-age", "1")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert any(f"pid {held_transaction} " in w and "bb-holder" in w for w in warnings), done
    assert f"oldest transaction: pid {held_transaction} " in done.stdout
    assert "groupqueues_message" in done.stdout and "sessionqueues_queuedmessage" in done.stdout


@pytest.mark.postgres
def test_queue_health__json_and_fail_on_warning(held_transaction):
    time.sleep(1.5)
    done = queue_health("--json", "--max-xact-age", "1", "--fail-on-warning")
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    (holder,) = [t for t in report["transactions"] if t["pid"] == held_transaction]
    assert holder["holds_xmin"] is True and holder["age_seconds"] >= 1
    assert holder["application_name"] == "bb-holder" and holder["state"].startswith("idle in")
    assert report["idle_in_transaction"] >= 1
    assert any(f"pid {held_transaction} " in w for w in report["warnings"])
    tables = {t["table"]: t for t in report["tables"]}
    assert {"groupqueues_message", "sessionqueues_queuedmessage"} <= set(tables)
    assert tables["groupqueues_message"]["index_bytes"] > 0


@pytest.mark.postgres
def test_queue_health__quiet_under_the_threshold(held_transaction):
    done = queue_health("--fail-on-warning")  # the default threshold is 300 s
    assert done.returncode == 0 and "WARNING" not in done.stderr, done


def test_queue_health__sqlite_file_figures(tmp_path):
    path = tmp_path / "health.sqlite3"
    with sqlite3.connect(path) as db:  # rows inserted then deleted leave free pages
        db.execute("CREATE TABLE t (x TEXT)")
        db.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,) for _ in range(200)])
        db.execute("DELETE FROM t")
    db.close()
    env = subprocess_env(DATABASE_URL=f"sqlite:///{path}")
    done = queue_health("--json", env=env)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)["sqlite"]
    assert figures["file_bytes"] == path.stat().st_size > 0
    assert figures["freelist_count"] > 0 and figures["page_count"] > figures["freelist_count"]
    assert figures["wal_bytes"] >= 0 and figures["page_size"] > 0
    text = queue_health(env=env).stdout
    assert f"freelist_count: {figures['freelist_count']}" in text


@pytest.mark.postgres
def test_queue_health__warns_for_a_session_idle_in_transaction(held_transaction):
    time.sleep(1.5)
    # Under the xmin threshold but over the idle one: the idle warning alone.
    done = queue_health("--max-idle-age", "1", "--fail-on-warning")
    assert done.returncode == 2, done
    (warning,) = [w for w in done.stderr.splitlines() if f"pid {held_transaction} " in w]
    assert "is idle in a transaction" in warning and "bb-holder" in warning
    assert "idle in transaction: " in done.stdout


@pytest.mark.postgres
def test_health_admin_page__shows_the_held_transaction_warning(held_transaction):
    from django.test import Client

    from tests.factories import UserFactory

    client = Client()
    client.force_login(UserFactory(username="su-health", is_superuser=True, is_staff=True))
    time.sleep(1.5)
    page = client.get("/admin/groupqueues/collection/health/", {"max_xact_age": "1"})
    body = page.content.decode()
    assert page.status_code == 200
    assert f"WARNING: pid {held_transaction} " in body and "holds back the xmin horizon" in body
    assert "bb-holder" in body and 'id="gq-health-transactions"' in body
    quiet = client.get("/admin/groupqueues/collection/health/").content.decode()
    assert "holds back the xmin horizon: dead" not in quiet  # under the default 300 s
