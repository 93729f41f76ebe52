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
# The worker logs to a file shown on the console (tail), so that the login
# below can wait for its first burst (the demo messages) and still come last.
worker_log=$(mktemp "${TMPDIR:-/tmp}/queues-worker.XXXXXX")
"$PY" manage.py queue_worker >"$worker_log" 2>&1 &
pids+=($!)
tail -n +1 -f "$worker_log" &
pids+=($!)
trap 'stop; rm -f "$worker_log"' INT TERM EXIT

# Wait for the web server to answer and the worker to start and go quiet.
for _ in $(seq 150); do
  "$PY" - "$PORT" 2>/dev/null <<'PYEOF' && break
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()
PYEOF
  sleep 0.2
done
last=-1
for _ in $(seq 60); do
  size=$(wc -c <"$worker_log")
  if grep -q "consumer(s)" "$worker_log" && [ "$size" = "$last" ]; then break; fi
  last=$size
  sleep 0.75
done
echo "== Ctrl-C stops the web server and the worker"
echo "== admin:    http://127.0.0.1:$PORT/admin/"
echo "== API docs: http://127.0.0.1:$PORT/api/docs/   http://127.0.0.1:$PORT/api/redoc/"
echo "== $login"
wait -n
