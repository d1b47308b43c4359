//! One test per refusal rule, and the message of each names what it
//! refused without quoting literals.

use super::*;

#[test]
fn parse_error_hides_the_token() {
    let r = refused("SELECT 'secret value' FROM WHERE", Rule::ParseError);
    assert!(!r.message.contains("secret"), "{r}");
    refused("SELECT 'unterminated", Rule::ParseError);
}

#[test]
fn statement_kinds() {
    for sql in [
        "INSERT INTO records (id) VALUES (1)",
        "UPDATE records SET ward = 'x'",
        "DELETE FROM records",
        "MERGE INTO records r USING patients p ON r.id = p.id WHEN MATCHED THEN DELETE",
        "COPY records TO STDOUT",
        "DO $$ BEGIN PERFORM 1; END $$",
        "CALL archive()",
        "CREATE TABLE t (a int)",
        "DROP TABLE records",
        "ALTER TABLE records ADD COLUMN x int",
        "CREATE TABLE t AS SELECT note FROM records",
        "SELECT note INTO t FROM records",
        "EXPLAIN SELECT note FROM records",
        "EXPLAIN ANALYZE SELECT count(*) FROM records",
        "LISTEN c",
        "NOTIFY c, 'x'",
        "UNLISTEN *",
        "VACUUM records",
        "ANALYZE records",
        "TRUNCATE records",
        "LOCK records",
        "GRANT SELECT ON records TO public",
        "PREPARE TRANSACTION 'x'",
        "PREPARE p AS DELETE FROM records",
        "WITH d AS (DELETE FROM records RETURNING note) SELECT * FROM d",
        "SET CONSTRAINTS ALL DEFERRED",
        "LOAD 'x'",
        "CHECKPOINT",
        "REFRESH MATERIALIZED VIEW records_mv",
        "SECURITY LABEL ON TABLE records IS 'x'",
    ] {
        let r = refused(sql, Rule::StatementKind);
        assert!(!r.message.contains('\''), "{r}");
    }
    let r = refused("SELECT 1; DELETE FROM records", Rule::StatementKind);
    assert_eq!(r.statement, 1);
    assert!(r.message.contains("DELETE"), "{r}");
}

#[test]
fn row_locking() {
    refused("SELECT note FROM records FOR UPDATE", Rule::RowLocking);
    refused(
        "SELECT id FROM records FOR SHARE SKIP LOCKED",
        Rule::RowLocking,
    );
}

#[test]
fn constructs_outside_the_subset() {
    refused(
        "SELECT note FROM records TABLESAMPLE SYSTEM (10)",
        Rule::ConstructNotAllowed,
    );
    refused(
        "DECLARE c BINARY CURSOR FOR SELECT id FROM records",
        Rule::ConstructNotAllowed,
    );
    refused(
        "SELECT xmlelement(name a, ward) FROM records",
        Rule::ConstructNotAllowed,
    );
    refused(
        "SELECT * FROM XMLTABLE('/a' PASSING '<a/>' COLUMNS x int)",
        Rule::ConstructNotAllowed,
    );
}

#[test]
fn relations() {
    refused("SELECT * FROM nowhere", Rule::RelationUnresolved);
    refused(
        "SELECT * FROM otherdb.public.records",
        Rule::RelationUnresolved,
    );
    refused("SELECT * FROM analytics.records", Rule::RelationUnresolved);
    let r = refused("SELECT * FROM records_view", Rule::RelationKind);
    assert!(r.message.contains("public.records_view"), "{r}");
    refused("SELECT * FROM records_mv", Rule::RelationKind);
    refused("SELECT last_value FROM records_id_seq", Rule::RelationKind);
    refused(
        "SELECT chunk_data FROM pg_toast.pg_toast_16384",
        Rule::RelationKind,
    );
    refused("SELECT * FROM pg_stats", Rule::CatalogRelation);
    refused(
        "SELECT * FROM pg_catalog.pg_statistic",
        Rule::CatalogRelation,
    );
    refused("SELECT setting FROM pg_settings", Rule::CatalogRelation);
    refused("SELECT id FROM renamed", Rule::PolicyMismatch);
}

#[test]
fn columns() {
    refused("SELECT nothing FROM records", Rule::ColumnUnresolved);
    refused("SELECT x.id FROM records", Rule::ColumnUnresolved);
    let r = refused(
        "SELECT id FROM records r JOIN patients p ON p.id = r.patient_id",
        Rule::ColumnAmbiguous,
    );
    assert!(r.message.contains("id"), "{r}");
    refused(
        "SELECT note FROM records a, records b",
        Rule::ColumnAmbiguous,
    );
}

#[test]
fn protected_columns_by_clause() {
    for (sql, rule) in [
        ("SELECT lower(note) FROM records", Rule::ProtectedInExpression),
        ("SELECT id FROM records WHERE note = 'a'", Rule::ProtectedInWhere),
        (
            "SELECT ward FROM records GROUP BY ward HAVING max(length(ward)) > 1 AND min(note) > 'a'",
            Rule::ProtectedInAggregate,
        ),
        (
            "SELECT ward FROM records GROUP BY ward, note HAVING note > 'a'",
            Rule::ProtectedInGroupBy,
        ),
        (
            "SELECT r.id FROM records r JOIN records s ON r.note = s.note",
            Rule::ProtectedInJoin,
        ),
        ("SELECT * FROM records r JOIN records s USING (note)", Rule::ProtectedInJoin),
        ("SELECT * FROM records NATURAL JOIN records_2024", Rule::ProtectedInJoin),
        ("SELECT note FROM records GROUP BY note", Rule::ProtectedInGroupBy),
        ("SELECT id FROM records ORDER BY note", Rule::ProtectedInOrderBy),
        ("SELECT DISTINCT note FROM records", Rule::ProtectedInDistinct),
        ("SELECT DISTINCT ON (note) id FROM records", Rule::ProtectedInDistinct),
        (
            "SELECT row_number() OVER (PARTITION BY note) FROM records",
            Rule::ProtectedInWindow,
        ),
        ("SELECT lag(note) OVER (ORDER BY id) FROM records", Rule::ProtectedInWindow),
        ("SELECT count(note) FROM records", Rule::ProtectedInAggregate),
        ("SELECT count(DISTINCT note) FROM records", Rule::ProtectedInAggregate),
        (
            "SELECT count(*) FILTER (WHERE note > 'm') FROM records",
            Rule::ProtectedInAggregate,
        ),
        ("SELECT id FROM records LIMIT (SELECT 1 FROM records r WHERE r.note > 'm')", Rule::ProtectedInWhere),
        ("SELECT (SELECT note FROM records LIMIT 1)", Rule::ProtectedInSubquery),
        ("SELECT id FROM records UNION ALL SELECT note FROM records", Rule::ProtectedInSetOperation),
        ("VALUES ((SELECT note FROM records LIMIT 1))", Rule::ProtectedInSubquery),
        (
            "SELECT * FROM records r, generate_series(1, length(r.note)) g",
            Rule::ProtectedInValues,
        ),
    ] {
        let r = refused(sql, rule);
        assert!(r.message.contains("public.records.note"), "{r}");
        assert!(!r.message.contains('\''), "{r}");
    }
}

#[test]
fn protected_in_limit() {
    refused(
        "SELECT id FROM (SELECT id, note FROM records) s LIMIT length(s.note)",
        Rule::ProtectedInLimit,
    );
}

#[test]
fn whole_row_references() {
    refused("SELECT r FROM records r", Rule::WholeRowReference);
    refused(
        "SELECT array_agg(r) FROM records r",
        Rule::WholeRowReference,
    );
    refused("SELECT count(r.*) FROM records r", Rule::WholeRowReference);
    refused(
        "SELECT id FROM records r WHERE r.* IS NOT NULL",
        Rule::WholeRowReference,
    );
    refused(
        "SELECT id FROM records r WHERE r IS NOT NULL",
        Rule::WholeRowReference,
    );
    // A row of unprotected columns is fine.
    ok("SELECT w FROM wards w");
}

#[test]
fn functions() {
    let r = refused(
        "SELECT public.leak(ward) FROM records",
        Rule::FunctionNotAllowed,
    );
    assert!(r.message.contains("public.leak"), "{r}");
    refused("SELECT leak('x')", Rule::FunctionNotAllowed);
    refused("SELECT pure_leak('x')", Rule::FunctionNotAllowed);
    refused("SELECT random()", Rule::FunctionNotAllowed);
    refused("SELECT pg_sleep(1)", Rule::FunctionNotAllowed);
    refused(
        "SELECT current_setting('dptext.key')",
        Rule::FunctionNotAllowed,
    );
    refused(
        "SELECT pg_read_file('/etc/passwd')",
        Rule::FunctionNotAllowed,
    );
    refused(
        "SELECT query_to_xml('select note from records', true, true, '')",
        Rule::FunctionNotAllowed,
    );
    refused("SELECT pg_stat_get_numscans(1)", Rule::FunctionNotAllowed);
    refused("SELECT no_such_function()", Rule::FunctionNotAllowed);
    refused("SELECT pg_catalog.archive()", Rule::FunctionNotAllowed);
    // tools.upper would be a candidate with tools on the path.
    let r = analyze_with(
        "SELECT upper(ward) FROM records",
        &["tools", "public"],
        &Session::new(),
    )
    .unwrap_err();
    assert_eq!(r.rule, Rule::FunctionNotAllowed, "{r}");
    assert!(r.message.contains("tools"), "{r}");
}

#[test]
fn functions_in_from() {
    refused("SELECT * FROM jsonb_each('{}')", Rule::FunctionInFrom);
    refused("SELECT * FROM ROWS FROM (leak('x'))", Rule::FunctionInFrom);
    refused(
        "SELECT * FROM unnest(ARRAY[1], ARRAY[2])",
        Rule::FunctionInFrom,
    );
    refused(
        "SELECT * FROM generate_series(1, 2) AS g(a int)",
        Rule::FunctionInFrom,
    );
}

#[test]
fn operators() {
    refused(
        "SELECT id FROM records WHERE ward === 'x'",
        Rule::OperatorNotAllowed,
    );
    refused("SELECT 1 <-> 2", Rule::OperatorNotAllowed);
    refused(
        "SELECT id FROM records WHERE ward OPERATOR(public.=) 'x'",
        Rule::OperatorNotAllowed,
    );
    let r = analyze_with(
        "SELECT id FROM records WHERE id = 1",
        &["tools", "public"],
        &Session::new(),
    )
    .unwrap_err();
    assert_eq!(r.rule, Rule::OperatorNotAllowed, "{r}");
}

#[test]
fn types() {
    refused("SELECT 'happy'::mood", Rule::TypeNotAllowed);
    refused("SELECT 'x'::public.text", Rule::TypeNotAllowed);
    let r = analyze_with("SELECT 'x'::text", &["tools", "public"], &Session::new()).unwrap_err();
    assert_eq!(r.rule, Rule::TypeNotAllowed, "{r}");
    refused("PREPARE p(mood) AS SELECT $1", Rule::TypeNotAllowed);
}

#[test]
fn settings() {
    refused("SET dptext.key_file = '/x'", Rule::SettingNotAllowed);
    refused("SET DPTEXT.key = 'k'", Rule::SettingNotAllowed);
    refused("SHOW dptext.key", Rule::SettingNotAllowed);
    // SHOW reads an allow-list: not a custom setting (colluding code can
    // set_config one to any text), not SHOW ALL, not other settings.
    for sql in [
        "SHOW atkp.leak",
        "SHOW \"atkp.leak\"",
        "SHOW ALL",
        "SHOW work_mem",
        "SHOW SESSION AUTHORIZATION",
        "SHOW data_directory",
    ] {
        refused(sql, Rule::SettingNotAllowed);
    }
    assert!(refused("SHOW ALL", Rule::SettingNotAllowed)
        .message
        .starts_with("SHOW ALL may not be shown"));
    refused(
        "SET LOCAL search_path = evil, public",
        Rule::SettingNotAllowed,
    );
    refused("SET search_path = 1", Rule::SettingNotAllowed);
    refused("SET search_path FROM CURRENT", Rule::ConstructNotAllowed);
    refused("SET ROLE postgres", Rule::SettingNotAllowed);
    refused(
        "SET SESSION AUTHORIZATION postgres",
        Rule::SettingNotAllowed,
    );
    refused(
        "SET standard_conforming_strings = off",
        Rule::SettingNotAllowed,
    );
    refused("SET client_encoding = 'SJIS'", Rule::SettingNotAllowed);
    refused("SET NAMES 'GBK'", Rule::SettingNotAllowed);
}

#[test]
fn codes_are_stable_and_messages_name_the_rule() {
    let r = refused(
        "SELECT lower(note) FROM records",
        Rule::ProtectedInExpression,
    );
    assert_eq!(r.rule.code(), "protected_in_expression");
    assert_eq!(r.rule.sqlstate(), "42501");
    assert!(r
        .to_string()
        .starts_with("dptext-proxy: statement refused (protected_in_expression): "));
    assert_eq!(Rule::ParseError.sqlstate(), "42601");
}

/// A row's `ctid` is its page and slot, and how many rows fit on a page
/// depends on the lengths of their values: in a table with protected
/// columns it would tell which rows' values are long (`SELECT id, ctid`)
/// and the page count that `relation_size` withholds (`max(ctid)`).
/// Refused in every position; allowed where nothing is protected.
#[test]
fn row_locations_of_tables_with_protected_columns() {
    for sql in [
        "SELECT id, ctid FROM records",
        "SELECT r.ctid FROM records r",
        "SELECT public.records.ctid FROM records",
        "SELECT max(ctid) FROM records",
        "SELECT id FROM records ORDER BY ctid",
        "SELECT id FROM records WHERE ctid > '(1,0)'",
        "SELECT count(*) FROM records GROUP BY ctid",
        "SELECT id FROM records_2024 WHERE ctid IS NOT NULL",
        "SELECT p.id FROM patients p WHERE EXISTS (SELECT 1 FROM records r WHERE r.ctid IS NULL)",
        "SELECT x FROM (SELECT ctid AS x FROM records) s",
    ] {
        let r = refused(sql, Rule::RowLocation);
        assert!(
            r.message.contains(".ctid is where the row is stored"),
            "{r}"
        );
    }
    // A table without protected columns, and the other system columns.
    ok("SELECT p.ctid, r.id FROM patients p JOIN records r ON r.id = p.id");
    ok("SELECT tableoid FROM records");
}

/// The transaction columns of any table, protected columns or not, in any
/// clause: an owner's rolled-back row lock leaves its transaction's ID in
/// `xmax` of the rows it chose. Catalogs keep theirs (clients read them).
#[test]
fn transaction_columns_of_tables() {
    for sql in [
        "SELECT xmin FROM records",
        "SELECT id, xmax FROM patients",
        "SELECT cmin, cmax FROM records",
        "SELECT r.id FROM records r WHERE r.xmax::text <> '0'",
        "SELECT (SELECT count(*) FROM records r WHERE r.xmax::text <> '0')",
        "SELECT x FROM (SELECT xmax AS x FROM records) s",
        "WITH c AS (SELECT xmax AS x FROM patients) SELECT x FROM c",
        "SELECT p.xmin FROM patients p JOIN records r ON r.id = p.id",
        "SELECT max(xmax::text) FROM records",
    ] {
        let r = refused(sql, Rule::TransactionColumn);
        assert!(r.message.contains("names the transaction"), "{r}");
    }
    ok("SELECT c.xmin, c.relname FROM pg_catalog.pg_class c");
}

/// A protected column output twice (by name, alias or `*`) is refused:
/// the server would build every raw copy into each row.
#[test]
fn a_protected_column_is_output_once() {
    for sql in [
        "SELECT note, note FROM records",
        "SELECT note AS a, r.note AS b FROM records r",
        "SELECT *, note FROM records",
        "DECLARE c CURSOR FOR SELECT note, note FROM records",
    ] {
        refused(sql, Rule::ProtectedRepeated);
    }
    ok("SELECT note, ward, ward FROM records");
}

/// A BI tool's filter, sort or grouping on a protected column is refused
/// with what to do instead, never with the compared value.
#[test]
fn refusals_of_filters_on_protected_columns_say_what_to_do_instead() {
    for (sql, rule) in [
        (
            "SELECT id FROM records WHERE note = 'Jane Doe'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records ORDER BY note",
            Rule::ProtectedInOrderBy,
        ),
        (
            "SELECT count(*) FROM records GROUP BY note",
            Rule::ProtectedInGroupBy,
        ),
    ] {
        let r = refused(sql, rule);
        let m = r.to_string();
        assert!(
            m.contains("unprotected column") && m.contains("dptext.create_sanitized_view"),
            "{m}"
        );
        assert!(!m.contains("Jane Doe"), "{m}");
    }
    let m = refused(
        "SELECT upper(note) FROM records",
        Rule::ProtectedInExpression,
    )
    .to_string();
    assert!(m.contains("compute on what comes back"), "{m}");
}

/// Attribute notation: `(x).f` is the call `f(x)` when `x` has no field
/// `f`. It never reaches the function checks, so it is refused for any
/// function name, and a field selection is allowed only of a call's
/// composite result (`(information_schema._pg_expandarray(...)).n`).
#[test]
fn attribute_notation_calls_are_refused() {
    for sql in [
        "SELECT ('my.secret'::text).current_setting",
        "SELECT ('dptext.key_file').current_setting",
        "SELECT ($1::text).current_setting",
        "SELECT ((('SELECT to_tsvector(''simple'', note) FROM public.records')::text).ts_stat).word",
        "SELECT ('public.records'::regclass).pg_relation_size",
        "SELECT (1::float8).pg_sleep",
        "SELECT (r.ward).leak FROM records r",
        "SELECT (r.ward).lower FROM records r",
        "SELECT ('x'::text).unknown_function_made_later",
    ] {
        refused(sql, Rule::FunctionNotAllowed);
    }
}
