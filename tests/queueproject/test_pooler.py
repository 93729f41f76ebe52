"""Behind a transaction pooler (``DATABASE_TRANSACTION_POOLER``; issue 19):
the settings that rely on a session follow it, LISTEN is refused, and in the
test pass "PostgreSQL through PgBouncer" the tests really go through one."""

from __future__ import annotations

import json
import subprocess

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import manage_cmd, subprocess_env

PRINT_SETTINGS = (
    "import json; from django.conf import settings as s; print(json.dumps(["
    "s.QUEUE_LISTEN_NOTIFY, s.QUEUE_PREPARED_STATEMENTS,"
    " s.DATABASES['default'].get('DISABLE_SERVER_SIDE_CURSORS', False)]))"
)
# Settings only: nothing connects to this address.
POOLER_URL = "postgresql://queues@127.0.0.1:1/queues"


def settings_with(**env: str) -> subprocess.CompletedProcess[str]:
    """The three settings a process started with ``env`` (and neither
    QUEUE_LISTEN_NOTIFY nor QUEUE_PREPARED_STATEMENTS unless given) has."""
    full = subprocess_env(DATABASE_URL=POOLER_URL)
    for name in ("DATABASE_TRANSACTION_POOLER", "QUEUE_LISTEN_NOTIFY", "QUEUE_PREPARED_STATEMENTS"):
        full.pop(name, None)
    return subprocess.run(
        manage_cmd("shell", "-c", PRINT_SETTINGS),
        env={**full, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_pooler__session_settings_follow_it_and_listen_is_refused() -> None:
    done = settings_with(DATABASE_TRANSACTION_POOLER="1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [False, False, True]
    plain = settings_with()
    assert json.loads(plain.stdout.strip().splitlines()[-1]) == [True, True, False]

    refused = settings_with(DATABASE_TRANSACTION_POOLER="1", QUEUE_LISTEN_NOTIFY="1")
    assert refused.returncode != 0
    assert "QUEUE_LISTEN_NOTIFY must be off with DATABASE_TRANSACTION_POOLER" in refused.stderr


@pytest.mark.postgres
def test_pooler__this_pass_goes_through_one(db: None) -> None:
    if not settings.DATABASE_TRANSACTION_POOLER:
        pytest.skip("runs in the pass through PgBouncer (scripts/test.sh)")
    with connection.cursor() as cur:
        cur.execute("SELECT inet_server_port()")
        server_port = cur.fetchone()[0]
    # The server's port is PostgreSQL's, not the one DATABASE_URL names.
    assert server_port != int(connection.settings_dict["PORT"])
