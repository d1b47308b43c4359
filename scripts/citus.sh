#!/usr/bin/env bash
# A throwaway Citus cluster for the scale-out tests: a coordinator and two
# workers on this machine, every node with shared_preload_libraries =
# 'citus,dptext' and the same dptext key file, both extensions created in
# the database on every node.
#
#   scripts/citus.sh available      exit 0 when Citus is installed or can be
#                                    built here; else print why, exit 1
#   scripts/citus.sh build          install Citus into this PostgreSQL when it
#                                    is missing (a build cached outside the clone)
#   scripts/citus.sh start | stop | status
#   scripts/citus.sh reset          stop, and remove the nodes' data (the
#                                    next start makes a new cluster)
#   scripts/citus.sh psql [coordinator|worker1|worker2] [psql args]
#
# Citus is a test dependency: dptext never needs it. It is not packaged by
# Debian, so it is built from its release source: the tarball named by
# DPTEXT_CITUS_SRC (a file, or a folder holding citus-$CITUS_VERSION.tar.gz
# and SHA256SUMS), else ../shared/vendor/citus beside the clone. The build
# lives in ${XDG_CACHE_HOME:-~/.cache}/dptext/citus-<version>-pg<version>,
# so a new clone reuses it; `make install` from there takes seconds.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state
if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi

CITUS_VERSION=13.2.2
PG_FULL="$("$PG_CONFIG" --version | awk '{print $2}')"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/dptext/citus-$CITUS_VERSION-pg$PG_FULL"
CITUS="$STATE/citus"
RUN="$CITUS/run"
KEY="$CITUS/dptext.key"
BASE_PORT="${DPTEXT_CITUS_PORT:-54340}"
NODES=(coordinator worker1 worker2)
DB=dptext_citus

port_of() {
  case "$1" in
    coordinator) echo "$BASE_PORT" ;;
    worker1) echo $((BASE_PORT + 1)) ;;
    worker2) echo $((BASE_PORT + 2)) ;;
    *) die "no node '$1' (coordinator, worker1, worker2)" ;;
  esac
}

installed() { [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] && [ -f "$("$PG_CONFIG" --sharedir)/extension/citus.control" ]; }

# The source tarball, checked against its SHA256SUMS; empty when none.
find_source() {
  local c
  for c in "${DPTEXT_CITUS_SRC:-}" "$REPO/../shared/vendor/citus"; do
    [ -n "$c" ] || continue
    [ -d "$c" ] && c="$c/citus-$CITUS_VERSION.tar.gz"
    [ -f "$c" ] || continue
    local sums
    sums="$(dirname "$c")/SHA256SUMS"
    if [ -f "$sums" ]; then
      (cd "$(dirname "$c")" && grep " $(basename "$c")\$" SHA256SUMS | sha256sum -c --quiet -) \
        || die "$c does not match its SHA256SUMS"
    fi
    echo "$(cd "$(dirname "$c")" && pwd)/$(basename "$c")"
    return 0
  done
}

# Why Citus cannot be had here (empty when it can).
unavailable_reason() {
  installed && return 0
  [ -f "$CACHE/.built" ] && return 0
  [ -n "$(find_source)" ] && return 0
  echo "Citus is not installed in $("$PG_CONFIG" --pkglibdir), no build is cached in $CACHE, and no source was found (set DPTEXT_CITUS_SRC to citus-$CITUS_VERSION.tar.gz)"
}

build() {
  if installed; then echo "citus: installed" >&2; return 0; fi
  if [ ! -f "$CACHE/.built" ]; then
    local src
    src="$(find_source)"
    [ -n "$src" ] || die "$(unavailable_reason)"
    step "citus $CITUS_VERSION: building from $src into $CACHE (a few minutes, once)"
    local need=() p
    for p in libzstd-dev liblz4-dev libcurl4-openssl-dev libkrb5-dev libselinux1-dev libxslt1-dev libpam0g-dev libreadline-dev make gcc patch; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
    done
    if [ ${#need[@]} -gt 0 ]; then
      echo "installing: ${need[*]}" >&2
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    rm -rf "$CACHE"
    mkdir -p "$CACHE"
    tar xzf "$src" -C "$CACHE" --strip-components=1
    # Debian's PostgreSQL 15.20 exports have_createdb_privilege(), which
    # Citus's PG 15 compatibility shim also defines; the patch renames the shim.
    local patch
    patch="$(dirname "$src")/citus-pg15-debian.patch"
    if [ -f "$patch" ]; then (cd "$CACHE" && patch -s -p1 < "$patch"); fi
    (cd "$CACHE" && ./configure -q PG_CONFIG="$PG_CONFIG" >/dev/null && make -s -j"$(nproc)" >/dev/null) \
      || die "the Citus build failed (in $CACHE)"
    touch "$CACHE/.built"
  fi
  (cd "$CACHE" && $SUDO make -s install PG_CONFIG="$PG_CONFIG" >/dev/null) || die "installing Citus from $CACHE failed"
  echo "citus: installed from $CACHE" >&2
}

start() {
  installed || build
  mkdir -p "$RUN"
  if [ ! -s "$KEY" ]; then
    ( umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$KEY" )
  fi
  chown -R "$RUN_USER" "$CITUS" 2>/dev/null || true
  chmod 600 "$KEY"
  local node port
  for node in "${NODES[@]}"; do
    port="$(port_of "$node")"
    if [ ! -f "$CITUS/$node/PG_VERSION" ]; then
      as_user "$PG_BIN/initdb" -D "$CITUS/$node" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
      cat >> "$CITUS/$node/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$RUN'
shared_preload_libraries = 'citus,dptext'
dptext.assets_dir = '$DPTEXT_ASSETS'
# The same key on every node: keyed outputs agree whichever node computes them.
dptext.key_file = '$KEY'
# The nodes are on one machine and trust local connections.
citus.node_conninfo = 'sslmode=disable'
max_connections = 200
max_worker_processes = 32
CONF
    fi
    if ! as_user "$PG_BIN/pg_ctl" -D "$CITUS/$node" status >/dev/null 2>&1; then
      as_user "$PG_BIN/pg_ctl" -D "$CITUS/$node" -l "$CITUS/$node.log" -w start >/dev/null \
        || { tail -20 "$CITUS/$node.log" >&2; die "the Citus $node did not start"; }
    fi
  done
  for node in "${NODES[@]}"; do
    port="$(port_of "$node")"
    if ! psql -X -q -h "$RUN" -p "$port" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
      psql -X -q -h "$RUN" -p "$port" -d postgres -c "CREATE DATABASE $DB"
    fi
    # Once a worker is in the cluster, Citus refuses extension commands
    # there (even IF NOT EXISTS): create only what is missing.
    for ext in citus dptext; do
      psql -X -q -h "$RUN" -p "$port" -d "$DB" -tAc "SELECT 1 FROM pg_extension WHERE extname = '$ext'" | grep -q 1 \
        || psql -X -q -h "$RUN" -p "$port" -d "$DB" -c "CREATE EXTENSION $ext"
    done
  done
  local coord
  coord="$(port_of coordinator)"
  psql -X -q -h "$RUN" -p "$coord" -d "$DB" -tAc "SELECT citus_set_coordinator_host('127.0.0.1', $coord)" >/dev/null
  for node in worker1 worker2; do
    port="$(port_of "$node")"
    psql -X -q -h "$RUN" -p "$coord" -d "$DB" -tAc \
      "SELECT 1 FROM pg_dist_node WHERE nodeport = $port" | grep -q 1 \
      || psql -X -q -h "$RUN" -p "$coord" -d "$DB" -tAc "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
  done
  echo "citus running: coordinator psql -h $RUN -p $coord $DB (workers on $((coord + 1)), $((coord + 2)))" >&2
}

stop() {
  local node
  for node in "${NODES[@]}"; do
    [ -f "$CITUS/$node/PG_VERSION" ] && as_user "$PG_BIN/pg_ctl" -D "$CITUS/$node" -m fast -w stop >/dev/null 2>&1 || true
  done
  echo "citus stopped" >&2
}

case "${1:-}" in
  available) why="$(unavailable_reason)"; [ -z "$why" ] || { echo "$why"; exit 1; } ;;
  build) build ;;
  start) start ;;
  stop) stop ;;
  reset) stop; rm -rf "${CITUS:?}/coordinator" "$CITUS/worker1" "$CITUS/worker2" "$CITUS"/*.log ;;
  status) for node in "${NODES[@]}"; do as_user "$PG_BIN/pg_ctl" -D "$CITUS/$node" status >/dev/null 2>&1 && echo "$node: running" || echo "$node: stopped"; done ;;
  psql) shift; node="${1:-coordinator}"; [ $# -gt 0 ] && shift
        exec psql -X -h "$RUN" -p "$(port_of "$node")" -U postgres -d "$DB" "$@" ;;
  *) die "usage: scripts/citus.sh available|build|start|stop|reset|status|psql [node] [args]" ;;
esac
