#!/usr/bin/env bash
# Run the product for production against DATABASE_URL: migrations, then the
# ASGI web server (uvicorn), one queue worker and one maintenance process
# (Ctrl-C / SIGTERM stops all three; the worker finishes its in-flight messages).
#
#   DATABASE_URL=postgresql://user@db:5432/queues SECRET_KEY=... ALLOWED_HOSTS=queues.example.com make serve
#
# HOST (0.0.0.0), PORT (8000) and WEB_CONCURRENCY (2 uvicorn worker processes)
# tune the web server. Static files (admin, API docs) are served by WhiteNoise;
# `manage.py collectstatic` beforehand lets it serve compressed copies.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ]; then
  echo "make serve: set DATABASE_URL (e.g. postgresql://user@host:5432/db)" >&2
  exit 2
fi
if [ -z "${VIRTUAL_ENV:-}" ] && [ ! -f /.dockerenv ]; then
  scripts/bootstrap.sh
fi
PY="${PYTHON_BIN:-.venv/bin/python}"
[ -x "$PY" ] || PY=python
export DEBUG="${DEBUG:-false}"
"$PY" manage.py migrate --noinput

pids=()
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

"$PY" -m uvicorn queueproject.asgi:application --host "${HOST:-0.0.0.0}" --port "${PORT:-8000}" \
  --workers "${WEB_CONCURRENCY:-2}" --proxy-headers --no-server-header &
pids+=($!)
"$PY" manage.py queue_worker &
pids+=($!)
"$PY" manage.py queue_maintenance &
pids+=($!)
echo "== serving on ${HOST:-0.0.0.0}:${PORT:-8000} (uvicorn, $((${WEB_CONCURRENCY:-2})) processes) + queue_worker + queue_maintenance"
wait -n
