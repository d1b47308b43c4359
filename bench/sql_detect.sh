#!/usr/bin/env bash
# SQL benchmark: detect_pii and deidentify over the demo notes (repeated to
# ROWS rows), against md5(note) over the same rows in the same session.
# Prints rows/s and the ratio to md5. One backend, parallel query off.
#
#   scripts/demo.sh            # once: builds, installs, starts the cluster
#   bench/sql_detect.sh [ROWS]
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state
ROWS="${1:-480}"
DB=dptext_bench_detect

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" 2>/dev/null
psql -X -q -d "$DB" -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION dptext;
\i $REPO/sql/demo_data.sql
-- A distinct suffix per row: detect_pii is STABLE, and PostgreSQL would
-- otherwise memoize repeated notes.
CREATE TABLE t AS SELECT n AS id, r.note || ' (copy ' || n || ')' AS note FROM generate_series(1, $ROWS) n JOIN records r ON r.id = 1 + (n % 240);
ANALYZE t;
SQL

# One session per query; an untimed call loads the model first.
timed() {
  psql -X -q -d "$DB" -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT count(*) AS warm FROM detect_pii('warm up the model, John Smith') \gset
SELECT clock_timestamp() AS t0 \gset
$1 \gset
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000;
SQL
}

md5=$(timed "SELECT count(md5(note)) FROM t")
det=$(timed "SELECT count(*) FROM t, detect_pii(t.note)")
dei=$(timed "SELECT count(deidentify(note)) FROM t")
awk -v m="$md5" -v d="$det" -v e="$dei" -v n="$ROWS" 'BEGIN {
  printf "rows: %d\n", n
  printf "md5:        %8.0f ms  %9.0f rows/s\n", m, n / (m / 1000)
  printf "detect_pii: %8.0f ms  %9.0f rows/s  ratio to md5: %.0f\n", d, n / (d / 1000), d / m
  printf "deidentify: %8.0f ms  %9.0f rows/s  ratio to md5: %.0f\n", e, n / (e / 1000), e / m
}'
