# Shared settings of the project's scripts; sourced, not run.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Every script works from the repository root, wherever it was called from.
cd "$REPO"
# An assets directory given by the caller is kept; otherwise resolve_state picks one.
if [ -n "${DPTEXT_ASSETS:-}" ]; then export DPTEXT_ASSETS_SET=1; fi
PG_MAJOR=15
PG_BIN="/usr/lib/postgresql/$PG_MAJOR/bin"
PG_CONFIG="$PG_BIN/pg_config"
PGRX_VERSION=0.18.1
# Throwaway clusters run as this unprivileged user (PostgreSQL refuses root).
RUN_USER="${DPTEXT_RUN_USER:-dptext}"
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null 2>&1 || { echo "error: cargo not found: install Rust (rustup, 1.85 or newer) first" >&2; exit 1; }

step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Runs a command as the cluster user, keeping the environment it needs.
as_user() {
  if [ "$(id -un)" = "$RUN_USER" ]; then "$@"; else sudo -u "$RUN_USER" -H env DPTEXT_ASSETS="$DPTEXT_ASSETS" "$@"; fi
}

# Where throwaway clusters and (by default) assets live: target/ when the
# cluster user can reach it, else a private folder under /var/tmp (a clone
# under /root is not readable by other users).
resolve_state() {
  STATE="$REPO/target"
  if [ "$(id -un)" != "$RUN_USER" ] && ! sudo -u "$RUN_USER" test -r "$REPO/Cargo.toml" 2>/dev/null; then
    STATE="/var/tmp/dptext-$(printf '%s' "$REPO" | sha1sum | cut -c1-10)"
  fi
  mkdir -p "$STATE"
  # A folder someone else created first could hold planted assets.
  [ -O "$STATE" ] || die "$STATE exists but belongs to another user: remove it or set DPTEXT_ASSETS"
  if [ -z "${DPTEXT_ASSETS_SET:-}" ]; then export DPTEXT_ASSETS="$STATE/assets"; fi
  PGDEMO="$STATE/demo-pg"
  # The throwaway cluster's masking key (scripts/cluster.sh makes it): masked
  # roles read labelled columns only under a key (ALTER ROLE r SET
  # dptext.key_file = '$DPTEXT_KEY_FILE').
  export DPTEXT_KEY_FILE="$PGDEMO/dptext.key"
  PGPORT="${DPTEXT_PG_PORT:-54329}"
  export PGHOST="$PGDEMO/run" PGPORT PGUSER=postgres PGDATABASE=dptext_demo
}

# A throwaway cluster of the tests: creates its data folder (as the cluster
# user) when it has none, with the settings every such cluster has, then
# starts it (restarts it when running: shared_preload_libraries is read at
# start). The server runs with Rust backtraces asked for, as a careless
# environment would ask: the leak battery checks that none reaches a client.
#   test_cluster BIN_DIR DATA_DIR PORT SOCKET_DIR LOG_FILE
test_cluster() {
  local bin="$1" data="$2" port="$3" sockets="$4" log="$5"
  if [ ! -f "$data/PG_VERSION" ]; then
    as_user "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >> "$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sockets'
dptext.assets_dir = '$DPTEXT_ASSETS'
shared_preload_libraries = 'dptext'
max_parallel_workers_per_gather = 2
CONF
  fi
  if as_user "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_user env RUST_BACKTRACE=1 "$bin/pg_ctl" -D "$data" -l "$log" -w restart >/dev/null
  else
    as_user env RUST_BACKTRACE=1 "$bin/pg_ctl" -D "$data" -l "$log" -w start >/dev/null
  fi
}

# The SQL regression files (tests/sql), each in a new database through the
# psql command given, their output diffed with tests/expected, or with the
# file of the same name under OVERRIDES when there is one. Prints one line
# a file (LABEL name ... ok|FAILED, and the diff); adds to the counters
# regress_pass and regress_fail.
#   regress_files OUT_DIR OVERRIDES LABEL psql [args...]
regress_files() {
  local out="$1" overrides="$2" label="$3" f name expected
  shift 3
  mkdir -p "$out"
  for f in tests/sql/*.sql; do
    name="$(basename "$f" .sql)"
    expected="tests/expected/$name.out"
    [ -n "$overrides" ] && [ -f "$overrides/$name.out" ] && expected="$overrides/$name.out"
    "$@" -q -d postgres -c "DROP DATABASE IF EXISTS dptext_regress" -c "CREATE DATABASE dptext_regress"
    "$@" -a -d dptext_regress -f "$f" > "$out/$name.out" 2>&1 || true
    if diff -u "$expected" "$out/$name.out" > "$out/$name.diff"; then
      echo "$label $name ... ok"; regress_pass=$((${regress_pass:-0} + 1))
    else
      cat "$out/$name.diff"; echo "$label $name ... FAILED"; regress_fail=$((${regress_fail:-0} + 1))
    fi
  done
}
