#!/usr/bin/env bash
# Sets up whatever is missing, builds and installs the extension, starts a
# throwaway PostgreSQL 15 cluster and runs the demo (sql/demo.sql) in it.
# The cluster keeps running afterwards; the script says how to use or stop it.
#   DPTEXT_PROFILE=debug  build the extension without optimisation (faster build)
#   DPTEXT_PG_PORT=N      listen on port N instead of 54329
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
"$REPO/scripts/setup.sh"
resolve_state

PROFILE="${DPTEXT_PROFILE:-release}"
step "build and install the extension ($PROFILE)"
"$REPO/scripts/install-extension.sh" "$PROFILE" >"$STATE/pgrx-install.log" 2>&1 \
  || { tail -30 "$STATE/pgrx-install.log"; die "installing the extension failed (log: $STATE/pgrx-install.log)"; }

step "start the demo cluster"
"$REPO/scripts/cluster.sh" start

step "demo"
( cd "$REPO" && psql -X -v ON_ERROR_STOP=1 -v keyfile="$DPTEXT_KEY_FILE" -f sql/demo.sql )

step "the proxy: psql connects to dptext-proxy as analyst, which logs in upstream as the MASKED role analyst"
"$REPO/scripts/proxy.sh" start
echo "--- through the proxy as the masked user analyst (the database masks; the proxy relays):"
"$REPO/scripts/proxy.sh" psql -c "SELECT id, patient, left(note, 60) AS note FROM records ORDER BY id LIMIT 3"
echo "--- an expression over a protected column computes on sanitized text only:"
"$REPO/scripts/proxy.sh" psql -c "SELECT upper(patient) AS patient FROM records ORDER BY id LIMIT 3"
echo "--- the same query directly as the owner, for comparison:"
psql -X -c "SELECT id, patient, left(note, 60) AS note FROM records ORDER BY id LIMIT 3"

cat >&2 <<MSG

The demo cluster and the proxy are still running.
  proxy:    PGPASSWORD=analyst-demo psql -h 127.0.0.1 -p ${DPTEXT_PROXY_PORT:-54330} -U analyst $PGDATABASE
            (or: scripts/proxy.sh psql; users analyst/analyst-demo (masked) and admin/admin-demo (unmasked))
  connect:  psql -h $PGHOST -p $PGPORT -U postgres $PGDATABASE
            (or: scripts/cluster.sh psql)
  stop:     scripts/proxy.sh stop; scripts/cluster.sh stop
MSG
