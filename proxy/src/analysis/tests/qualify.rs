//! Forwarding what was analysed: names qualified as the analysis
//! resolved them, and deparsed text that parses back to the same tree.

use super::*;

/// The text forwarded for `sql` (default path).
#[track_caller]
fn fwd(sql: &str) -> String {
    ok(sql).forward.to_string()
}

/// The text forwarded for `sql` with search path `path`.
#[track_caller]
fn fwd_path(sql: &str, path: &[&str]) -> String {
    match analyze_with(sql, path, &Session::new()) {
        Ok(a) => a.forward.to_string(),
        Err(r) => panic!("refused: {sql}\n  {r}"),
    }
}

#[test]
fn functions_types_and_relations_are_qualified() {
    assert_eq!(
        fwd("SELECT lower(ward), upper(ward) FROM records"),
        "SELECT pg_catalog.lower(ward), pg_catalog.upper(ward) FROM public.records"
    );
    assert_eq!(
        fwd("SELECT id::text, '1'::int4, 1::text FROM records"),
        "SELECT id::pg_catalog.text, '1'::int, 1::pg_catalog.text FROM public.records"
    );
    assert_eq!(
        fwd("SELECT count(*), sum(id) OVER (PARTITION BY ward ORDER BY id) FROM records"),
        "SELECT pg_catalog.count(*), pg_catalog.sum(id) OVER (PARTITION BY ward ORDER BY id) \
         FROM public.records"
    );
}

#[test]
fn operators_are_qualified_in_every_syntax() {
    assert_eq!(
        fwd(
            "SELECT r.id FROM records r JOIN patients p ON p.id = r.patient_id \
             WHERE r.ward LIKE 'a%' AND p.name ILIKE 'b' AND r.ward NOT LIKE 'c'"
        ),
        "SELECT r.id FROM public.records r JOIN public.patients p ON p.id OPERATOR(pg_catalog.=) \
         r.patient_id WHERE r.ward OPERATOR(pg_catalog.~~) 'a%' AND p.name \
         OPERATOR(pg_catalog.~~*) 'b' AND r.ward OPERATOR(pg_catalog.!~~) 'c'"
    );
    assert_eq!(
        fwd("SELECT id OPERATOR(pg_catalog.=) 1 FROM records"),
        "SELECT id OPERATOR(pg_catalog.=) 1 FROM public.records"
    );
    assert_eq!(
        fwd("SELECT id FROM records WHERE id IN (1, 2) AND patient_id NOT IN (3)"),
        "SELECT id FROM public.records WHERE id OPERATOR(pg_catalog.=) ANY(ARRAY[1, 2]) AND \
         patient_id OPERATOR(pg_catalog.<>) ALL(ARRAY[3])"
    );
    assert_eq!(
        fwd("SELECT id FROM records WHERE id IN (SELECT id FROM patients) ORDER BY id USING <"),
        "SELECT id FROM public.records WHERE id OPERATOR(pg_catalog.=) ANY (SELECT id FROM \
         public.patients) ORDER BY id USING OPERATOR(pg_catalog.<)"
    );
    assert_eq!(
        fwd("SELECT id FROM records WHERE ward SIMILAR TO 'a%'"),
        "SELECT id FROM public.records WHERE ward OPERATOR(pg_catalog.~) \
         pg_catalog.similar_to_escape('a%')"
    );
}

#[test]
fn between_case_distinct_and_nullif_are_spelled_out() {
    assert_eq!(
        fwd("SELECT id FROM records WHERE id BETWEEN 1 AND 2 AND patient_id = 3"),
        "SELECT id FROM public.records WHERE id OPERATOR(pg_catalog.>=) 1 AND id \
         OPERATOR(pg_catalog.<=) 2 AND patient_id OPERATOR(pg_catalog.=) 3"
    );
    assert_eq!(
        fwd("SELECT id FROM records WHERE id NOT BETWEEN SYMMETRIC 1 AND 2"),
        "SELECT id FROM public.records WHERE (id OPERATOR(pg_catalog.<) 1 OR id \
         OPERATOR(pg_catalog.>) 2) AND (id OPERATOR(pg_catalog.<) 2 OR id OPERATOR(pg_catalog.>) 1)"
    );
    assert_eq!(
        fwd("SELECT CASE id WHEN 1 THEN 'a' ELSE 'b' END FROM records"),
        "SELECT CASE WHEN id OPERATOR(pg_catalog.=) 1 THEN 'a' ELSE 'b' END FROM public.records"
    );
    // The output names stay PostgreSQL's: `?column?` and `nullif`.
    assert_eq!(
        fwd(
            "SELECT id IS DISTINCT FROM patient_id, nullif(id, 2), id IS NOT DISTINCT FROM 3 \
             FROM records"
        ),
        "SELECT CASE WHEN id IS NULL THEN patient_id IS NOT NULL WHEN patient_id IS NULL THEN \
         true ELSE NOT id OPERATOR(pg_catalog.=) patient_id END AS \"?column?\", CASE WHEN id \
         OPERATOR(pg_catalog.=) 2 THEN NULL ELSE id END AS \"nullif\", CASE WHEN id IS NULL THEN \
         3 IS NULL WHEN 3 IS NULL THEN false ELSE id OPERATOR(pg_catalog.=) 3 END AS \"?column?\" \
         FROM public.records"
    );
    // An alias the client gave stays.
    assert!(fwd("SELECT nullif(id, 2) AS n FROM records").contains("END AS n FROM"));
    let r = refused(
        "SELECT id FROM records WHERE (id, patient_id) IN ((1, 2))",
        Rule::QualificationFailed,
    );
    assert!(r.message.contains("row"), "{r}");
}

#[test]
fn cte_names_aliases_and_stars_are_not_qualified() {
    assert_eq!(
        fwd("WITH x AS (SELECT id, ward FROM records) \
             SELECT x.ward, n FROM x, (SELECT name AS n FROM patients) s"),
        "WITH x AS (SELECT id, ward FROM public.records) SELECT x.ward, n FROM x, \
         (SELECT name AS n FROM public.patients) s"
    );
    assert_eq!(
        fwd("SELECT r.id FROM records AS r WHERE EXISTS (SELECT 1 FROM wards w WHERE w.id = r.id)"),
        "SELECT r.id FROM public.records r WHERE EXISTS (SELECT 1 FROM public.wards w WHERE w.id \
         OPERATOR(pg_catalog.=) r.id)"
    );
}

#[test]
fn the_schema_is_the_one_the_search_path_resolved() {
    // `pg_catalog` first, then the path in order.
    assert_eq!(
        fwd_path("SELECT relname FROM pg_class", &["public"]),
        "SELECT relname FROM pg_catalog.pg_class"
    );
    assert_eq!(
        fwd_path(
            "SELECT count(*) FROM records_safe",
            &["analytics", "public"]
        ),
        "SELECT pg_catalog.count(*) FROM analytics.records_safe"
    );
}

#[test]
fn text_without_names_and_session_statements_are_forwarded() {
    assert_eq!(fwd("SELECT 1"), "SELECT 1");
    assert_eq!(fwd("BEGIN"), "BEGIN");
    assert_eq!(
        fwd("SET statement_timeout = 5; SELECT id FROM records"),
        "SET statement_timeout TO 5; SELECT id FROM public.records"
    );
}

#[test]
fn shape_ignores_positions_only() {
    let a = pg_query::parse("SELECT  a FROM t WHERE x = 'location: 1'", 0).unwrap();
    let b = pg_query::parse("SELECT a FROM t  WHERE x = 'location: 1'", 0).unwrap();
    let c = pg_query::parse("SELECT a FROM t WHERE x = 'location: 2'", 0).unwrap();
    let s = |p: &pg_query::ParseResult| crate::analysis::qualify::shape(&p.protobuf.stmts[0].stmt);
    assert_eq!(s(&a), s(&b));
    assert_ne!(s(&a), s(&c));
}

/// The `=` that `USING` and `NATURAL` compare with is looked up by name
/// when the server runs the statement, and no SQL qualifies it: an
/// operator created in `public` during the session would run instead
/// (proxy/tests/proxy_mode_attacks.rs shows raw notes coming back). A
/// NATURAL join with no common column compares nothing.
#[test]
fn using_and_natural_joins_are_refused() {
    for sql in [
        "SELECT * FROM records r JOIN patients p USING (id)",
        "SELECT * FROM records JOIN (SELECT id, count(*) FROM records GROUP BY id) s USING (id)",
        "SELECT r.id FROM records r NATURAL JOIN (SELECT lower(ward) AS ward FROM records) s",
        "SELECT 1 FROM records r LEFT JOIN patients p USING (id, ward)",
    ] {
        refused(sql, Rule::ConstructNotAllowed);
    }
    ok("SELECT 1 FROM (SELECT 1 AS a) x NATURAL JOIN (SELECT 2 AS b) y");
}

/// `current_setting` of a bound parameter (SQLAlchemy binds the name) is
/// forwarded guarded: the server reads NULL for any name SHOW may not
/// read, whatever the client binds. Constants get the same guard.
#[test]
fn current_setting_is_forwarded_behind_the_shown_settings_guard() {
    for sql in [
        "SELECT current_setting($1)",
        "SELECT current_setting($1::VARCHAR) AS current_setting_1",
        "SELECT pg_catalog.current_setting($1, true)",
        "SELECT current_setting('default_table_access_method')",
    ] {
        let f = fwd(sql);
        assert!(
            f.contains("pg_catalog.current_setting(CASE WHEN pg_catalog.lower(")
                && f.contains("OPERATOR(pg_catalog.=) ANY(ARRAY['application_name'")
                && f.contains("'default_table_access_method'")
                && !f.contains("dptext"),
            "{sql}\n  {f}"
        );
    }
    // A parameter with a missing_ok that is not a constant stays refused.
    refused("SELECT current_setting($1, $2)", Rule::FunctionNotAllowed);
}
