#!/usr/bin/env bash
# What masking at the source costs: the same three queries over 100,000
# notes as the owner (unmasked) and as a role labelled MASKED, in one run,
# one core (parallel query off). Prints each time and the masked/unmasked
# ratio:
#   filter   SELECT count(*) FROM t WHERE id % 7 = 0   (no labelled column:
#            should cost what it costs unmasked)
#   select   SELECT note FROM t                        (the rule once per row)
#   like     SELECT count(*) FROM t WHERE note LIKE '%pain%'
#
#   scripts/demo.sh            # once: builds, installs, starts the cluster
#   bench/sql_masking.sh [ROWS] [REPS]
source "$(dirname "${BASH_SOURCE[0]}")/sql_common.sh"
ROWS="${1:-100000}"
REPS="${2:-3}"
DB=dptext_bench_masking

notes_table "$DB" "$ROWS"
masked_reader "$DB"

# One session per measurement: warm first (vocabulary loaded, every
# distinct note seen once), then the fastest of REPS timed runs, in ms,
# with every row sent to psql (which discards it).
timed() { # $1 = role, $2 = query
  psql -X -q -d "$DB" -U "$1" -tA -v ON_ERROR_STOP=1 <<SQL
SET max_parallel_workers_per_gather = 0;
SELECT count(note) FROM (SELECT note FROM t WHERE id <= 2000) w \gset
SELECT 'infinity'::float8 AS best \gset
$(for _ in $(seq "$REPS"); do cat <<ONE
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

echo "rows: $ROWS, fastest of $REPS, one core"
printf '%-8s %12s %12s %8s\n' query unmasked_ms masked_ms ratio
for q in "filter|SELECT count(*) FROM t WHERE id % 7 = 0" \
         "select|SELECT note FROM t" \
         "like|SELECT count(*) FROM t WHERE note LIKE '%pain%'"; do
  name="${q%%|*}"; sql="${q#*|}"
  plain=$(timed postgres "$sql")
  masked=$(timed bench_masked "$sql")
  printf '%-8s %12s %12s %8s\n' "$name" "$plain" "$masked" \
    "$(awk -v a="$masked" -v b="$plain" 'BEGIN { if (b > 0 && a + 0 > 0) printf "%.2f", a / b; else print "-" }')"
done
# The rule called by hand, as the owner: what masked 'select' should cost.
rule=$(timed postgres "SELECT santext(note, 3) FROM t")
echo "reference: SELECT santext(note, 3) FROM t as the owner: $rule ms"
