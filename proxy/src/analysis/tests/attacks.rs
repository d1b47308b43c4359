//! A reviewer's attempts to learn something about a protected value
//! other than its sanitized form.

use super::*;

#[test]
fn every_attack_is_refused() {
    for (sql, rule) in [
        (
            "SELECT note FROM records ORDER BY 1",
            Rule::ProtectedInOrderBy,
        ),
        (
            "SELECT note AS n FROM records ORDER BY n",
            Rule::ProtectedInOrderBy,
        ),
        (
            "SELECT note FROM records ORDER BY note DESC",
            Rule::ProtectedInOrderBy,
        ),
        (
            "SELECT id, note FROM records GROUP BY 2, 1",
            Rule::ProtectedInGroupBy,
        ),
        (
            "SELECT length(note) FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT note::bytea FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT CAST(note AS int) FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT note COLLATE \"C\" FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT coalesce(note, 'x') FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT CASE WHEN note > 'm' THEN 1 END FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT note || '' FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT (note) IS NULL FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT ARRAY[note] FROM records",
            Rule::ProtectedInExpression,
        ),
        ("SELECT ROW(note) FROM records", Rule::ProtectedInExpression),
        ("SELECT md5(note) FROM records", Rule::ProtectedInExpression),
        (
            "SELECT substring(note FROM 1 FOR 1) FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT * FROM records WHERE note LIKE 'A%'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT count(*) FROM records WHERE note > 'M'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE note IS NULL",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE note ~ '^a'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE note SIMILAR TO 'a%'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE note BETWEEN 'a' AND 'b'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE note IN ('a', 'b')",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE (id, note) = (1, 'a')",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT DISTINCT note FROM records",
            Rule::ProtectedInDistinct,
        ),
        (
            "SELECT DISTINCT id, note FROM records",
            Rule::ProtectedInDistinct,
        ),
        (
            "SELECT note FROM records GROUP BY note",
            Rule::ProtectedInGroupBy,
        ),
        (
            "SELECT (SELECT note FROM records LIMIT 1)",
            Rule::ProtectedInSubquery,
        ),
        (
            "SELECT ARRAY(SELECT note FROM records)",
            Rule::ProtectedInSubquery,
        ),
        (
            "SELECT 'a' = ANY (SELECT note FROM records)",
            Rule::ProtectedInSubquery,
        ),
        ("SELECT r FROM records r", Rule::WholeRowReference),
        // row_to_json is STABLE: refused as a function before its argument.
        (
            "SELECT row_to_json(r) FROM records r",
            Rule::FunctionNotAllowed,
        ),
        (
            "SELECT array_agg(r) FROM records r",
            Rule::WholeRowReference,
        ),
        ("SELECT (r).note FROM records r", Rule::WholeRowReference),
        (
            "SELECT note FROM records UNION SELECT note FROM records",
            Rule::ProtectedInSetOperation,
        ),
        (
            "SELECT note FROM records INTERSECT SELECT 'x'",
            Rule::ProtectedInSetOperation,
        ),
        (
            "WITH x AS (SELECT note FROM records) SELECT count(*) FROM x WHERE note = 'a'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT n FROM (SELECT note AS n FROM records) s WHERE n LIKE 'a%'",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT b FROM (SELECT * FROM records) s(a, p, b, w) ORDER BY b",
            Rule::ProtectedInOrderBy,
        ),
        (
            "SELECT * FROM records r JOIN records s ON r.note = s.note",
            Rule::ProtectedInJoin,
        ),
        (
            "SELECT note FROM records LIMIT (SELECT length(note) FROM records LIMIT 1)",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT public.leak(note) FROM records",
            Rule::FunctionNotAllowed,
        ),
        (
            "SELECT lower(note) FROM records",
            Rule::ProtectedInExpression,
        ),
        (
            "SELECT string_agg(note, ',') FROM records",
            Rule::ProtectedInAggregate,
        ),
        (
            "SELECT array_agg(id ORDER BY note) FROM records",
            Rule::ProtectedInAggregate,
        ),
        ("SELECT note FROM records FOR UPDATE", Rule::RowLocking),
        ("SELECT * FROM pg_stats", Rule::CatalogRelation),
        (
            "SELECT most_common_vals FROM pg_catalog.pg_stats",
            Rule::CatalogRelation,
        ),
        (
            "EXPLAIN SELECT note FROM records WHERE note = 'a'",
            Rule::StatementKind,
        ),
        ("COPY records TO STDOUT", Rule::StatementKind),
        (
            "COPY (SELECT note FROM records) TO STDOUT",
            Rule::StatementKind,
        ),
        ("SELECT 1; DELETE FROM records", Rule::StatementKind),
        ("SET dptext.key_file = '/x'", Rule::SettingNotAllowed),
        ("DO $$ BEGIN RAISE NOTICE 'x'; END $$", Rule::StatementKind),
        ("LISTEN x", Rule::StatementKind),
        (
            "SELECT pg_notify('c', note) FROM records",
            Rule::FunctionNotAllowed,
        ),
        (
            "SELECT set_config('a', note, false) FROM records",
            Rule::FunctionNotAllowed,
        ),
        (
            "SELECT * FROM records WHERE id = 1 AND (SELECT note FROM records WHERE id = 2) = 'x'",
            Rule::ProtectedInSubquery,
        ),
        (
            "SELECT note FROM records WHERE id IN (SELECT id FROM records WHERE note LIKE 'a%')",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE EXISTS (SELECT 1 FROM records s WHERE s.note = 'a')",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT (SELECT 1 FROM patients p WHERE p.name = r.note) FROM records r",
            Rule::ProtectedInWhere,
        ),
        (
            "SELECT id FROM records WHERE EXISTS (SELECT pg_column_size(note))",
            Rule::FunctionNotAllowed,
        ),
        (
            "SELECT * FROM records NATURAL JOIN records_2024",
            Rule::ProtectedInJoin,
        ),
        (
            "SELECT sum(length(n)) FROM (SELECT note n FROM records) s",
            Rule::ProtectedInAggregate,
        ),
        (
            "SELECT note FROM records WINDOW w AS (ORDER BY note)",
            Rule::ProtectedInWindow,
        ),
        (
            "SELECT id FROM records r ORDER BY r.note > 'm'",
            Rule::ProtectedInOrderBy,
        ),
    ] {
        let r = match check(sql) {
            Ok(a) => panic!("allowed: {sql}\n  {a:?}"),
            Err(r) => r,
        };
        assert_eq!(r.rule, rule, "{sql}\n  {r}");
    }
}

#[test]
fn a_cte_named_like_a_table_is_the_cte() {
    // The CTE shadows public.records: its note is a plain value here...
    assert_eq!(
        plan("WITH records AS (SELECT 'x' AS note) SELECT note FROM records"),
        [None]
    );
    // ...and carries the protection when it reads the table.
    refused(
        "WITH records AS (SELECT note FROM public.records) \
         SELECT note FROM records WHERE note > 'a'",
        Rule::ProtectedInWhere,
    );
    // A qualified name is the table (which outputs its protected column,
    // refused beside a WITH).
    let r = refused(
        "WITH records AS (SELECT 1 AS id) SELECT note FROM public.records",
        Rule::ProtectedWithBuffering,
    );
    assert!(r.to_string().contains("public.records.note"), "{r}");
}

#[test]
fn a_subquery_alias_hides_the_relation_name() {
    refused(
        "SELECT records.note FROM (SELECT id FROM records) AS r",
        Rule::ColumnUnresolved,
    );
}

#[test]
fn correlated_outer_references_keep_their_protection() {
    refused(
        "SELECT id FROM records r WHERE EXISTS (SELECT 1 WHERE r.note LIKE 'a%')",
        Rule::ProtectedInWhere,
    );
    refused(
        "SELECT id FROM records r, LATERAL (SELECT length(r.note) AS l) x",
        Rule::ProtectedInExpression,
    );
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let sql = format!("SELECT {}1{}", "1 + (".repeat(5000), ")".repeat(5000));
    let r = check(&sql).unwrap_err();
    assert!(matches!(r.rule, Rule::TooComplex | Rule::ParseError), "{r}");
}

#[test]
fn output_names_and_input_names_follow_postgres_precedence() {
    // ORDER BY prefers an output name, GROUP BY an input column.
    ok("SELECT id AS note FROM records ORDER BY note");
    refused(
        "SELECT id AS note FROM records GROUP BY note",
        Rule::ProtectedInGroupBy,
    );
    refused(
        "SELECT note AS id FROM records ORDER BY id",
        Rule::ProtectedInOrderBy,
    );
    refused(
        "SELECT note FROM records GROUP BY id",
        Rule::ProtectedWithBuffering,
    );
    ok("SELECT r.id FROM records r JOIN patients p ON p.id = r.id ORDER BY id");
}

#[test]
fn recursive_ctes() {
    assert_eq!(
        plan("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT n FROM t"),
        [None]
    );
    refused(
        "WITH RECURSIVE t(n) AS (SELECT note FROM records UNION ALL SELECT n FROM t) SELECT n FROM t",
        Rule::ProtectedInSetOperation,
    );
}

#[test]
fn lateral_functions_over_unprotected_columns() {
    assert_eq!(
        plan("SELECT r.id, g FROM records r JOIN LATERAL generate_series(1, r.id) g ON true"),
        [None, None]
    );
    refused(
        "SELECT note, g FROM records r JOIN LATERAL generate_series(1, r.id) g ON true",
        Rule::ProtectedWithBuffering,
    );
}

/// A value whose type a role other than a superuser owns may carry a
/// cast that role creates at any time (implicit or not), and a cast or a
/// function call on it would run that role's function with the session's
/// raw reads: such values are output bare only, and relayed as they are.
#[test]
fn values_of_other_roles_types_are_output_only() {
    assert_eq!(
        plan("SELECT status, id FROM tagged"),
        [Some("opaque public.tagged.status".into()), None]
    );
    // Its row holds an opaque column: refused whole, as one holding a
    // protected column is.
    refused("SELECT t FROM tagged t", Rule::WholeRowReference);
    ok("SELECT t.*, id FROM tagged t WHERE id > 1 ORDER BY id");
    for sql in [
        "SELECT status::text FROM tagged",
        "SELECT lower(status) FROM tagged",
        "SELECT id FROM tagged WHERE status = 'a'",
        "SELECT id FROM tagged ORDER BY status",
        "SELECT status FROM tagged GROUP BY status",
        "SELECT x FROM (SELECT status AS x FROM tagged) s WHERE x::text <> ''",
        "SELECT status FROM tagged UNION ALL SELECT status FROM tagged",
    ] {
        refused(sql, Rule::TypeNotAllowed);
    }
}

/// The row type of a table another role owns is that role's type too.
#[test]
fn row_types_of_other_roles_tables_are_output_only() {
    let mut c = catalog();
    let mut owned = super::rel("public", "owned", RelationKind::Table, &["id", "x"]);
    owned.opaque_row = Some("public.owned".into());
    c.add_relation(owned);
    let policy = policy();
    let cache = ParseCache::default();
    let path = ["public".to_owned()];
    let ctx = Context {
        catalog: &c,
        policy: &policy,
        search_path: &path,
        user: "analyst",
        cache: &cache,
    };
    let session = Session::new();
    let a = analyze("SELECT o FROM owned o", &ctx, &session).expect("bare row output");
    assert!(a.statements[0].output[0].is_restricted());
    assert!(!a.statements[0].output[0].is_protected());
    for sql in [
        "SELECT o::text FROM owned o",
        "SELECT count(o.*) FROM owned o",
        "SELECT lower(o) FROM owned o",
        "SELECT (SELECT o FROM owned o LIMIT 1)::text",
        "SELECT x::text FROM (SELECT o AS x FROM owned o) s",
    ] {
        let r = analyze(sql, &ctx, &session).expect_err(sql);
        assert_eq!(r.rule, Rule::TypeNotAllowed, "{sql}: {r}");
    }
}
