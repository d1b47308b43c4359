#!/usr/bin/env bash
# What the computed-once store (docs/masking.md, "Computed once") buys for a
# model-based rule, in one run on the demo cluster: ROWS distinct notes
# labelled `deidentify()`, read by a MASKED role and copied by the owner.
# Prints each time in ms and the ratios the store is judged by:
#   raw         SELECT count(*), sum(length(note)) FROM t as the owner
#   cold        the same query masked, store empty (computes all; a masked
#               session files nothing, so the store stays empty)
#   warm        dptext.warm('t') from empty, 1 and 2 model threads
#   stored      the masked query in a new session after warming (served
#               from the table)
#   repeated    the same query again in that session (this backend's copy)
#   copy_rows   create_sanitized_view with the store off (row by row, as before)
#   copy_batch  create_sanitized_view with the store on and empty (warms first)
#   refresh_all REFRESH MATERIALIZED VIEW with the store off, after 1% of rows changed
#   refresh_inc the same with the store on: dptext.warm, then REFRESH
#
#   scripts/demo.sh            # once: builds, installs, starts the cluster
#   bench/sql_store.sh [ROWS] [reads]
# With `reads`, only the reads: raw, then the store warmed with 2 model
# threads, stored and repeated (minutes less).
source "$(dirname "${BASH_SOURCE[0]}")/sql_common.sh"
ROWS="${1:-10000}"
ONLY="${2:-all}"
DB=dptext_bench_store

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
psql -X -q -d "$DB" -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION dptext;
\i $REPO/sql/demo_data.sql
-- Distinct notes: each demo note with its own visit line.
CREATE TABLE t AS SELECT n AS id, r.note || ' Visit ' || n || '.' AS note
  FROM generate_series(1, $ROWS) n JOIN records r ON r.id = 1 + (n % 240);
ALTER TABLE t ADD PRIMARY KEY (id);
ANALYZE t;
SECURITY LABEL FOR dptext ON COLUMN t.note IS 'MASKED WITH deidentify()';
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bench_masked') THEN CREATE ROLE bench_masked LOGIN; END IF;
END \$\$;
SECURITY LABEL FOR dptext ON ROLE bench_masked IS 'MASKED';
ALTER ROLE bench_masked SET dptext.key_file = '$DPTEXT_KEY_FILE';
GRANT SELECT ON t TO bench_masked;
SQL

# ms of one statement (after the session's setup), in a new session.
ms() { # $1 = role, $2 = setup, $3 = statement
  psql -X -q -d "$DB" -U "$1" -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = 0;
SET client_min_messages = warning;
$2
SELECT clock_timestamp() AS t0 \gset
\o /dev/null
$3;
\o
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric * 1000, 1);
SQL
}
# The fastest of three runs of a query in one session, after one untimed run.
best3() { # $1 = role, $2 = query
  psql -X -q -d "$DB" -U "$1" -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = 0;
\o /dev/null
$2;
\o
SELECT 'infinity'::float8 AS best \gset
$(for _ in 1 2 3; do cat <<ONE
SELECT clock_timestamp() AS t0 \gset
\o /dev/null
$2;
\o
SELECT least(:'best'::float8, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000) AS best \gset
ONE
done)
SELECT round(:'best'::numeric, 1);
SQL
}
owner_setup="SET dptext.key_file = '$DPTEXT_KEY_FILE';"
q="SELECT count(*), sum(length(note)) FROM t"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
row() { printf '%-12s %12s %10s\n' "$1" "$2" "${3:-}"; }

echo "rows: $ROWS distinct notes, rule deidentify(), one backend, parallel query off"
row step ms ratio
raw=$(best3 postgres "$q"); row raw "$raw" 1.00
# A masked backend's memory (RSS and anonymous memory, from /proc) after
# reading every note: served from the store, and computed (store off for
# the role, 200 notes: the models load).
memory() {
  for mode in on off; do
    limit=""; [ "$mode" = off ] && limit="WHERE id <= 200"
    psql -X -q -d postgres -c "ALTER ROLE bench_masked IN DATABASE $DB SET dptext.store = $mode" >/dev/null
    psql -X -q -d "$DB" -U bench_masked -tA -v ON_ERROR_STOP=1 <<SQL
SELECT pg_backend_pid() AS pid \gset
\setenv BENCH_PID :pid
\o /dev/null
SELECT count(*), sum(length(note)) FROM t $limit;
\o
\! awk -v m="store $mode" '/^(VmRSS|RssAnon)/ { printf "%s %s %s kB\\n", m, \$1, \$2 }' /proc/\$BENCH_PID/status
SQL
  done
  psql -X -q -d postgres -c "ALTER ROLE bench_masked IN DATABASE $DB RESET dptext.store" >/dev/null
}

if [ "$ONLY" = reads ]; then
  psql -X -q -d "$DB" -c "TRUNCATE dptext.store"
  warm2=$(ms postgres "$owner_setup SET dptext.model_threads = 2;" "SELECT dptext.warm('t')"); row warm_2thread "$warm2"
  stored=$(ms bench_masked "" "$q"); row stored "$stored" "$(ratio "$stored" "$raw")"
  repeated=$(best3 bench_masked "$q"); row repeated "$repeated" "$(ratio "$repeated" "$raw")"
  memory
  exit 0
fi
psql -X -q -d "$DB" -c "TRUNCATE dptext.store"
cold=$(ms bench_masked "" "$q"); row cold "$cold" "$(ratio "$cold" "$raw")"
entries=$(psql -X -q -d "$DB" -tAc "SELECT count(*) || ' entries, ' || pg_size_pretty(pg_total_relation_size('dptext.store')) FROM dptext.store")
echo "store after the cold read: $entries"

psql -X -q -d "$DB" -c "TRUNCATE dptext.store"
warm1=$(ms postgres "$owner_setup" "SELECT dptext.warm('t')"); row warm_1thread "$warm1" "$(ratio "$warm1" "$cold")"
psql -X -q -d "$DB" -c "TRUNCATE dptext.store"
warm2=$(ms postgres "$owner_setup SET dptext.model_threads = 2;" "SELECT dptext.warm('t')"); row warm_2thread "$warm2" "$(ratio "$warm2" "$cold")"
stored=$(ms bench_masked "" "$q"); row stored "$stored" "$(ratio "$stored" "$raw")"
repeated=$(best3 bench_masked "$q"); row repeated "$repeated" "$(ratio "$repeated" "$raw")"

copy_rows=$(ms postgres "$owner_setup SET dptext.store = off;" "SELECT dptext.create_sanitized_view('t', 't_rows')")
row copy_rows "$copy_rows" 1.00
psql -X -q -d "$DB" -c "TRUNCATE dptext.store"
copy_batch=$(ms postgres "$owner_setup SET dptext.model_threads = 2;" "SELECT dptext.create_sanitized_view('t', 't_batch')")
row copy_batch "$copy_batch" "$(ratio "$copy_rows" "$copy_batch")x faster"

# 1% of the rows change.
psql -X -q -d "$DB" -c "UPDATE t SET note = note || ' Reviewed.' WHERE id % 100 = 0"
refresh_all=$(ms postgres "$owner_setup SET dptext.store = off;" "REFRESH MATERIALIZED VIEW t_rows")
row refresh_all "$refresh_all" 1.00
refresh_inc=$(ms postgres "$owner_setup" "SELECT dptext.warm('t'); REFRESH MATERIALIZED VIEW t_batch")
row refresh_inc "$refresh_inc" "$(awk -v a="$refresh_inc" -v b="$refresh_all" 'BEGIN { printf "%.1f%%", 100 * a / b }') of refresh_all"
same=$(psql -X -q -d "$DB" -tAc "SELECT count(*) FROM t_rows r JOIN t_batch b USING (id) WHERE r.note IS DISTINCT FROM b.note")
echo "rows that differ between the two copies: $same"
