#!/usr/bin/env bash
# Masked reads on two builds of the extension, the same rows, alternating in
# one script: what a change to masking at the source costs against the
# previous build. The queries of bench/sql_masking.sh, each run as a role
# labelled MASKED (keyed) in its own session: an untimed pass over the first
# 2,000 rows (vocabulary loaded, every distinct note seen once), then the
# timed query, on one core. Prints each pair and the best of each side.
#
#   bench/sql_masking_ab.sh PORT_BEFORE PORT_AFTER [PAIRS] [ROWS]
#
# Both clusters listen on the demo cluster's socket directory and read the
# demo cluster's key file (see bench/sql_ab.sh for one way to run the
# previous build beside the current one).
source "$(dirname "${BASH_SOURCE[0]}")/sql_common.sh"
[ $# -ge 2 ] || die "usage: bench/sql_masking_ab.sh PORT_BEFORE PORT_AFTER [PAIRS] [ROWS]"
BEFORE="$1"; AFTER="$2"; PAIRS="${3:-5}"; ROWS="${4:-100000}"
DB=dptext_bench_masking_ab

for port in "$BEFORE" "$AFTER"; do
  PGPORT="$port" notes_table "$DB" "$ROWS" >/dev/null
  PGPORT="$port" masked_reader "$DB"
done

QUERIES=("SELECT count(*) FROM t WHERE id % 7 = 0" "SELECT note FROM t"
  "SELECT count(*) FROM t WHERE note LIKE '%pain%'")
NAMES=(filter select like)

timed() { # $1 = port, $2 = query
  PGPORT="$1" psql -X -q -d "$DB" -U bench_masked -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT count(note) FROM (SELECT note FROM t WHERE id <= 2000) w \gset
SELECT clock_timestamp() AS t0 \gset
\o /dev/null
$2;
\o
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000, 1);
SQL
}

printf '%-7s %12s %12s %8s\n' query before_ms after_ms ratio
for q in 0 1 2; do
  best_b=""; best_a=""
  for _ in $(seq "$PAIRS"); do
    b=$(timed "$BEFORE" "${QUERIES[$q]}"); a=$(timed "$AFTER" "${QUERIES[$q]}")
    best_b=$(printf '%s\n%s\n' "$b" "${best_b:-$b}" | sort -g | head -1)
    best_a=$(printf '%s\n%s\n' "$a" "${best_a:-$a}" | sort -g | head -1)
  done
  awk -v n="${NAMES[$q]}" -v b="$best_b" -v a="$best_a" 'BEGIN { printf "%-7s %12s %12s %8.2f\n", n, b, a, a / b }'
done
