#!/usr/bin/env bash
# Run the product on the SQLite default: venv, migrations, demo data, an admin
# login, then the web server and one worker together (Ctrl-C stops both).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
PY=.venv/bin/python
export DEBUG="${DEBUG:-1}"
PORT="${PORT:-8000}"
"$PY" manage.py migrate --noinput
login=$("$PY" manage.py ensure_admin)
"$PY" manage.py seed_demo

pids=()
# Background jobs of a script ignore SIGINT, so Ctrl-C reaches only this
# script; it forwards one SIGTERM to each child (the worker then finishes its
# in-flight messages and releases the rest).
stop() {
  trap - INT TERM EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

"$PY" manage.py runserver "0.0.0.0:$PORT" &
pids+=($!)
if "$PY" manage.py help queue_worker >/dev/null 2>&1; then
  "$PY" manage.py queue_worker &
  pids+=($!)
fi
# Give the server a moment to print its banner, then the login last, beside the URLs.
for _ in $(seq 50); do
  "$PY" - "$PORT" 2>/dev/null <<'PYEOF' && break
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()
PYEOF
  sleep 0.2
done
echo "== Ctrl-C stops the web server and the worker"
echo "== admin:    http://127.0.0.1:$PORT/admin/"
echo "== API docs: http://127.0.0.1:$PORT/api/docs/   http://127.0.0.1:$PORT/api/redoc/"
echo "== $login"
wait -n
