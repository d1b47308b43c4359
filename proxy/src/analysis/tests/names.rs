//! Which name a reference binds to must be the one PostgreSQL binds it
//! to: CTE visibility in `WITH RECURSIVE`, and output columns whose names
//! the analyzer cannot be certain of (FigureColname).

use super::*;

#[test]
fn a_recursive_with_refuses_references_to_later_ctes() {
    // PostgreSQL resolves pg_class in a to the later CTE, whose relname
    // is the raw note.
    let r = refused(
        "WITH RECURSIVE a AS (SELECT relname FROM pg_class), \
         pg_class AS (SELECT note AS relname FROM records) \
         SELECT relname || '' AS leaked FROM a;",
        Rule::ConstructNotAllowed,
    );
    assert!(r.message.contains("pg_class"), "{r}");
    // Also from a subquery nested in the earlier CTE.
    refused(
        "WITH RECURSIVE a AS (SELECT (SELECT relname FROM pg_class LIMIT 1) AS r), \
         pg_class AS (SELECT note AS relname FROM records) SELECT r FROM a",
        Rule::ConstructNotAllowed,
    );
    // A CTE that reads itself without a recursive term.
    refused(
        "WITH RECURSIVE pg_class AS (SELECT relname FROM pg_class) SELECT relname FROM pg_class",
        Rule::ConstructNotAllowed,
    );
    // Its own name in the non-recursive term.
    refused(
        "WITH RECURSIVE t(n) AS (SELECT relname FROM t UNION ALL SELECT n FROM t) SELECT n FROM t",
        Rule::ConstructNotAllowed,
    );
    refused(
        "WITH a AS (SELECT 1 AS x), a AS (SELECT 2 AS x) SELECT x FROM a",
        Rule::ConstructNotAllowed,
    );
}

#[test]
fn a_recursive_with_still_reads_earlier_ctes_and_itself() {
    // b reads a's protected note (refused in an expression by its own rule).
    refused(
        "WITH RECURSIVE a AS (SELECT id, note FROM records), b AS (SELECT note FROM a) \
         SELECT note || '' FROM b",
        Rule::ProtectedInExpression,
    );
    assert_eq!(
        plan(
            "WITH RECURSIVE a AS (SELECT 1 AS x), \
             t(n) AS (SELECT x FROM a UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT n FROM t"
        ),
        [None]
    );
    // The main query sees every CTE of the list.
    refused(
        "WITH RECURSIVE a AS (SELECT 1 AS x), \
         pg_class AS (SELECT note AS relname FROM records) \
         SELECT relname || '' FROM pg_class",
        Rule::ProtectedInExpression,
    );
}

#[test]
fn a_plain_with_hides_later_ctes_from_earlier_ones() {
    // Without RECURSIVE, pg_class in a is the catalog table.
    // (Had a read the CTE, the expression would be refused by its own
    // rule; it reads the catalog, and only the CTE's protected output
    // refuses the statement.)
    refused(
        "WITH a AS (SELECT relname FROM pg_class), \
         pg_class AS (SELECT note AS relname FROM records) \
         SELECT relname || '' AS leaked FROM a",
        Rule::ProtectedWithBuffering,
    );
    refused(
        "WITH a AS (SELECT 1 AS x), pg_class AS (SELECT note AS relname FROM records) \
         SELECT relname || '' FROM pg_class",
        Rule::ProtectedInExpression,
    );
}

#[test]
fn a_figured_name_resolves_nothing() {
    // The analyzer would name s's column note (PostgreSQL: nspname), and
    // the server binds note to r.note. The field selection `.nspname` of
    // something that is not a call is refused first now (it could be
    // attribute notation for a function nspname(x)).
    refused(
        "SELECT r.id, (SELECT note || '' FROM (SELECT (t.note)[1].nspname FROM \
         (SELECT array_agg(n) AS note FROM pg_namespace n) t) s) AS leaked FROM records r;",
        Rule::FunctionNotAllowed,
    );
    // PostgreSQL names the scalar subquery's column patient and joins on it.
    refused(
        "SELECT r.id, r.ward FROM records r NATURAL JOIN \
         (SELECT (SELECT 'John Smith'::text AS patient)) s;",
        Rule::ColumnNameUncertain,
    );
    refused(
        "SELECT r.id FROM records r NATURAL JOIN (SELECT (SELECT 'x'::text AS note)) s",
        Rule::ColumnNameUncertain,
    );
    // CASE ... END::text is named text by PostgreSQL.
    refused(
        "SELECT r.id FROM records r NATURAL JOIN (SELECT CASE WHEN true THEN 'x' END::text) s",
        Rule::ColumnNameUncertain,
    );
    // Through a CTE's output names too (the field selection is refused
    // first now, as above).
    refused(
        "WITH c AS (SELECT (t.note)[1].nspname FROM (SELECT array_agg(n) AS note FROM pg_namespace n) t) \
         SELECT r.id, (SELECT note || '' FROM c) FROM records r",
        Rule::FunctionNotAllowed,
    );
    // A qualified reference to a name only a guess gives.
    refused(
        "SELECT s.lower FROM (SELECT lower('x')) s",
        Rule::ColumnNameUncertain,
    );
    // USING a name only a guess gives.
    refused(
        "SELECT s.* FROM (SELECT lower('x')) s JOIN patients p USING (lower)",
        Rule::ColumnNameUncertain,
    );
    // unnest of a composite array returns the type's columns.
    refused(
        "SELECT (SELECT unnest || '' FROM unnest((SELECT array_agg(n) FROM pg_namespace n))) \
         FROM (SELECT note AS unnest FROM records) o",
        Rule::ColumnNameUncertain,
    );
}

#[test]
fn certain_names_and_unprotected_candidates_still_resolve() {
    // Aliases, alias lists and bare columns are certain.
    assert_eq!(
        plan("SELECT n, ward FROM (SELECT id + 1 AS n, ward FROM records) s"),
        [None, None]
    );
    refused(
        "SELECT n, note || '' FROM (SELECT id + 1 AS n, note FROM records) s",
        Rule::ProtectedInExpression,
    );
    assert_eq!(
        plan("SELECT l FROM (SELECT lower(ward) FROM records) s(l)"),
        [None]
    );
    // Every column the server could bind these to is unprotected.
    ok("SELECT count FROM (SELECT count(*) FROM records) s");
    ok("SELECT r.id, (SELECT ward FROM (SELECT lower('x')) s) FROM records r");
    ok("SELECT u FROM unnest(ARRAY[1, 2]) u");
    // A sort key naming an output column PostgreSQL names by a guess.
    ok("SELECT ward, count(*) FROM records GROUP BY ward ORDER BY count DESC");
    ok("SELECT lower(ward) FROM records UNION SELECT name FROM wards ORDER BY lower");
    refused(
        "SELECT count(*) FROM records GROUP BY ward ORDER BY note",
        Rule::ProtectedInOrderBy,
    );
    // SELECT * stays positional.
    assert_eq!(
        plan("SELECT * FROM (SELECT lower(ward), id FROM records) s"),
        [None, None]
    );
    let r = refused(
        "SELECT * FROM (SELECT lower(ward), note FROM records) s",
        Rule::ProtectedWithBuffering,
    );
    assert!(r.to_string().contains("public.records.note"), "{r}");
}

#[test]
fn group_by_prefers_local_inputs_then_output_names_then_outer_columns() {
    // name is no column of records: PostgreSQL groups by the output
    // column name (the note), not by the lateral w.name.
    refused(
        "SELECT s.* FROM wards w, LATERAL (SELECT note AS name, count(*) FROM records GROUP BY name) s",
        Rule::ProtectedInGroupBy,
    );
    ok("SELECT s.* FROM wards w, LATERAL (SELECT ward AS name, count(*) FROM records GROUP BY name) s");
}

#[test]
fn show_returns_one_column() {
    assert_eq!(
        ok("SHOW search_path").statements[0].output,
        [OutputColumn::Plain]
    );
}
