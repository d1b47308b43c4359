#!/usr/bin/env bash
# The proxy's cost, measured in one run on the demo cluster:
#   1. pgbench -S TPS directly and through dptext-proxy as the unmasked user
#      (target: proxy >= 80% of direct) and as the masked one, in simple and
#      prepared modes;
#   2. the latency of selecting 1,000 notes: directly, through the proxy
#      unmasked, and through it masked (the database masks the note column,
#      labelled SanText eps 3, for the masked role "analyst"; the proxy
#      relays).
# When pgbouncer is installed (Debian package pgbouncer; the bench does not
# install it), the same pgbench runs go through it too (session pooling,
# trust auth: the lightest relay there is) as a reference for what any
# extra hop costs on this machine.
# DPTEXT_BENCH_RELAY_CORES=K (default 0: no pinning) gives the relays (the
# proxy, pgbouncer) the last K cores and PostgreSQL and pgbench the others,
# for every run including the direct ones: the deployment the 80% target
# assumes, where the relay does not take the server's cores. Needs nproc > K.
# With pgbouncer, the proxy and pgbouncer then run interleaved for
# DPTEXT_BENCH_ROUNDS rounds (default 5), the order swapped every round, each
# printing its TPS and the relay process's CPU microseconds per transaction.
# Usage: bench/proxy.sh [seconds per pgbench run, default 10]
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state
SECS="${1:-10}"
PROXY_PORT="${DPTEXT_PROXY_PORT:-54330}"
# Start the cluster only when it is down: a running one (the demo's) keeps its sessions.
"$REPO/scripts/cluster.sh" status >/dev/null 2>&1 || "$REPO/scripts/cluster.sh" start
psql -X -q -c "DROP TABLE IF EXISTS bench_notes" \
  -c "CREATE TABLE bench_notes AS SELECT row_number() OVER () AS id, note FROM records, generate_series(1, 5) LIMIT 1000" \
  -c "SECURITY LABEL FOR dptext ON COLUMN bench_notes.note IS 'MASKED WITH santext(eps => 3)'"
pgbench -i -q -s 10 "$PGDATABASE" >/dev/null 2>&1
# The demo's masked role (sql/demo.sql) reads the bench tables too.
psql -X -q -c "GRANT SELECT ON bench_notes, pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history TO analyst"
"$REPO/scripts/proxy.sh" start
# Client passwords of the demo proxy: <user>-demo.
pw() { echo "$1-demo"; }
PGB_PORT=$((PROXY_PORT + 1))
PGB=""
if command -v pgbouncer >/dev/null; then
  mkdir -p "$STATE/pgbouncer"
  cat > "$STATE/pgbouncer/pgbouncer.ini" <<INI
[databases]
$PGDATABASE = host=$PGHOST port=$PGPORT dbname=$PGDATABASE user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = trust
auth_file = $STATE/pgbouncer/users.txt
pool_mode = session
max_client_conn = 100
default_pool_size = 20
logfile = $STATE/pgbouncer/pgbouncer.log
pidfile = $STATE/pgbouncer/pgbouncer.pid
INI
  echo '"postgres" ""' > "$STATE/pgbouncer/users.txt"
  chown -R "$RUN_USER" "$STATE/pgbouncer" 2>/dev/null || true
  as_user pgbouncer -d "$STATE/pgbouncer/pgbouncer.ini" && PGB=1
fi
PIN=()
K="${DPTEXT_BENCH_RELAY_CORES:-0}"
CLIENTS="${DPTEXT_BENCH_CLIENTS:-4}"
N=$(nproc)
if [ "$K" -gt 0 ]; then
  [ "$N" -gt "$K" ] || { echo "DPTEXT_BENCH_RELAY_CORES=$K needs more than $K cores (have $N)" >&2; exit 2; }
  relay="$((N - K))-$((N - 1))"; rest="0-$((N - K - 1))"
  taskset -a -cp "$relay" "$(cat "$STATE/proxy/proxy.pid")" >/dev/null
  [ -n "$PGB" ] && taskset -a -cp "$relay" "$(cat "$STATE/pgbouncer/pgbouncer.pid")" >/dev/null
  # New backends inherit the postmaster's cores.
  taskset -a -cp "$rest" "$(head -1 "$PGDEMO/data/postmaster.pid")" >/dev/null
  PIN=(taskset -c "$rest")
  echo "pinned: relays on cores $relay; PostgreSQL and pgbench on $rest"
fi
tps() { "${PIN[@]}" pgbench -n -S -T "$SECS" -c "$CLIENTS" -j 2 -M "$1" "${@:2}" "$PGDATABASE" 2>&1 | awk '/^tps/ {print $3; exit}'; }
echo "pgbench -S, $CLIENTS clients, ${SECS}s each:"
for mode in simple prepared; do
  d=$(tps "$mode" -h 127.0.0.1 -p "$PGPORT" -U postgres)
  p=$(PGPASSWORD=$(pw admin) tps "$mode" -h 127.0.0.1 -p "$PROXY_PORT" -U admin)
  m=$(PGPASSWORD=$(pw analyst) tps "$mode" -h 127.0.0.1 -p "$PROXY_PORT" -U analyst)
  printf '  -M %-8s direct %8.0f tps | proxy unmasked %8.0f tps (%.1f%%) | proxy masked %8.0f tps (%.1f%%)' \
    "$mode" "$d" "$p" "$(echo "100*$p/$d" | bc -l)" "$m" "$(echo "100*$m/$d" | bc -l)"
  if [ -n "$PGB" ]; then
    b=$(tps "$mode" -h 127.0.0.1 -p "$PGB_PORT" -U postgres)
    printf ' | pgbouncer %8.0f tps (%.1f%%)' "$b" "$(echo "100*$b/$d" | bc -l)"
  fi
  echo
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The relay against pgbouncer, interleaved: DPTEXT_BENCH_ROUNDS rounds (default
# 5) of one pgbench run through each, the order swapped every round so that
# neither always runs on a warmer or a busier machine. Each run also reads the
# relay process's CPU time (user + system, all threads, /proc/PID/stat) and
# divides it by the transactions pgbench completed: CPU microseconds per
# transaction, a figure that load from elsewhere disturbs far less than TPS.
if [ -n "$PGB" ]; then
  ROUNDS="${DPTEXT_BENCH_ROUNDS:-5}"
  PROXY_PID=$(cat "$STATE/proxy/proxy.pid")
  PGB_PID=$(cat "$STATE/pgbouncer/pgbouncer.pid")
  TICK=$(getconf CLK_TCK)
  cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
  # run MODE PID ARGS...: "TPS CPU-us-per-transaction" of one pgbench run.
  run() {
    local mode=$1 pid=$2; shift 2
    local before after out
    before=$(cpu "$pid")
    out=$("${PIN[@]}" pgbench -n -S -T "$SECS" -c "$CLIENTS" -j 2 -M "$mode" "$@" "$PGDATABASE" 2>&1)
    after=$(cpu "$pid")
    awk -v b="$before" -v a="$after" -v hz="$TICK" '
      /^number of transactions actually processed/ {n = $NF}
      /^tps/ {t = $3}
      END {printf "%.0f %.2f\n", t, (a - b) * 1e6 / hz / n}' <<<"$out"
  }
  echo "relay against pgbouncer, interleaved, $ROUNDS rounds of ${SECS}s, $CLIENTS clients:"
  for mode in simple prepared; do
    ratios=()
    for r in $(seq 1 "$ROUNDS"); do
      if [ $((r % 2)) -eq 1 ]; then
        p=$(PGPASSWORD=$(pw admin) run "$mode" "$PROXY_PID" -h 127.0.0.1 -p "$PROXY_PORT" -U admin)
        b=$(run "$mode" "$PGB_PID" -h 127.0.0.1 -p "$PGB_PORT" -U postgres)
      else
        b=$(run "$mode" "$PGB_PID" -h 127.0.0.1 -p "$PGB_PORT" -U postgres)
        p=$(PGPASSWORD=$(pw admin) run "$mode" "$PROXY_PID" -h 127.0.0.1 -p "$PROXY_PORT" -U admin)
      fi
      read -r pt pc <<<"$p"
      read -r bt bc_ <<<"$b"
      ratio=$(echo "$pt / $bt" | bc -l)
      ratios+=("$ratio")
      printf '  -M %-8s round %d: proxy %8.0f tps, %5.2f us CPU/txn | pgbouncer %8.0f tps, %5.2f us CPU/txn | TPS ratio %.2f\n' \
        "$mode" "$r" "$pt" "$pc" "$bt" "$bc_" "$ratio"
    done
    printf '  -M %-8s median TPS ratio proxy / pgbouncer: %.2f (min %.2f, max %.2f)\n' "$mode" \
      "$(printf '%s\n' "${ratios[@]}" | median)" \
      "$(printf '%s\n' "${ratios[@]}" | sort -n | head -1)" \
      "$(printf '%s\n' "${ratios[@]}" | sort -n | tail -1)"
  done
fi
lat() {
  for _ in 1 2 3 4 5; do
    s=$(date +%s.%N); psql -X -q -A -t "$@" -c "SELECT id, note FROM bench_notes" >/dev/null; e=$(date +%s.%N)
    echo "($e - $s) * 1000" | bc -l
  done | median
}
d=$(lat -h 127.0.0.1 -p "$PGPORT" -U postgres "$PGDATABASE")
a=$(lat -h 127.0.0.1 -p "$PGPORT" -U analyst "$PGDATABASE")
u=$(PGPASSWORD=$(pw admin) lat -h 127.0.0.1 -p "$PROXY_PORT" -U admin "$PGDATABASE")
m=$(PGPASSWORD=$(pw analyst) lat -h 127.0.0.1 -p "$PROXY_PORT" -U analyst "$PGDATABASE")
printf 'SELECT 1,000 notes (median of 5, ms, psql connect included): direct %.0f | direct as analyst (masked at the source) %.0f | proxy unmasked %.0f | proxy masked %.0f\n' "$d" "$a" "$u" "$m"
"$REPO/scripts/proxy.sh" stop
[ "$K" -gt 0 ] && taskset -a -cp "0-$((N - 1))" "$(head -1 "$PGDEMO/data/postmaster.pid")" >/dev/null
if [ -n "$PGB" ]; then as_user kill "$(cat "$STATE/pgbouncer/pgbouncer.pid")" 2>/dev/null || true; fi
