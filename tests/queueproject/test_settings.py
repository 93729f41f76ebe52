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


def database_settings(code: str, **env: str) -> tuple[int, dict | None]:
    """(CONN_MAX_AGE, the pool options) of a process on PostgreSQL that runs
    ``code`` before its settings load (nothing connects)."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    script = (
        f"{code}\nimport django; django.setup()\nfrom django.conf import settings\n"
        "d = settings.DATABASES['default']\n"
        "print(json.dumps([d['CONN_MAX_AGE'], d['OPTIONS'].get('pool')]))"
    )
    base = {"PATH": "/usr/bin:/bin", "DEBUG": "0", "SECRET_KEY": "s" * 50,
            "DJANGO_SETTINGS_MODULE": "queueproject.settings",
            "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/nothing"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", f"import json\n{script}"],
        cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    max_age, pool = json.loads(done.stdout.strip().splitlines()[-1])
    return max_age, pool


RUNSERVER = "import sys; sys.argv = ['manage.py', 'runserver']"
WORKER = "import sys; sys.argv = ['manage.py', 'queue_worker']"


@pytest.mark.parametrize(
    "code", [RUNSERVER, "import queueproject.asgi", "import queueproject.wsgi"],
    ids=["runserver", "asgi", "wsgi"],
)  # fmt: skip
def test_web_processes_borrow_from_a_bounded_pool(code):
    max_age, pool = database_settings(code, DB_POOL_MAX_SIZE="7", DB_POOL_TIMEOUT="2.5")
    assert max_age == 0
    assert pool == {"min_size": 2, "max_size": 7, "timeout": 2.5, "name": "web"}


def test_workers_and_commands_keep_a_connection_per_thread():
    assert database_settings(WORKER) == (600, None)
    assert database_settings(WORKER, CONN_MAX_AGE="30") == (30, None)
    assert database_settings(WORKER, QUEUE_WEB_PROCESS="1")[1] is not None  # the override


def test_a_web_process_without_the_pool_connects_per_request():
    assert database_settings(RUNSERVER, DB_POOL_MAX_SIZE="0") == (0, None)
