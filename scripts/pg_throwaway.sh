#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests (trust auth, fsync off, loopback only).
#   scripts/pg_throwaway.sh start [DIR] [PORT]   prints the URL to connect to
#   scripts/pg_throwaway.sh stop  [DIR]          stops the server and removes DIR
# The server binaries come from $PG_BIN, else `pg_config --bindir`, else the newest
# /usr/lib/postgresql/*/bin (Debian's layout). initdb refuses to run as root, so as root the
# cluster runs as the `postgres` user.
set -euo pipefail
action=${1:?usage: pg_throwaway.sh start|stop [DIR] [PORT]}
dir=${2:-${TMPDIR:-/tmp}/talaria-pg}
port=${3:-55432}

find_bin() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  local candidate
  candidate=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$candidate" ] && [ -x "$candidate/initdb" ]; then echo "$candidate"; return; fi
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir; return
  fi
  echo "pg_throwaway: no PostgreSQL server binaries (install postgresql or set PG_BIN)" >&2
  exit 1
}

as_owner() {
  if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bin=$(find_bin)
case "$action" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" = "0" ] && chown postgres "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 >"$dir/initdb.log"
    fi
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
      -o "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200" \
      start >/dev/null
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: pg_throwaway.sh start|stop [DIR] [PORT]" >&2
    exit 2
    ;;
esac
