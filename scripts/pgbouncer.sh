#!/usr/bin/env bash
# A throw-away PgBouncer in transaction mode in front of the local PostgreSQL,
# for the test pass "PostgreSQL through PgBouncer" (scripts/test.sh) and for
# trying the project behind a pooler by hand.
#
#   scripts/pgbouncer.sh start DIR [PORT]   # prints the port it listens on
#   scripts/pgbouncer.sh stop DIR
#
# DIR holds its config, log and pid file (created; the caller removes it).
# PORT defaults to a free one. It listens on 127.0.0.1 only, lets any client
# in (auth_type any) and forwards every database name to PGBOUNCER_UPSTREAM
# (libpq-style, default "host=127.0.0.1 port=5432 user=postgres"), logging
# in as its user. Debian's pgbouncer is installed with apt-get when missing
# (as scripts/browser.sh does for chromium); 1.18 there has no prepared-
# statement support, so clients must run with QUEUE_PREPARED_STATEMENTS=0.
set -euo pipefail

usage() { echo "usage: $0 start DIR [PORT] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2

install_pgbouncer() {
  command -v pgbouncer >/dev/null && return 0
  [ -x /usr/sbin/pgbouncer ] && return 0
  if ! command -v apt-get >/dev/null; then
    echo "scripts/pgbouncer.sh: no pgbouncer and no apt-get to install it" >&2
    return 1
  fi
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  echo "scripts/pgbouncer.sh: installing pgbouncer (apt-get)" >&2
  # The package's own service stays down: policy-rc.d or not, we stop it.
  if ! $sudo apt-get install -y -q --no-install-recommends pgbouncer >&2; then
    $sudo apt-get update -q >&2
    $sudo apt-get install -y -q --no-install-recommends pgbouncer >&2
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  install_pgbouncer
  local bin port user
  bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
  port="${1:-$(free_port)}"
  mkdir -p "$dir"
  # PgBouncer refuses to run as root: it drops to -u USER, who must own DIR.
  user=""
  if [ "$(id -u)" -eq 0 ]; then
    user="$(id -un postgres 2>/dev/null || echo nobody)"
    chown "$user" "$dir"
  fi
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = ${PGBOUNCER_UPSTREAM:-host=127.0.0.1 port=5432 user=postgres}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = any
pool_mode = transaction
; Server connections per database (the test pass uses one database per
; pytest worker); clients beyond them wait for one (max_client_conn).
default_pool_size = ${PGBOUNCER_POOL_SIZE:-15}
max_db_connections = ${PGBOUNCER_POOL_SIZE:-15}
max_client_conn = 1000
; psycopg 2 sends extra_float_digits; a client's libpq options are not
; forwarded by 1.18 (settings such as statement_timeout come from the role,
; or from PgBouncer's own timeouts: docs/production.md).
ignore_startup_parameters = extra_float_digits,options
server_idle_timeout = 30
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  chmod 600 "$dir/pgbouncer.ini"  # it may hold the upstream's password
  [ -n "$user" ] && chown "$user" "$dir"/*
  if [ -n "$user" ]; then
    "$bin" -d -u "$user" "$dir/pgbouncer.ini"
  else
    "$bin" -d "$dir/pgbouncer.ini"
  fi
  # Ready when it answers a query through to PostgreSQL.
  for _ in $(seq 50); do
    if python3 - "$port" <<'PYEOF' 2>/dev/null
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
PYEOF
    then
      echo "$port"
      return 0
    fi
    sleep 0.1
  done
  echo "scripts/pgbouncer.sh: pgbouncer did not start on port $port:" >&2
  tail -20 "$dir/pgbouncer.log" >&2 || true
  return 1
}

stop() {
  local pidfile="$dir/pgbouncer.pid" pid
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

case "$cmd" in
  start) start "${3:-}" ;;
  stop) stop ;;
  *) usage ;;
esac
