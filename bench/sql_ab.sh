#!/usr/bin/env bash
# Two builds of the extension, one expression, the same rows, alternating in
# one script: for changes whose baseline is the previous build rather than
# another query. Each run is its own session: an untimed pass over the first
# 5,000 rows (loads vocabularies, fills tables), then the timed query over all
# rows, on one core. Prints each pair and the best of each side.
#
#   bench/sql_ab.sh PORT_BEFORE PORT_AFTER 'santext(note, 3)' [PAIRS] [ROWS]
#
# Both clusters listen on the demo cluster's socket directory. One way to
# run the previous build beside the current one: copy the installed
# dptext.so and dptext--*.sql into the relocated copy of PostgreSQL that
# scripts/test.sh keeps under target/pg-private before installing the new
# build with scripts/install-extension.sh, then initdb one cluster with each
# copy's binaries (shared_preload_libraries = 'dptext', dptext.assets_dir
# set, unix_socket_directories = target/demo-pg/run) on the two ports.
source "$(dirname "${BASH_SOURCE[0]}")/sql_common.sh"
[ $# -ge 3 ] || die "usage: bench/sql_ab.sh PORT_BEFORE PORT_AFTER EXPR [PAIRS] [ROWS]"
BEFORE="$1"; AFTER="$2"; EXPR="$3"; PAIRS="${4:-6}"; ROWS="${5:-100000}"
DB=dptext_bench

for port in "$BEFORE" "$AFTER"; do PGPORT="$port" notes_table "$DB" "$ROWS" >/dev/null; done

timed() { # $1 = port
  PGPORT="$1" psql -X -q -d "$DB" -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT count($EXPR) AS warm FROM (SELECT note FROM t WHERE id <= 5000) w \gset
SELECT clock_timestamp() AS t0 \gset
SELECT count($EXPR) FROM t \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000);
SQL
}

best_before=""; best_after=""
for i in $(seq "$PAIRS"); do
  b=$(timed "$BEFORE"); a=$(timed "$AFTER")
  echo "pair $i: before $b ms, after $a ms"
  if [ -z "$best_before" ] || [ "$b" -lt "$best_before" ]; then best_before=$b; fi
  if [ -z "$best_after" ] || [ "$a" -lt "$best_after" ]; then best_after=$a; fi
done
awk -v b="$best_before" -v a="$best_after" -v n="$ROWS" 'BEGIN {
  printf "best of each: before %d ms, after %d ms (%d rows); after/before %.2f\n", b, a, n, a / b }'
