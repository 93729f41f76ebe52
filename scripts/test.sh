#!/usr/bin/env bash
# Run the whole suite on SQLite, then on PostgreSQL when one is reachable
# (DATABASE_URL if it names PostgreSQL, else postgres@127.0.0.1:5432).
# With CI=true an unreachable PostgreSQL is a failure, not a skip.
# Extra arguments go to pytest (e.g. scripts/test.sh -k claim).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh --dev || exit 1
# The browser tests (tests/browser/) need Debian's chromium and chromedriver.
scripts/browser.sh >/dev/null || echo "== no browser: the browser tests skip (fail with CI=true)"
PY=.venv/bin/python
export PYTHONUNBUFFERED=1
WORKERS="${PYTEST_WORKERS:-2}"

pg_url="${DATABASE_URL:-}"
case "$pg_url" in
  postgres://*|postgresql://*) ;;
  *) pg_url="postgresql://postgres@127.0.0.1:5432/test" ;;
esac

status=0
ran=()
pg_reachable=0
echo "== tests on SQLite"
if env -u DATABASE_URL "$PY" -m pytest -n "$WORKERS" -m "not slow" "$@"; then
  ran+=("SQLite: passed")
else
  status=1; ran+=("SQLite: FAILED")
fi

if "$PY" - "$pg_url" <<'PYEOF'
import sys, psycopg
from urllib.parse import urlsplit
u = urlsplit(sys.argv[1])
dsn = sys.argv[1].replace(u.path, "/postgres", 1) if u.path else sys.argv[1]
try:
    psycopg.connect(dsn, connect_timeout=5).close()
except Exception as exc:
    print(f"PostgreSQL not reachable at {u.hostname}:{u.port or 5432}: {exc}")
    sys.exit(1)
PYEOF
then
  pg_reachable=1
  echo "== tests on PostgreSQL ($pg_url)"
  if DATABASE_URL="$pg_url" "$PY" -m pytest -n "$WORKERS" -m "not slow" "$@"; then
    ran+=("PostgreSQL: passed")
  else
    status=1; ran+=("PostgreSQL: FAILED")
  fi
elif [ "${CI:-}" = "true" ]; then
  status=1; ran+=("PostgreSQL: UNREACHABLE (a failure with CI=true)")
else
  ran+=("PostgreSQL: skipped (not reachable)")
fi

# PostgreSQL through PgBouncer in transaction mode (docs/production.md,
# "Behind PgBouncer"): the tests of concurrency, crashes, workers, the
# maintenance leader and a black-box server, with DATABASE_URL naming a
# PgBouncer that scripts/pgbouncer.sh starts on a free local port. Django's
# test databases are created through it too; they are kept (--reuse-db: a
# DROP would find PgBouncer's idle server connections) and dropped here,
# directly on PostgreSQL, before and after. PGBOUNCER=0 skips the pass.
PGBOUNCER_TESTS=(
  tests/groupqueues/test_worker.py
  tests/groupqueues/test_worker_crash.py
  tests/groupqueues/test_concurrency.py
  tests/groupqueues/test_ordering_keys_concurrency.py
  tests/groupqueues/test_maintenance.py
  tests/sessionqueues/test_dispatch_concurrency.py
  tests/blackbox/test_server.py
  tests/queueproject/test_pooler.py
)
drop_pgbouncer_test_dbs() {
  "$PY" - "$pg_url" <<'PYEOF'
import sys, psycopg
from urllib.parse import urlsplit
u = urlsplit(sys.argv[1])
dsn = sys.argv[1].replace(u.path, "/postgres", 1) if u.path else sys.argv[1]
with psycopg.connect(dsn, autocommit=True) as conn:
    names = [r[0] for r in conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'test\_pgbouncer%'")]
    for name in names:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
PYEOF
}
pgb_dir=""
stop_pgbouncer() {
  [ -n "$pgb_dir" ] || return 0
  scripts/pgbouncer.sh stop "$pgb_dir"
  rm -rf "$pgb_dir"
  pgb_dir=""
}
trap stop_pgbouncer EXIT
if [ "${PGBOUNCER:-1}" = "0" ]; then
  ran+=("PostgreSQL through PgBouncer: skipped (PGBOUNCER=0)")
elif [ "$pg_reachable" = 0 ]; then
  ran+=("PostgreSQL through PgBouncer: skipped (no PostgreSQL)")
elif pgb_dir="$(mktemp -d)" \
    && pgb_port="$(PGBOUNCER_UPSTREAM="$("$PY" - "$pg_url" <<'PYEOF'
import sys
from urllib.parse import unquote, urlsplit
u = urlsplit(sys.argv[1])
upstream = f"host={u.hostname or '127.0.0.1'} port={u.port or 5432} user={unquote(u.username or 'postgres')}"
print(upstream + (f" password={unquote(u.password)}" if u.password else ""))
PYEOF
)" scripts/pgbouncer.sh start "$pgb_dir")"; then
  echo "== tests on PostgreSQL through PgBouncer (transaction mode, port $pgb_port)"
  started=$SECONDS
  drop_pgbouncer_test_dbs
  if DATABASE_URL="postgresql://postgres@127.0.0.1:$pgb_port/pgbouncer" \
     DATABASE_TRANSACTION_POOLER=1 \
     "$PY" -m pytest -n "$WORKERS" -m "not slow" --reuse-db -p no:cacheprovider \
       -k "not bad_arguments" "${PGBOUNCER_TESTS[@]}" "$@"; then
    ran+=("PostgreSQL through PgBouncer: passed ($((SECONDS - started)) s)")
  else
    status=1; ran+=("PostgreSQL through PgBouncer: FAILED")
  fi
  drop_pgbouncer_test_dbs
  stop_pgbouncer
elif [ "${CI:-}" = "true" ]; then
  status=1; ran+=("PostgreSQL through PgBouncer: PgBouncer did not start (a failure with CI=true)")
else
  ran+=("PostgreSQL through PgBouncer: skipped (PgBouncer did not start)")
fi

echo "== databases:"
printf '   %s\n' "${ran[@]}"
exit $status
