#!/usr/bin/env bash
# SQL benchmark: SELECT santext(note, 3) over 100,000 notes, against
# SELECT md5(note) over the same rows in the same run, on one core
# (parallel query off) and then with 2 parallel workers. Prints the ratio.
#
#   scripts/demo.sh            # once: builds, installs, starts the cluster
#   bench/sql_santext.sh [ROWS]
source "$(dirname "${BASH_SOURCE[0]}")/sql_common.sh"
ROWS="${1:-100000}"
DB=dptext_bench

notes_table "$DB" "$ROWS"

# Each measurement runs in its own session, first untimed over the first
# 5,000 rows (every distinct note: loads the vocabulary and fills the
# per-token tables), then timed over all rows. Parallel workers are new
# processes for every query, so with workers > 0 they start cold.
timed() { # $1 = parallel workers, $2 = expression
  psql -X -q -d "$DB" -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = $1;
SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
SELECT count($2) AS warm FROM (SELECT note FROM t WHERE id <= 5000) w \gset
SELECT clock_timestamp() AS t0 \gset
SELECT count($2) FROM t \gset
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000;
SQL
}

words=$(psql -X -q -d "$DB" -tA -c "SELECT sum(array_length(regexp_split_to_array(note, '[^[:alnum:]]+'), 1)) FROM t")
echo "rows: $ROWS, words: $words"
for workers in 0 2; do
  md5=$(timed "$workers" "md5(note)")
  san=$(timed "$workers" "santext(note, 3)")
  awk -v w="$workers" -v m="$md5" -v s="$san" -v n="$ROWS" -v words="$words" 'BEGIN {
    printf "workers=%d  md5: %.0f ms  santext: %.0f ms  ratio santext/md5: %.1f  santext: %.0f notes/s, %.0f words/s\n",
      w, m, s, s / m, n / (s / 1000), words / (s / 1000) }'
done
