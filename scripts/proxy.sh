#!/usr/bin/env bash
# The demo proxy in front of the demo cluster: start | stop | psql [args].
# Listens on 127.0.0.1:${DPTEXT_PROXY_PORT:-54330}; users analyst (masked)
# and admin (unmasked), password demo; rules from the cluster's dptext.rules
# (the demo's SECURITY LABELs); keyed mode with a throwaway key.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state
PROXY_PORT="${DPTEXT_PROXY_PORT:-54330}"
CONF="$STATE/proxy/proxy.toml"
PIDF="$STATE/proxy/proxy.pid"
BIN="$REPO/target/release/dptext-proxy"

start() {
  mkdir -p "$STATE/proxy"
  ( cd "$REPO" && cargo build --release -q -p dptext-proxy )
  [ -f "$STATE/proxy/key" ] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$STATE/proxy/key"
  chmod 600 "$STATE/proxy/key"
  cat > "$CONF" <<TOML
listen = "127.0.0.1:$PROXY_PORT"
assets_dir = "$DPTEXT_ASSETS"

[upstream]
host = "$PGHOST"
port = $PGPORT
user = "postgres"
dbname = "$PGDATABASE"

[[user]]
name = "analyst"
password = "demo"
masked = true

[[user]]
name = "admin"
password = "demo"
masked = false

[masking]
expressions = "sanitize"
default_mechanism = "santext"
default_params = { eps = 3.0 }
TOML
  stop >/dev/null 2>&1 || true
  DPTEXT_PROXY_KEY="$(cat "$STATE/proxy/key")" "$BIN" check "$CONF" >/dev/null
  DPTEXT_PROXY_KEY="$(cat "$STATE/proxy/key")" setsid "$BIN" --config "$CONF" > "$STATE/proxy/proxy.log" 2>&1 &
  echo $! > "$PIDF"
  for _ in $(seq 50); do
    grep -q "listening" "$STATE/proxy/proxy.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "listening" "$STATE/proxy/proxy.log" || { cat "$STATE/proxy/proxy.log"; die "the proxy did not start"; }
  echo "proxy running: PGPASSWORD=demo psql -h 127.0.0.1 -p $PROXY_PORT -U analyst $PGDATABASE" >&2
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
  psql) shift; PGPASSWORD=demo exec psql -X -h 127.0.0.1 -p "$PROXY_PORT" -U analyst "$PGDATABASE" "$@" ;;
  *) die "usage: scripts/proxy.sh start|stop|psql [args]" ;;
esac
