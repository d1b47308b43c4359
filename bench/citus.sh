#!/usr/bin/env bash
# Scale-out benchmark: sanitize ROWS short notes with a SanText rule
# (`MASKED WITH santext(eps => 3)`) into a sanitized copy, built by
# dptext.create_sanitized_view, on one node (a local table on the
# coordinator: a materialized view, parallel query on) and on the Citus
# coordinator with two workers (a distributed table: a co-located
# distributed table filled on the workers), in the same run, on the same
# machine. Prints both times and the ratio.
#
#   bench/citus.sh [ROWS]        # default 1,000,000
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state
ROWS="${1:-1000000}"
"$REPO/scripts/citus.sh" start
q() { "$REPO/scripts/citus.sh" psql coordinator -q -tA -v ON_ERROR_STOP=1 "$@"; }

q <<SQL
SET client_min_messages = warning;
DROP TABLE IF EXISTS bench_local, bench_dist, bench_dist_safe CASCADE;
DROP MATERIALIZED VIEW IF EXISTS bench_local_safe;
-- Short notes (about a dozen words) from a few hundred combinations, so
-- that the vocabulary seen is varied but the per-token tables stay warm.
CREATE TABLE bench_local AS
SELECT g AS id,
       (ARRAY['Maria','John','Ana','Wei','Fatima','Olga','Kwame','Lucia','Tom','Priya'])[1 + g % 10] || ' '
    || (ARRAY['Lopez','Smith','Ybarra','Chen','Okafor','Novak','Mensah','Rossi','Baker','Iyer','Kim'])[1 + g % 11]
    || (ARRAY[' reports chest pain since Monday',' was discharged home with her daughter',
              ' called about the MRI results',' missed the follow-up visit',
              ' has a fever and a dry cough',' needs a refill of metformin',
              ' fell at home and hurt his wrist'])[1 + g % 7]
    || ' at ' || (ARRAY['Springfield General','the north clinic','Mercy Hospital','ward 4','the ED'])[1 + g % 5]
    || ', visit ' || g || '.' AS note
  FROM generate_series(1, $ROWS) g;
SECURITY LABEL FOR dptext ON COLUMN bench_local.note IS 'MASKED WITH santext(eps => 3)';
CREATE TABLE bench_dist (id bigint PRIMARY KEY, note text);
SECURITY LABEL FOR dptext ON COLUMN bench_dist.note IS 'MASKED WITH santext(eps => 3)';
SELECT create_distributed_table('bench_dist', 'id');
INSERT INTO bench_dist SELECT id, note FROM bench_local;
ANALYZE bench_local; ANALYZE bench_dist;
SQL
words=$(q -c "SELECT sum(array_length(regexp_split_to_array(note, '[^[:alnum:]]+'), 1)) FROM bench_local")
shards=$(q -c "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'bench_dist'::regclass")
echo "rows: $ROWS, words: $words, shards: $shards, cores: $(nproc)"

timed() { # $1 = source table, $2 = target
  q <<SQL
SET client_min_messages = warning;
SET max_parallel_workers_per_gather = $(nproc);
SELECT clock_timestamp() AS t0 \gset
SELECT dptext.create_sanitized_view('$1', '$2') \gset
SELECT round(extract(epoch FROM clock_timestamp() - :'t0'::timestamptz)::numeric, 1);
SQL
}
one=$(timed bench_local bench_local_safe)
dist=$(timed bench_dist bench_dist_safe)
same=$(q -c "SELECT count(*) FILTER (WHERE l.note IS DISTINCT FROM d.note) FROM bench_local_safe l JOIN bench_dist_safe d USING (id)")
echo "one node:               ${one} s  ($(echo "$ROWS / $one" | bc) notes/s)"
echo "coordinator + 2 workers: ${dist} s  ($(echo "$ROWS / $dist" | bc) notes/s)"
echo "ratio one node / distributed: $(echo "scale=2; $one / $dist" | bc)"
echo "rows that differ between the two copies (same key): $same"
