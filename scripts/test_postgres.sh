#!/usr/bin/env bash
# A throw-away PostgreSQL server for the tests: loopback only (127.0.0.1), a random free port, its data
# in a temporary folder. Debian's initdb/pg_ctl (package 'postgresql', installed if missing).
#   eval "$(bash scripts/test_postgres.sh start)"   # exports HARNESS_TEST_POSTGRES_URL and PG_TEST_DIR
#   bash scripts/test_postgres.sh stop "$PG_TEST_DIR"
# initdb refuses to run as root: as root, the server runs as the 'postgres' user (or 'nobody').
set -euo pipefail
cmd=${1:?usage: test_postgres.sh start | stop DIR}
bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
as_owner() {   # run a command as the server's owner
  if [ "$(id -u)" = 0 ]; then runuser -u "$PG_USER" -- "$@"; else "$@"; fi
}
PG_USER=$(id -un)
if [ "$(id -u)" = 0 ]; then PG_USER=$(id -u postgres >/dev/null 2>&1 && echo postgres || echo nobody); fi
case "$cmd" in
start)
  if [ -z "$(bin_dir)" ]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >&2
  fi
  BIN=$(bin_dir)
  DIR=$(mktemp -d /tmp/harness-pg.XXXXXX)
  chmod 755 "$DIR"
  [ "$(id -u)" = 0 ] && chown "$PG_USER" "$DIR"
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_owner "$BIN/initdb" -D "$DIR/data" -U harness --auth=trust -E UTF8 >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log" >&2; exit 1; }
  as_owner "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR -c max_connections=200 -c fsync=off" start >&2 \
    || { cat "$DIR/server.log" >&2; exit 1; }
  as_owner "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U harness harness_test >&2
  echo "export PG_TEST_DIR=$DIR"
  echo "export HARNESS_TEST_POSTGRES_URL=postgresql://harness@127.0.0.1:$PORT/harness_test"
  ;;
stop)
  DIR=${2:?stop needs the folder printed by start}
  [ -d "$DIR/data" ] && as_owner "$(bin_dir)/pg_ctl" -D "$DIR/data" -m immediate -w stop >&2 || true
  rm -rf "$DIR"
  ;;
*) echo "usage: test_postgres.sh start | stop DIR" >&2; exit 2 ;;
esac
