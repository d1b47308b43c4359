#!/usr/bin/env bash
# The project's throwaway PostgreSQL cluster: start | stop | status | psql [args].
# Data, socket and log live under target/demo-pg (see resolve_state in lib.sh);
# it listens on a high port on 127.0.0.1 and on a unix socket, runs as the
# unprivileged cluster user, and trusts local connections: never use it for real data.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
resolve_state
DATA="$PGDEMO/data"
LOG="$PGDEMO/postgres.log"

start() {
  mkdir -p "$PGDEMO/run"
  chown -R "$RUN_USER" "$PGDEMO" 2>/dev/null || true
  # The throwaway cluster's key, readable by the server only: masked roles
  # get it with ALTER ROLE r SET dptext.key_file (the demo and the tests
  # do). It is fixed and public (a hash of the sentence below), so that the
  # README's masked excerpts are the same on every machine: this cluster
  # is for the demo and the tests, never for real data, whose key must be
  # secret (docs/settings.md, "Keys"). It is not set for the whole cluster,
  # so that seeded examples stay reproducible (a key wins over a seed).
  demo_key="$(printf 'dptext demo key: public, reproducible, never for real data' | sha256sum | cut -c1-64)"
  if [ "$(cat "$DPTEXT_KEY_FILE" 2>/dev/null)" != "$demo_key" ]; then
    ( umask 077; printf '%s' "$demo_key" > "$DPTEXT_KEY_FILE" )
  fi
  chown "$RUN_USER" "$DPTEXT_KEY_FILE" 2>/dev/null || true
  chmod 600 "$DPTEXT_KEY_FILE"
  test_cluster "$PG_BIN" "$DATA" "$PGPORT" "$PGDEMO/run" "$LOG"
  psql -X -q -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PGDATABASE'" | grep -q 1 \
    || psql -X -q -d postgres -c "CREATE DATABASE $PGDATABASE"
  echo "cluster running: psql -h $PGHOST -p $PGPORT -U postgres $PGDATABASE" >&2
}

case "${1:-}" in
  start) start ;;
  stop) [ -f "$DATA/PG_VERSION" ] && as_user "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
        echo "cluster stopped" >&2 ;;
  status) as_user "$PG_BIN/pg_ctl" -D "$DATA" status ;;
  psql) shift; exec psql -X "$@" ;;
  *) die "usage: scripts/cluster.sh start|stop|status|psql [args]" ;;
esac
