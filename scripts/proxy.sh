#!/usr/bin/env bash
# The demo proxy in front of the demo cluster: start | stop | psql [args].
# Listens on 127.0.0.1:${DPTEXT_PROXY_PORT:-54330}. Client users:
#   analyst (password analyst-demo, masked) -> upstream role analyst, which
#           sql/demo.sql labels MASKED: the database masks its reads;
#   admin   (password admin-demo, unmasked) -> upstream role postgres.
# `start` runs `dptext-proxy check` first and stops there if a masked user
# could not be served. `psql` connects as analyst, or as $DPTEXT_PROXY_USER.
# The demo cluster trusts local connections, so upstream passwords are not
# checked there; a real deployment sets upstream_password for each user (or
# DPTEXT_PROXY_UPSTREAM_PASSWORD_<USER>).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state
PROXY_PORT="${DPTEXT_PROXY_PORT:-54330}"
CONF="$STATE/proxy/proxy.toml"
PIDF="$STATE/proxy/proxy.pid"
BIN="$REPO/target/release/dptext-proxy"

start() {
  mkdir -p "$STATE/proxy"
  ( cd "$REPO" && cargo build --release -q -p dptext-proxy )
  # The proxy's own secret (SCRAM salts), kept across restarts.
  [ -s "$STATE/proxy/key" ] || ( umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$STATE/proxy/key" )
  chmod 600 "$STATE/proxy/key"
  cat > "$CONF" <<TOML
listen = "127.0.0.1:$PROXY_PORT"

[upstream]
host = "$PGHOST"
port = $PGPORT
dbname = "$PGDATABASE"

[[user]]
name = "analyst"
password = "analyst-demo"
masked = true
upstream_user = "analyst"
# upstream_password = "..."   # or DPTEXT_PROXY_UPSTREAM_PASSWORD_ANALYST

[[user]]
name = "admin"
password = "admin-demo"
masked = false
upstream_user = "postgres"
# upstream_password = "..."   # or DPTEXT_PROXY_UPSTREAM_PASSWORD_ADMIN
TOML
  chmod 600 "$CONF"
  stop >/dev/null 2>&1 || true
  local checked
  checked="$(DPTEXT_PROXY_KEY="$(cat "$STATE/proxy/key")" "$BIN" check "$CONF" 2>&1)" \
    || { echo "$checked" >&2; die "dptext-proxy check failed (see above)"; }
  DPTEXT_PROXY_KEY="$(cat "$STATE/proxy/key")" setsid "$BIN" --config "$CONF" > "$STATE/proxy/proxy.log" 2>&1 &
  echo $! > "$PIDF"
  # Up to 30 s (a loaded machine: the test command runs beside other
  # work), and no longer than the process lives.
  for _ in $(seq 300); do
    grep -q "listening" "$STATE/proxy/proxy.log" 2>/dev/null && break
    kill -0 "$(cat "$PIDF")" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "listening" "$STATE/proxy/proxy.log" || { cat "$STATE/proxy/proxy.log"; die "the proxy did not start"; }
  echo "proxy running: PGPASSWORD=analyst-demo psql -h 127.0.0.1 -p $PROXY_PORT -U analyst $PGDATABASE" >&2
  echo "               PGPASSWORD=admin-demo psql -h 127.0.0.1 -p $PROXY_PORT -U admin $PGDATABASE" >&2
}

stop() {
  if [ -f "$PIDF" ]; then
    kill "$(cat "$PIDF")" 2>/dev/null || true
    rm -f "$PIDF"
  fi
  echo "proxy stopped" >&2
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  psql)
    shift
    user="${DPTEXT_PROXY_USER:-analyst}"
    PGPASSWORD="$user-demo" exec psql -X -h 127.0.0.1 -p "$PROXY_PORT" -U "$user" "$PGDATABASE" "$@" ;;
  *) die "usage: scripts/proxy.sh start|stop|psql [args]  (psql as \$DPTEXT_PROXY_USER, default analyst)" ;;
esac
