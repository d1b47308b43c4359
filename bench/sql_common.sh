# What the SQL benchmarks share (sourced, not run): the demo cluster's
# environment (scripts/lib.sh, resolve_state), notes_table, which makes
# a fresh database holding the extension and a table t(id, note) of ROWS
# notes cycled from the demo's 240, and masked_reader, which labels t.note
# and makes the role bench_masked MASKED under the demo cluster's key.
#   source "$(dirname "${BASH_SOURCE[0]}")/sql_common.sh"
#   notes_table DB ROWS
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
resolve_state

notes_table() { # $1 = database, $2 = rows
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"
  psql -X -q -d "$1" -v ON_ERROR_STOP=1 <<SQL
CREATE EXTENSION dptext;
\i $REPO/sql/demo_data.sql
CREATE TABLE t AS SELECT n AS id, r.note FROM generate_series(1, $2) n
  JOIN records r ON r.id = 1 + (n % 240);
ANALYZE t;
SQL
}

masked_reader() { # $1 = database: t.note labelled, role bench_masked MASKED and keyed
  psql -X -q -d "$1" -v ON_ERROR_STOP=1 <<SQL
SECURITY LABEL FOR dptext ON COLUMN t.note IS 'MASKED WITH santext(eps => 3)';
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bench_masked') THEN CREATE ROLE bench_masked LOGIN; END IF;
END \$\$;
SECURITY LABEL FOR dptext ON ROLE bench_masked IS 'MASKED';
ALTER ROLE bench_masked SET dptext.key_file = '$DPTEXT_KEY_FILE';
GRANT SELECT ON t TO bench_masked;
SQL
}
