import pytest
from django.db import connection


@pytest.mark.django_db
def test_sqlite_is_configured_for_concurrent_processes():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite settings")
    with connection.cursor() as cur:
        cur.execute("PRAGMA journal_mode")
        assert cur.fetchone()[0] == "wal"
        cur.execute("PRAGMA busy_timeout")
        assert cur.fetchone()[0] >= 5000
    assert connection.settings_dict["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


@pytest.mark.django_db
def test_postgres_uses_persistent_connections_with_health_checks():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL settings")
    assert connection.settings_dict["CONN_MAX_AGE"] > 0
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is True


def test_dev_secret_key_is_refused_without_debug():
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {"PATH": "/usr/bin:/bin", "DEBUG": "0", "DJANGO_SETTINGS_MODULE": "queueproject.settings"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr
