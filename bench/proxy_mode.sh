#!/usr/bin/env bash
# Proxy mode's throughput: rows per second of a table read through
# dptext-proxy in proxy mode, whose rule the proxy runs on its worker pool
# (batched), against the database calling the same mechanism row by row as
# a SQL function, in the same run, on the demo cluster:
#   deidentify: SELECT note FROM t through the proxy (rule deidentify)
#               vs SELECT deidentify(note) FROM t directly;
#   ndd:        the same with ndd / ndd_distort(note).
# Each figure is the median of 3 timed runs after an untimed one (which
# loads the models in the proxy and in the backend).
#   bench/proxy_mode.sh [ROWS for deidentify, default 480] [ROWS for ndd, default 96]
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state
ROWS_DEID="${1:-480}"
ROWS_NDD="${2:-96}"
DB=dptext_bench_pm
PORT="${DPTEXT_BENCH_PROXY_PORT:-54336}"
"$REPO/scripts/cluster.sh" status >/dev/null 2>&1 || "$REPO/scripts/cluster.sh" start
( cd "$REPO" && cargo build --release -q -p dptext-proxy )
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
psql -X -q -d "$DB" -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION dptext;
\i $REPO/sql/demo_data.sql
CREATE TABLE t_deid AS SELECT n AS id, r.note FROM generate_series(1, $ROWS_DEID) n JOIN records r ON r.id = 1 + (n % 240);
CREATE TABLE t_ndd AS SELECT n AS id, r.note FROM generate_series(1, $ROWS_NDD) n JOIN records r ON r.id = 1 + (n % 240);
DO \$\$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bench_pm') THEN CREATE ROLE bench_pm LOGIN; END IF; END\$\$;
GRANT SELECT ON t_deid, t_ndd TO bench_pm;
SQL
mkdir -p "$STATE/bench-pm"
cat > "$STATE/bench-pm/proxy.toml" <<TOML
listen = "127.0.0.1:$PORT"
key = "proxy mode benchmark key, not secret"
[upstream]
host = "$PGHOST"
port = $PGPORT
dbname = "$DB"
[[user]]
name = "bench"
password = "bench-pw"
masked = true
upstream_user = "bench_pm"
[masking]
mode = "proxy"
[[rule]]
table = "t_deid"
column = "note"
rule = "deidentify"
[[rule]]
table = "t_ndd"
column = "note"
rule = "ndd"
TOML
"$REPO/target/release/dptext-proxy" --config "$STATE/bench-pm/proxy.toml" > "$STATE/bench-pm/proxy.log" 2>&1 &
PROXY=$!
trap 'kill $PROXY 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q listening "$STATE/bench-pm/proxy.log" && break; sleep 0.1; done
grep -q listening "$STATE/bench-pm/proxy.log" || { cat "$STATE/bench-pm/proxy.log"; die "the proxy did not start"; }

# Seconds of one run of $2 (a query) as $1 ("proxy" or "direct").
run_once() {
  local t0 t1
  t0=$(date +%s.%N)
  if [ "$1" = proxy ]; then
    PGPASSWORD=bench-pw psql -X -q -At -h 127.0.0.1 -p "$PORT" -U bench -d "$DB" -c "$2" > /dev/null
  else
    psql -X -q -At -d "$DB" -c "SET max_parallel_workers_per_gather = 0" -c "$2" > /dev/null
  fi
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
measure() { # $1 proxy|direct, $2 query
  run_once "$1" "$2" > /dev/null
  median3 "$(run_once "$1" "$2")" "$(run_once "$1" "$2")" "$(run_once "$1" "$2")"
}
echo "cores: $(nproc); proxy workers: one per core; each run a new session"
for case in "deidentify t_deid $ROWS_DEID deidentify(note)" "ndd t_ndd $ROWS_NDD ndd_distort(note)"; do
  set -- $case
  p=$(measure proxy "SELECT note FROM $2")
  d=$(measure direct "SELECT $4 FROM $2")
  printf '%-10s %5d rows: proxy mode %7.2f s (%6.1f rows/s)   SQL function %7.2f s (%6.1f rows/s)   ratio %.2f\n' \
    "$1" "$3" "$p" "$(echo "$3 / $p" | bc -l)" "$d" "$(echo "$3 / $d" | bc -l)" "$(echo "$d / $p" | bc -l)"
done
