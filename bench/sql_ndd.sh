#!/usr/bin/env bash
# SQL benchmark: ndd_distort over the demo notes (substitutive and
# generative, 8 candidates; substitutive with the operators that keep a
# timeline, DATE:shift and ID:redact) against md5(note) over the same rows
# in the same session, and deidentify (detection alone plus replacement)
# for scale. One backend, one ONNX thread, parallel query off.
#
#   scripts/demo.sh          # once: builds, installs, starts the cluster
#   bench/sql_ndd.sh [ROWS]  # default 120 (half the demo notes)
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state
ROWS="${1:-120}"
DB=dptext_bench_ndd

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>/dev/null
psql -X -q -d "$DB" -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION dptext;
\i $REPO/sql/demo_data.sql
CREATE TABLE t AS SELECT id, note FROM records WHERE id <= $ROWS;
ANALYZE t;
SQL

timed() {
  psql -X -q -d "$DB" -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = 0;
SET dptext.seed = 1;
SELECT length(ndd_distort('warm up John Smith, the models load once')) AS warm \gset
SELECT clock_timestamp() AS t0 \gset
$1 \gset
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000;
SQL
}

md5=$(timed "SELECT count(md5(note)) FROM t")
dei=$(timed "SELECT count(deidentify(note)) FROM t")
sub=$(timed "SELECT count(ndd_distort(note)) FROM t")
gen=$(timed "SELECT count(ndd_distort(note, 'generative')) FROM t")
ops=$(timed "SELECT count(ndd_distort(note, operators => 'DATE:shift,ID:redact')) FROM t")
awk -v m="$md5" -v e="$dei" -v s="$sub" -v g="$gen" -v o="$ops" -v n="$ROWS" 'BEGIN {
  printf "rows: %d demo notes\n", n
  printf "md5:                      %8.0f ms  %9.1f rows/s\n", m, n / (m / 1000)
  printf "deidentify:               %8.0f ms  %9.1f rows/s  ratio to md5: %.0f\n", e, n / (e / 1000), e / m
  printf "ndd_distort substitutive: %8.0f ms  %9.1f rows/s  ratio to md5: %.0f\n", s, n / (s / 1000), s / m
  printf "ndd_distort generative:   %8.0f ms  %9.1f rows/s  ratio to md5: %.0f\n", g, n / (g / 1000), g / m
  printf "ndd_distort DATE:shift,ID:redact: %8.0f ms  %9.1f rows/s  ratio to md5: %.0f\n", o, n / (o / 1000), o / m
}'
