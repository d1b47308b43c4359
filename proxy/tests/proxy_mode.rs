//! Proxy mode end to end, against the test server: a database without the
//! extension (rules from the configuration) and the test database (rules
//! from its dptext labels), a masked user whose upstream role is not
//! labelled, statements that must work, one statement per rule that must
//! be refused (with the rule named), sanitized and keyed outputs, scrubbed
//! errors, and the extended protocol through psycopg.
//!
//! Needs what the other proxy tests need (`DPTEXT_TEST_DB`, `PGHOST`,
//! `PGPORT`) and the assets (`DPTEXT_ASSETS`); skipped without the
//! database unless `DPTEXT_REQUIRE_PG=1`.

mod common;

use std::sync::OnceLock;

use common::*;

/// The proxy-mode proxy's port (one per test binary).
fn proxy_port(env: &Env) -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        direct(
            no_extension_db(),
            &format!(
                "DROP TABLE IF EXISTS pm_t, pm_visits, pm_parts, pm_late, pm_late_parts, pm_late_b CASCADE;
                 DROP SCHEMA IF EXISTS pm_other CASCADE;
                 CREATE TABLE pm_t (id int PRIMARY KEY, patient text, note text, ward text);
                 INSERT INTO pm_t VALUES
                   (1, '{m0}', 'Seen by {m0} on Monday.', 'north'),
                   (2, '{m1}', 'Called {m1} about results.', 'south'),
                   (3, '{m2}', 'Letter from {m2}.', 'north');
                 CREATE TABLE pm_visits (id int, pm_id int REFERENCES pm_t, at date);
                 INSERT INTO pm_visits VALUES (10, 1, '2026-01-02'), (11, 1, '2026-02-03'), (12, 3, '2026-03-04');
                 CREATE TABLE pm_parts (id int, ward text DEFAULT 'north') PARTITION BY LIST (ward);
                 CREATE TABLE pm_parts_north PARTITION OF pm_parts FOR VALUES IN ('north');
                 CREATE VIEW pm_wards AS SELECT id, ward FROM pm_t WHERE ward <> 'east';
                 CREATE STATISTICS pm_st (mcv) ON ward, patient FROM pm_t;
                 ANALYZE pm_t;
                 CREATE SCHEMA pm_other;
                 CREATE TABLE pm_other.pm_t (id int, secret text);
                 INSERT INTO pm_other.pm_t VALUES (1, 'Kept by {m0} in the other schema.');
                 GRANT USAGE ON SCHEMA pm_other TO proxy_unlabelled;
                 GRANT SELECT ON pm_t, pm_visits, pm_other.pm_t TO proxy_unlabelled;",
                m0 = MARKERS[0],
                m1 = MARKERS[1],
                m2 = MARKERS[2],
            ),
        );
        let config = format!(
            "listen = \"127.0.0.1:0\"\nkey = \"a proxy-mode test key, not secret\"\n{}\
             [[user]]\nname = \"pm\"\npassword = \"pm-pw\"\nmasked = true\n\
             upstream_user = \"proxy_unlabelled\"\nupstream_password = \"unlabelled-up-pw\"\n\
             [masking]\nmode = \"proxy\"\nbatch_rows = 2\n\
             [[rule]]\ntable = \"pm_t\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"public.pm_t\"\ncolumn = \"patient\"\n\
             rule = \"deidentify(whole => true, strategy => typed_placeholder)\"\n\
             [[rule]]\ntable = \"pm_other.pm_t\"\ncolumn = \"secret\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"pm_late\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n\
             [[rule]]\ntable = \"pm_late_parts\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n",
            upstream_toml(env, no_extension_db())
        );
        spawn_proxy(&config).0
    })
}

fn pm(env: &Env, sql: &str) -> String {
    let out = psql_cmd(proxy_port(env), no_extension_db(), "pm", "pm-pw")
        .args(["-c", sql])
        .output()
        .expect("psql");
    text(&out)
}

/// `sql` through the proxy-mode proxy: served without an error and
/// without a raw protected value; what came back.
fn served(env: &Env, sql: &str) -> String {
    let out = pm(env, sql);
    assert!(!out.contains("ERROR"), "{sql}\n{out}");
    assert_no_marker(sql, &out);
    out
}

/// `sql` through the proxy-mode proxy: refused by `rule`, without a raw
/// protected value in the answer.
fn refused_by(env: &Env, rule: &str, sql: &str) {
    assert_refused_by(rule, sql, &pm(env, sql));
}

#[test]
fn what_analysts_and_tools_send_works_and_protected_columns_come_back_sanitized() {
    let Some(env) = env() else { return };
    let works = [
        ("a count", "SELECT count(*) FROM pm_t", "3"),
        (
            "a filter on an unprotected column",
            "SELECT id FROM pm_t WHERE ward = 'north' ORDER BY id",
            "1\n3",
        ),
        (
            "a join on ids",
            "SELECT count(*) FROM pm_t t JOIN pm_visits v ON v.pm_id = t.id",
            "3",
        ),
        (
            "grouping on unprotected columns",
            "SELECT ward, count(*) FROM pm_t GROUP BY ward ORDER BY ward",
            "north|2\nsouth|1",
        ),
        ("a constant", "SELECT 1", "1"),
        ("SHOW", "SHOW transaction_isolation", "read committed"),
        (
            "SET of an allowed setting",
            "SET application_name = 'bi tool'",
            "SET",
        ),
        ("a transaction", "BEGIN; SELECT 2; COMMIT", "2"),
    ];
    for (what, sql, expect) in works {
        let out = pm(env, sql);
        assert!(out.contains(expect), "{what}: {sql}\n{out}");
        assert!(!out.contains("ERROR"), "{what}: {sql}\n{out}");
    }
    // Protected columns as plain output: sanitized, never raw.
    for sql in [
        "SELECT * FROM pm_t",
        "SELECT id, note AS n, patient FROM pm_t WHERE id > 0 LIMIT 10",
        "BEGIN; DECLARE c CURSOR FOR SELECT note FROM pm_t; FETCH 2 FROM c; COMMIT",
        "PREPARE p(int) AS SELECT note FROM pm_t WHERE id = $1; EXECUTE p(1)",
        // Ordered by its primary key: a total order, no ties to reorder.
        "SELECT * FROM pm_t ORDER BY id",
    ] {
        let out = served(env, sql);
        assert!(!out.trim().is_empty(), "{sql}: nothing came back");
    }
    // Only from a select the server holds no row of, or sorts by a unique
    // key: a sort with ties, a join, a derived table or a CTE would hold
    // raw values, whose size decides what a sort that spills or a row too
    // big returns.
    for sql in [
        "SELECT * FROM pm_t ORDER BY ward",
        "SELECT t.note FROM pm_t t JOIN pm_visits v ON v.pm_id = t.id",
        "WITH c AS (SELECT id, note FROM pm_t) SELECT note FROM c WHERE id > 1",
        "SELECT n FROM (SELECT note AS n FROM pm_t) s",
    ] {
        assert_refused_by("protected_with_buffering", sql, &pm(env, sql));
    }
    let names = pm(env, "SELECT patient FROM pm_t");
    assert!(names.contains("<PERSON>"), "{names}");
    // Keyed: the same answer in another session.
    let a = pm(env, "SELECT note FROM pm_t WHERE id = 1");
    let b = pm(env, "SELECT note FROM pm_t WHERE id = 1");
    assert_eq!(a, b);
    // The catalog as psql lists it.
    let dt = pm(env, "\\dt");
    assert!(dt.contains("pm_t"), "{dt}");
}

/// SQLAlchemy 2.1's table reflection (`Table(autoload_with=...)`, which
/// reads `current_setting('default_table_access_method')`) and pandas
/// `read_sql_table` work through proxy mode with the pinned client
/// versions, and give sanitized values.
#[test]
fn sqlalchemy_reflection_and_read_sql_table_work_in_proxy_mode() {
    let Some(env) = env() else { return };
    let port = proxy_port(env).to_string();
    let Some(out) = python_client(
        "reflect_client.py",
        &["pm", "pm-pw", "127.0.0.1", &port, no_extension_db(), "pm_t"],
    ) else {
        return;
    };
    assert!(
        out["sqlalchemy"]
            .as_str()
            .is_some_and(|v| v.starts_with("2.")),
        "{out}"
    );
    assert_eq!(
        out["columns"],
        serde_json::json!(["id", "patient", "note", "ward"])
    );
    assert_eq!(out["primary_key"], serde_json::json!(["id"]));
    let rows = out["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(rows[0]["ward"], "north");
    assert_no_marker("SQLAlchemy reflection in proxy mode", &out.to_string());
}

#[test]
fn every_rule_of_the_allow_list_refuses_with_its_name() {
    let Some(env) = env() else { return };
    let refused = [
        (
            "protected_in_where",
            "SELECT count(*) FROM pm_t WHERE note LIKE 'Seen%'",
        ),
        ("protected_in_expression", "SELECT length(note) FROM pm_t"),
        ("protected_in_expression", "SELECT upper(note) FROM pm_t"),
        ("protected_in_expression", "SELECT note::bytea FROM pm_t"),
        (
            "protected_in_join",
            "SELECT 1 FROM pm_t a JOIN pm_t b ON a.note = b.note",
        ),
        (
            "protected_in_group_by",
            "SELECT note FROM pm_t GROUP BY note",
        ),
        ("protected_in_order_by", "SELECT note FROM pm_t ORDER BY 1"),
        ("protected_in_distinct", "SELECT DISTINCT note FROM pm_t"),
        (
            "protected_in_aggregate",
            "SELECT string_agg(note, ',') FROM pm_t",
        ),
        (
            "protected_in_window",
            "SELECT first_value(note) OVER () FROM pm_t",
        ),
        (
            "protected_in_set_operation",
            "SELECT note FROM pm_t UNION ALL SELECT ward FROM pm_t",
        ),
        (
            "protected_in_subquery",
            "SELECT (SELECT note FROM pm_t LIMIT 1)",
        ),
        ("whole_row_reference", "SELECT t FROM pm_t t"),
        ("statement_kind", "DELETE FROM pm_t"),
        ("statement_kind", "COPY pm_t TO STDOUT"),
        ("statement_kind", "LISTEN x"),
        ("statement_kind", "EXPLAIN SELECT id FROM pm_t"),
        ("statement_kind", "DO $$BEGIN END$$"),
        ("row_locking", "SELECT id FROM pm_t FOR UPDATE"),
        ("relation_unresolved", "SELECT * FROM no_such_table"),
        (
            "function_not_allowed",
            "SELECT pg_notify('c', ward) FROM pm_t",
        ),
        (
            "function_not_allowed",
            "SELECT set_config('a', ward, false) FROM pm_t",
        ),
        ("setting_not_allowed", "SET LOCAL search_path = public"),
        ("catalog_relation", "SELECT * FROM pg_stats"),
        ("parse_error", "SELEC 1"),
    ];
    for (rule, sql) in refused {
        refused_by(env, rule, sql);
    }
    // A refusal in the middle of a multi-statement query refuses it whole,
    // and the session goes on.
    let out = pm(env, "SELECT 1; SELECT upper(note) FROM pm_t");
    assert!(out.contains("refused"), "{out}");
    assert!(!out.lines().any(|l| l.trim() == "1"), "{out}");
}

#[test]
fn server_errors_keep_only_severity_sqlstate_and_a_safe_message() {
    let Some(env) = env() else { return };
    // A cast error quotes the value it could not read.
    let out = pm(env, "SELECT ward::int FROM pm_t");
    assert!(out.contains("SQLSTATE 22P02"), "{out}");
    assert!(!out.contains("north"), "{out}");
    // Access errors keep their message (it names objects only).
    let out = pm(env, "SELECT * FROM pg_catalog.pg_authid");
    assert!(out.contains("ERROR"), "{out}");
}

#[test]
fn the_extended_protocol_is_analyzed_too() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    let conninfo = format!(
        "host=127.0.0.1 port={port} user=pm password=pm-pw dbname={}",
        no_extension_db()
    );
    let Some(out) = python_client("proxy_mode_client.py", &[&conninfo]) else {
        return;
    };
    let text = out.to_string();
    assert_no_marker("psycopg through proxy mode", &text);
    assert_eq!(out["ids"], serde_json::json!([[1], [3]]), "{text}");
    assert_eq!(out["rows"].as_array().map(Vec::len), Some(3), "{text}");
    assert_eq!(
        out["binary_rows"].as_array().map(Vec::len),
        Some(1),
        "{text}"
    );
    assert!(
        out["refused"]
            .as_str()
            .is_some_and(|s| s.contains("protected_in_where")),
        "{text}"
    );
    assert_eq!(out["after_refusal"], serde_json::json!([[1]]), "{text}");
    assert_eq!(out["repeat_equal"], serde_json::json!(true), "{text}");
}

#[test]
fn database_labels_protect_columns_in_proxy_mode_too() {
    let Some(env) = env() else { return };
    // The test database has the extension: its label on proxy_t.note
    // protects the column for a proxy-mode user whose role is unlabelled.
    let config = format!(
        "listen = \"127.0.0.1:0\"\nkey = \"a proxy-mode test key, not secret\"\n{}\
         [[user]]\nname = \"pm2\"\npassword = \"pm2-pw\"\nmasked = true\n\
         upstream_user = \"proxy_unlabelled\"\nupstream_password = \"unlabelled-up-pw\"\n\
         [masking]\nmode = \"proxy\"\n",
        upstream_toml(env, &env.db)
    );
    let (port, _) = spawn_proxy(&config);
    let run = |sql: &str| {
        text(
            &psql_cmd(port, &env.db, "pm2", "pm2-pw")
                .args(["-c", sql])
                .output()
                .expect("psql"),
        )
    };
    let out = run("SELECT id, note, code FROM proxy_t");
    assert!(out.contains("plain code one"), "{out}");
    assert_no_marker("a labelled column in proxy mode", &out);
    let out = run("SELECT id FROM proxy_t WHERE note LIKE 'Seen%'");
    assert!(
        out.contains("statement refused (protected_in_where)"),
        "{out}"
    );
}

#[test]
fn protocol_bookkeeping_follows_what_the_server_confirms() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    let conninfo = format!(
        "host=127.0.0.1 port={port} user=pm password=pm-pw dbname={}",
        no_extension_db()
    );
    let Some(out) = python_client("proxy_mode_protocol.py", &[&conninfo]) else {
        return;
    };
    let text = out.to_string();
    // Every note that came back is sanitized, whichever path asked for it.
    assert_no_marker("protocol-level attacks", &text);
    let values = out["values"].as_array().map(Vec::len).unwrap_or(0);
    assert!(
        values >= 9,
        "the attacks returned too little to prove anything: {text}"
    );
    assert!(
        text.contains("42P05"),
        "the duplicate Parse was not refused: {text}"
    );
    assert_eq!(out["closed"], serde_json::json!(false), "{text}");
    assert!(out["values"]
        .as_array()
        .is_some_and(|v| v.iter().any(|x| x == "42")));
}

#[test]
fn empty_statements_are_answered_and_the_session_goes_on() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    // psql sends an empty query for `;`: the session must survive it.
    let out = psql_cmd(port, no_extension_db(), "pm", "pm-pw")
        .args(["-c", ";", "-c", "SELECT 42"])
        .output()
        .expect("psql");
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    assert_eq!(printed.trim(), "42", "{printed}");
    let conninfo = format!(
        "host=127.0.0.1 port={port} user=pm password=pm-pw dbname={}",
        no_extension_db()
    );
    let Some(out) = python_client("proxy_mode_empty.py", &[&conninfo]) else {
        return;
    };
    let text = out.to_string();
    // EmptyQueryResponse then ReadyForQuery, as PostgreSQL answers; the
    // portal of an empty Parse is described as NoData.
    let answers = serde_json::json!(["IZ", "IZ", "IZ", "12nIZ", "1tnZ", "TDCZ"]);
    assert_eq!(out["answers"], answers, "{text}");
    assert_eq!(out["errors"], serde_json::json!([]), "{text}");
    assert_eq!(out["closed"], serde_json::json!(false), "{text}");
}

/// The stale-catalog hole: an overload created upstream by another role
/// during a masked session (`public.initcap(varchar)`, which PostgreSQL's
/// overload resolution prefers to `pg_catalog.initcap(text)` for a
/// varchar argument) must not run: the proxy forwards the name qualified
/// as it analysed it, so no raw protected text comes back in any column.
#[test]
fn an_overload_created_during_the_session_does_not_run() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    direct(
        no_extension_db(),
        "DROP FUNCTION IF EXISTS public.initcap(varchar)",
    );
    // The session starts and reads its catalog before the overload exists.
    let out = psql_mid_session(
        port,
        no_extension_db(),
        "pm",
        "pm-pw",
        std::time::Duration::from_secs(3),
        || {
            direct(
                no_extension_db(),
                "CREATE FUNCTION public.initcap(varchar) RETURNS text LANGUAGE sql \
                 AS $$ SELECT pg_catalog.string_agg(note || ' ' || patient, ' | ') FROM public.pm_t $$;
                 GRANT EXECUTE ON FUNCTION public.initcap(varchar) TO PUBLIC;",
            );
        },
        "SELECT id, initcap(ward::varchar) AS w FROM pm_t ORDER BY id;\n\
         SELECT initcap(ward::varchar), id FROM pm_t WHERE initcap(ward::varchar) <> '' ORDER BY id;",
    );
    direct(
        no_extension_db(),
        "DROP FUNCTION IF EXISTS public.initcap(varchar)",
    );
    assert!(out.contains("started"), "{out}");
    assert_no_marker("a function overload created mid-session", &out);
    // pg_catalog.initcap ran.
    assert!(out.contains("1|North"), "{out}");
}

/// One psql session through the proxy-mode proxy at `port`: `between` runs
/// as the superuser after its first statement, then `sql`; the tables of
/// the late-table test dropped before and after.
fn late_session(port: u16, between: &str, sql: &str) -> String {
    let cleanup = "DROP TABLE IF EXISTS pm_late, pm_late_parts, pm_late_b";
    direct(no_extension_db(), cleanup);
    let out = psql_mid_session(
        port,
        no_extension_db(),
        "pm",
        "pm-pw",
        std::time::Duration::from_secs(1),
        || {
            direct(no_extension_db(), between);
        },
        sql,
    );
    direct(no_extension_db(), cleanup);
    assert!(out.contains("started"), "{out}");
    assert_no_marker(sql, &out);
    out
}

/// Tables another role creates during a session: unknown to the catalog
/// the session read at its start, they are found once it is read again
/// (the session idle), with their rules: a protected column sanitized, a
/// table partitioned by one refused. Inside a transaction block the
/// catalog is not read again: refused, until the block ends.
#[test]
fn a_table_created_during_the_session_is_found_when_the_session_is_idle() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    let created = format!(
        "CREATE TABLE pm_late (id int, note text);
         INSERT INTO pm_late VALUES (7, 'Seen by {m0} late.');
         CREATE TABLE pm_late_parts (id int, note text) PARTITION BY LIST (note);
         CREATE TABLE pm_late_parts_a PARTITION OF pm_late_parts FOR VALUES IN ('a');
         GRANT SELECT ON pm_late, pm_late_parts, pm_late_parts_a TO proxy_unlabelled;",
        m0 = MARKERS[0]
    );
    let out = late_session(
        port,
        &created,
        "SELECT id, note FROM pm_late;\nSELECT id FROM pm_late_parts_a;",
    );
    assert!(out.contains("7|"), "{out}");
    assert!(
        out.contains("statement refused (protected_partition)"),
        "{out}"
    );
    let out = late_session(
        port,
        "CREATE TABLE pm_late_b (id int); INSERT INTO pm_late_b VALUES (8);
         GRANT SELECT ON pm_late_b TO proxy_unlabelled;",
        "BEGIN;\nSELECT id FROM pm_late_b;\nCOMMIT;\nSELECT id FROM pm_late_b;",
    );
    assert!(
        out.contains("statement refused (relation_unresolved)")
            && out.contains("outside a transaction block"),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "8"), "{out}");
}

/// `[masking] recognizers` in proxy mode: the proxy's own detection reads
/// the file, so a code only a custom pattern knows is replaced through a
/// proxy with the file and left as it is through one without.
#[test]
fn proxy_mode_reads_a_recognizers_file() {
    let Some(env) = env() else { return };
    direct(
        no_extension_db(),
        "DROP TABLE IF EXISTS pm_codes;
         CREATE TABLE pm_codes (id int PRIMARY KEY, note text);
         INSERT INTO pm_codes VALUES (1, 'The patient follows the zorblax protocol at home.');
         GRANT SELECT ON pm_codes TO proxy_unlabelled;",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("recognizers.json");
    std::fs::write(
        &file,
        r#"{"recognizers": [{"name": "programs", "label": "ORGANIZATION", "words": ["zorblax"]}]}"#,
    )
    .expect("write recognizers");
    let start = |extra: &str| {
        let config = format!(
            "listen = \"127.0.0.1:0\"\nkey = \"a proxy-mode test key, not secret\"\n{}\
             [[user]]\nname = \"pr\"\npassword = \"pr-pw\"\nmasked = true\n\
             upstream_user = \"proxy_unlabelled\"\nupstream_password = \"unlabelled-up-pw\"\n\
             [masking]\nmode = \"proxy\"\n{extra}\
             [[rule]]\ntable = \"pm_codes\"\ncolumn = \"note\"\n\
             rule = \"deidentify(strategy => typed_placeholder)\"\n",
            upstream_toml(env, no_extension_db())
        );
        spawn_proxy(&config).0
    };
    let read = |port: u16| {
        text(
            &psql_cmd(port, no_extension_db(), "pr", "pr-pw")
                .args(["-c", "SELECT note FROM pm_codes"])
                .output()
                .expect("psql"),
        )
    };
    let without = read(start(""));
    assert!(without.contains("zorblax"), "{without}");
    let with = read(start(&format!("recognizers = \"{}\"\n", file.display())));
    assert!(!with.contains("zorblax"), "{with}");
    assert!(with.contains("protocol at home"), "{with}");
    direct(no_extension_db(), "DROP TABLE pm_codes;");
}

/// psql's `meta` command (aligned, with its footers) through the
/// proxy-mode proxy and directly as its upstream role: (proxied, direct).
fn describe(env: &Env, meta: &str) -> (String, String) {
    let full = ["-P", "tuples_only=off", "-P", "format=aligned", "-c", meta];
    let proxied = psql_cmd(proxy_port(env), no_extension_db(), "pm", "pm-pw")
        .args(full)
        .output()
        .expect("psql");
    let direct = direct_cmd(env, no_extension_db(), "proxy_unlabelled")
        .args(full)
        .output()
        .expect("psql");
    (text(&proxied), text(&direct))
}

/// psql's `\d` of a table (a foreign key references pm_t, which makes
/// psql ask for pg_partition_ancestors), of a partitioned table, a
/// partition, a view, and the lists, describe through the proxy exactly
/// what they describe directly, and show no protected value.
#[test]
fn psql_describes_tables_as_a_direct_connection_does() {
    let Some(env) = env() else { return };
    for meta in [
        "\\d pm_t",
        "\\d+ pm_t",
        "\\d pm_visits",
        "\\d+ pm_parts",
        "\\d pm_parts_north",
        "\\d+ pm_wards",
        "\\dt",
        "\\di",
        "\\dv",
        "\\df",
        "\\dX",
        "\\du",
        "\\db",
    ] {
        let (proxied, direct) = describe(env, meta);
        assert!(!proxied.contains("ERROR"), "{meta}:\n{proxied}");
        assert_eq!(proxied, direct, "{meta}");
        assert_no_marker(meta, &proxied);
    }
    let (d, _) = describe(env, "\\d pm_t");
    assert!(
        d.contains("Referenced by:") && d.contains("pm_visits"),
        "{d}"
    );
    let (d, _) = describe(env, "\\d+ pm_parts");
    assert!(d.contains("pm_parts_north FOR VALUES IN ('north')"), "{d}");
}

/// The catalog functions psql's `\d` needs read definitions, never the
/// values of a table: the statistics that hold protected values stay
/// refused, a catalog function given a value read from a table is refused
/// by its own rule, and what the allowed ones return over the whole
/// catalog holds no protected value.
#[test]
fn catalog_introspection_reveals_no_protected_value() {
    let Some(env) = env() else { return };
    proxy_port(env);
    // The statistics do hold the planted values: reading them would leak.
    let stats = direct(
        no_extension_db(),
        "SELECT histogram_bounds::text FROM pg_stats WHERE tablename = 'pm_t' AND attname = 'patient'",
    );
    assert!(stats.contains(MARKERS[0]), "{stats}");
    for (rule, sql) in [
        (
            "catalog_relation",
            "SELECT histogram_bounds FROM pg_stats WHERE tablename = 'pm_t'",
        ),
        (
            "catalog_relation",
            "SELECT most_common_vals FROM pg_stats_ext",
        ),
        (
            "catalog_relation",
            "SELECT stxdmcv FROM pg_statistic_ext_data",
        ),
        ("catalog_relation", "SELECT stavalues1 FROM pg_statistic"),
        (
            "catalog_function_argument",
            "SELECT pg_catalog.pg_get_userbyid(id::oid) FROM pm_t",
        ),
        (
            "catalog_function_argument",
            "SELECT a.relid FROM pm_t t, pg_catalog.pg_partition_ancestors(t.id::regclass) a",
        ),
        (
            "catalog_function_argument",
            "SELECT pg_catalog.pg_describe_object(1259, s.id::oid, 0) FROM (SELECT id FROM pm_t) s",
        ),
        (
            "protected_in_expression",
            "SELECT pg_catalog.to_regclass(note) FROM pm_t",
        ),
    ] {
        refused_by(env, rule, sql);
    }
    for sql in [
        "SELECT pg_catalog.pg_describe_object(classid, objid, objsubid) FROM pg_catalog.pg_depend",
        "SELECT pg_catalog.pg_get_expr(adbin, adrelid) FROM pg_catalog.pg_attrdef",
        "SELECT pg_catalog.pg_get_expr(relpartbound, oid) FROM pg_catalog.pg_class",
        "SELECT pg_catalog.pg_get_statisticsobjdef_columns(oid) FROM pg_catalog.pg_statistic_ext",
        "SELECT r.relid FROM pg_catalog.pg_class c, pg_catalog.pg_partition_ancestors(c.oid) r",
    ] {
        served(env, sql);
    }
}

/// `SET search_path` through proxy mode: unqualified names then resolve
/// as the server resolves them (a schema that does not exist skipped), the
/// rules of the table reached apply, `SHOW` agrees, and what could be
/// undone (`SET LOCAL`, a `SET` inside a transaction block) is refused.
#[test]
fn set_search_path_moves_name_resolution_with_the_server() {
    let Some(env) = env() else { return };
    let out = psql_cmd(proxy_port(env), no_extension_db(), "pm", "pm-pw")
        .args([
            "-c",
            "SELECT 'before:' || count(*) FROM pm_t",
            "-c",
            "SET search_path TO pm_nosuch, pm_other, public",
            "-c",
            "SHOW search_path",
            "-c",
            "SELECT 'after:' || count(*) FROM pm_t",
            "-c",
            "SELECT 'row:' || id, secret FROM pm_t",
            "-c",
            "SELECT id FROM pm_t WHERE secret LIKE 'K%'",
            "-c",
            "SELECT 'visits:' || count(*) FROM pm_visits",
            "-c",
            "SET LOCAL search_path TO public",
            "-c",
            "BEGIN",
            "-c",
            "SET search_path TO public",
            "-c",
            "ROLLBACK",
            "-c",
            "SELECT 'kept:' || count(*) FROM pm_t",
            "-c",
            "RESET search_path",
            "-c",
            "SELECT 'reset:' || count(*) FROM pm_t",
        ])
        .output()
        .expect("psql");
    let out = text(&out);
    for expect in [
        "before:3",
        "pm_nosuch, pm_other, public",
        "after:1",
        "row:1|",
        "statement refused (protected_in_where): column pm_other.pm_t.secret is protected",
        "visits:3",
        "statement refused (setting_not_allowed): SET LOCAL search_path",
        "statement refused (setting_not_allowed): setting search_path: the search path may \
         only be changed outside a transaction block",
        "kept:1",
        "reset:3",
    ] {
        assert!(out.contains(expect), "{expect:?} missing:\n{out}");
    }
    // The protected column of the table the new path reached is sanitized.
    assert_no_marker("a table reached through SET search_path", &out);
}

/// `limits.idle_timeout_secs` holds in proxy mode as in database mode: an
/// idle client is closed with a FATAL error naming the limit, and a client
/// waiting for a long statement is not idle.
#[test]
fn an_idle_client_is_closed_in_proxy_mode_too() {
    let Some(env) = env() else { return };
    let config = format!(
        "listen = \"127.0.0.1:0\"\nkey = \"a proxy-mode test key, not secret\"\n{}\
         [[user]]\nname = \"pm3\"\npassword = \"pm3-pw\"\nmasked = true\n\
         upstream_user = \"proxy_unlabelled\"\nupstream_password = \"unlabelled-up-pw\"\n\
         [masking]\nmode = \"proxy\"\n[limits]\nidle_timeout_secs = 1\n",
        upstream_toml(env, no_extension_db())
    );
    let (port, _) = spawn_proxy(&config);
    let out = psql_cmd(port, no_extension_db(), "pm3", "pm3-pw")
        .args(["-c", "SELECT 1", "-c", "\\! sleep 2.5", "-c", "SELECT 2"])
        .output()
        .expect("psql");
    let printed = text(&out);
    assert!(
        printed.starts_with("1\n")
            && printed.contains("limits.idle_timeout_secs")
            && !printed.contains("\n2\n"),
        "{printed}"
    );
    // pg_sleep is on proxy mode's deny-list: a long count instead (a few
    // seconds on two cores; were it shorter, the check would only be weaker).
    let out = psql_cmd(port, no_extension_db(), "pm3", "pm3-pw")
        .args(["-c", "SELECT count(*) FROM generate_series(1, 60000000) g"])
        .output()
        .expect("psql");
    assert_eq!(text(&out), "60000000\n");
}

/// `limits.max_message_bytes` holds in proxy mode as in database mode, and
/// a message over it ends the session with a FATAL error and its SQLSTATE
/// (before, the session closed without a word): a client's message with
/// 08P01, a server's with 54000, naming the limit but not the message's
/// length (an error or notice over it could quote a value).
#[test]
fn messages_over_the_limit_end_the_session_with_an_error_in_proxy_mode_too() {
    let Some(env) = env() else { return };
    let config = format!(
        "listen = \"127.0.0.1:0\"\nkey = \"a proxy-mode test key, not secret\"\n{}\
         [[user]]\nname = \"pm4\"\npassword = \"pm4-pw\"\nmasked = true\n\
         upstream_user = \"proxy_unlabelled\"\nupstream_password = \"unlabelled-up-pw\"\n\
         [masking]\nmode = \"proxy\"\n[limits]\nmax_message_bytes = 4096\n",
        upstream_toml(env, no_extension_db())
    );
    let (port, _) = spawn_proxy(&config);
    let run = |sql: &str| {
        let out = psql_cmd(port, no_extension_db(), "pm4", "pm4-pw")
            .args(["-v", "VERBOSITY=verbose", "-c", "SELECT 1", "-c", sql])
            .output()
            .expect("psql");
        text(&out)
    };
    let printed = run(&format!("SELECT '{}'", "x".repeat(5000)));
    assert!(
        printed.starts_with("1\n")
            && printed.contains("FATAL:  08P01")
            && printed.contains("limits.max_message_bytes"),
        "{printed}"
    );
    let printed = run("SELECT pg_catalog.repeat('x', 5000)");
    assert!(
        printed.starts_with("1\n")
            && printed.contains("FATAL:  54000")
            && printed.contains("limits.max_message_bytes (4096)")
            && !printed.contains("xxxx")
            && !printed.contains("500"),
        "{printed}"
    );
}
