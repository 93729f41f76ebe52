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

echo "== databases:"
printf '   %s\n' "${ran[@]}"
exit $status
