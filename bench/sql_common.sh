# What the SQL benchmarks share (sourced, not run): the demo cluster's
# environment (scripts/lib.sh, resolve_state) and notes_table, which makes
# a fresh database holding the extension and a table t(id, note) of ROWS
# notes cycled from the demo's 240.
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
