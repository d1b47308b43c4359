//! Channels of proxy mode that carry something of raw protected values
//! without the values themselves: the length of a raw row judged against
//! `limits.max_message_bytes`, the `ctid` of rows whose page layout the
//! lengths of their values decide, and errors whose messages quote a
//! value (a count passed off as a constant to a catalog function, a table
//! value read as a relation name), and the order in which a parallel
//! plan's workers return rows. Each test failed before its fix.
//!
//! Runs in a database of its own (`<DPTEXT_TEST_DB>_chan`), with an
//! upstream role `chan_reader` that reads raw data. Needs what the other
//! proxy tests need; skipped without the database unless
//! `DPTEXT_REQUIRE_PG=1`.

mod common;

use std::sync::OnceLock;

use common::*;

/// The channels' database (`<DPTEXT_TEST_DB>_chan`).
fn db() -> &'static str {
    static DB: OnceLock<String> = OnceLock::new();
    DB.get_or_init(|| side_db("chan"))
}

/// `limits.max_message_bytes` of the channels' proxy.
const MAX_MESSAGE: usize = 1 << 20;

/// The database, its tables and role, and a proxy-mode proxy in front of
/// it; the proxy's port. `chan_t` has a protected `note`; `chan_plain`
/// has nothing protected.
fn proxy_port(env: &Env) -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let have = direct(
            "postgres",
            &format!("SELECT count(*) FROM pg_database WHERE datname = '{}'", db()),
        );
        if have.trim() == "0" {
            direct("postgres", &format!("CREATE DATABASE {}", db()));
        }
        direct(
            db(),
            &format!(
                "DO $$BEGIN
                   IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'chan_reader') THEN CREATE ROLE chan_reader LOGIN; END IF;
                 END$$;
                 DROP TABLE IF EXISTS chan_t, chan_plain, chan_gen CASCADE;
                 CREATE TABLE chan_t (id int PRIMARY KEY, note text, ward text);
                 INSERT INTO chan_t VALUES
                   (1, 'Seen by {m0} today', 'north'),
                   (2, 'Called {m1} about the results of the second test', 'south'),
                   (3, repeat('Letter from {m2}. ', 200), 'north wing');
                 CREATE TABLE chan_plain (id int, ward text);
                 INSERT INTO chan_plain VALUES (1, 'north');
                 CREATE TABLE chan_gen (id int PRIMARY KEY, note text,
                   note_len int GENERATED ALWAYS AS (octet_length(note)) STORED,
                   note_flag bool GENERATED ALWAYS AS (note LIKE '%{m0}%') STORED,
                   id_text text GENERATED ALWAYS AS (id::text) STORED);
                 INSERT INTO chan_gen (id, note) VALUES (1, 'Seen by {m0} today');
                 GRANT SELECT ON chan_t, chan_plain, chan_gen TO chan_reader;",
                m0 = MARKERS[0],
                m1 = MARKERS[1],
                m2 = MARKERS[2],
            ),
        );
        let config = chan_config(
            env,
            db(),
            &format!(
                "[limits]\nmax_message_bytes = {MAX_MESSAGE}\n{NOTE_RULE}\
                 [[rule]]\ntable = \"chan_gen\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n"
            ),
        );
        spawn_proxy(&config).0
    })
}

/// `sql` through the channels' proxy, in a session of its own: stdout
/// and stderr.
/// The rule of `chan_t.note` in every channel proxy's configuration.
const NOTE_RULE: &str =
    "[[rule]]\ntable = \"chan_t\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n";

/// A proxy of the tests' own with `chan_t.note`'s rule and `extra`
/// sections (once the shared set-up has run); its port.
fn note_rule_proxy(env: &Env, extra: &str) -> u16 {
    proxy_port(env);
    spawn_proxy(&chan_config(env, db(), &format!("{NOTE_RULE}{extra}"))).0
}

/// A proxy-mode configuration for user `chan` over database `db`, with
/// `extra` sections (rules, limits) after `[masking]`.
fn chan_config(env: &Env, db: &str, extra: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nkey = \"a channel test key, not secret\"\n{}\
         [[user]]\nname = \"chan\"\npassword = \"chan-pw\"\nmasked = true\n\
         upstream_user = \"chan_reader\"\n\
         [masking]\nmode = \"proxy\"\n{extra}",
        upstream_toml(env, db)
    )
}

fn chan(env: &Env, sql: &str) -> String {
    text(
        &psql_cmd(proxy_port(env), db(), "chan", "chan-pw")
            .args(["-c", sql])
            .output()
            .expect("psql"),
    )
}

/// psql through the proxy at `port` (one of the tests' own, with a
/// variant configuration) as `chan`, each of `sqls` a `-c` of its own, in
/// one session: stdout and stderr.
fn chan_at(port: u16, sqls: &[&str]) -> String {
    let mut cmd = psql_cmd(port, db(), "chan", "chan-pw");
    for sql in sqls {
        cmd.args(["-c", sql]);
    }
    text(&cmd.output().expect("psql"))
}

/// A libpq connection string for `chan` through the proxy at `port`
/// (for the Python clients).
fn conninfo_at(port: u16) -> String {
    format!(
        "host=127.0.0.1 port={port} user=chan password=chan-pw dbname={}",
        db()
    )
}

/// Runs Python client `script` as `chan` through the channels' proxy: its
/// JSON output, and that as text after checking it holds no planted
/// marker (`what` names the case); `None` where Python clients cannot run.
fn chan_script(env: &Env, script: &str, what: &str) -> Option<(serde_json::Value, String)> {
    let out = python_client(script, &[&conninfo_at(proxy_port(env))])?;
    let text = out.to_string();
    assert_no_marker(what, &text);
    Some((out, text))
}

/// The raw octet length of row `id`'s note.
fn raw_length(id: i32) -> usize {
    let out = direct(
        db(),
        &format!("SELECT octet_length(note) FROM chan_t WHERE id = {id}"),
    );
    out.trim().parse().expect("a length")
}

/// A row is held to `limits.max_message_bytes` as it would be sent, its
/// protected columns sanitized, never as the server sent it: judged raw,
/// `SELECT note, repeat('x', n)` ended the session exactly when `n`
/// passed the limit less the note's raw length, and a search on `n` read
/// that length. Now the threshold follows the sanitized note's length
/// (which the client reads anyway): for each row, the longest padding
/// that fits is the limit less the sanitized length and the row's
/// framing, and one byte more ends the session with FATAL 54000 naming
/// the limit, as a row the server could not build does.
#[test]
fn the_message_limit_judges_rows_as_sent_not_raw() {
    let Some(env) = env() else { return };
    let mut differ = 0;
    let mut over = String::new();
    for id in 1..=3 {
        let out = chan(env, &format!("SELECT note FROM chan_t WHERE id = {id}"));
        assert!(!out.contains("ERROR") && !out.trim().is_empty(), "{out}");
        assert_no_marker("a protected note", &out);
        let sanitized = out.trim_end_matches('\n').len();
        if sanitized != raw_length(id) {
            differ += 1;
        }
        // The DataRow: a field count (2), then each field's length (4)
        // and bytes.
        let fits = MAX_MESSAGE - 2 - (4 + sanitized) - 4;
        let sql = |pad: usize| {
            format!("SELECT note, pg_catalog.repeat('x', {pad}) FROM chan_t WHERE id = {id}")
        };
        let out = chan(env, &sql(fits));
        assert!(
            !out.contains("FATAL") && !out.contains("server closed") && out.contains("xxxx"),
            "row {id}, padding {fits}: {}",
            &out[..out.len().min(400)]
        );
        assert_no_marker("a padded note", &out);
        let out = chan(env, &sql(fits + 1));
        assert!(
            out.contains("limits.max_message_bytes") && !out.contains("xxxx"),
            "row {id}, padding {}: {}",
            fits + 1,
            &out[..out.len().min(400)]
        );
        assert_no_marker("a padded note over the limit", &out);
        over = limit_line(&out);
    }
    // The test tells the two apart only where the lengths differ.
    assert!(differ > 0, "every sanitized note has its raw length");
    // A row the server cannot build (PostgreSQL's own bound is 1 GiB a
    // row, raw values included; a repeat() too long for it, computed
    // row by row, fails the same way, with 54000) ends the session with
    // the very same words: which of the two refused a row would tell its
    // raw length.
    let out = chan(
        env,
        "SELECT note, pg_catalog.repeat('x', 1073741823 + id) FROM chan_t WHERE id = 1",
    );
    assert!(
        !over.is_empty() && limit_line(&out) == over,
        "{out}\n{over}"
    );
}

/// The line of `out` that names `limits.max_message_bytes`.
fn limit_line(out: &str) -> String {
    out.lines()
        .find(|l| l.contains("limits.max_message_bytes"))
        .unwrap_or_default()
        .to_owned()
}

/// A row's `ctid` is its page and slot: how many rows fit on a page
/// depends on the lengths of their values, so the ctids of a table with
/// protected columns tell which rows hold long values, and `max(ctid)`
/// the page count that `relation_size` withholds. Refused wherever it
/// appears in such a table (it was output before the fix); allowed in a
/// table without protected columns, and the other system columns stay.
#[test]
fn row_locations_of_tables_with_protected_columns_are_refused() {
    let Some(env) = env() else { return };
    for sql in [
        "SELECT id, ctid FROM chan_t",
        "SELECT max(ctid) FROM chan_t",
        "SELECT id FROM chan_t ORDER BY ctid",
        "SELECT id FROM chan_t WHERE ctid > '(0,1)'",
        "SELECT t.id FROM chan_plain p JOIN chan_t t ON t.ctid = p.ctid",
    ] {
        let out = chan(env, sql);
        assert_refused_by("row_location", sql, &out);
        assert!(!out.contains("(0,"), "{sql}: {out}");
    }
    let out = chan(env, "SELECT ctid, id FROM chan_plain");
    assert!(out.contains("(0,1)|1"), "{out}");
    let out = chan(
        env,
        "SELECT id, tableoid::regclass FROM chan_t WHERE id = 1",
    );
    assert!(out.contains("1|chan_t"), "{out}");
    // An owner's rolled-back row lock leaves its transaction's ID in xmax
    // of the rows it chose, in a table without protected columns too.
    for sql in [
        "SELECT id, xmax FROM chan_plain",
        "SELECT id FROM chan_t WHERE xmin::text <> '0'",
    ] {
        let out = chan(env, sql);
        assert_refused_by("transaction_column", sql, &out);
    }
}

/// Two ways a value reached an error message that proxy mode relayed.
/// An aggregate or a window function without arguments (`count(*)`,
/// `row_number()`) passed for a constant, so a catalog function took it
/// and its error named it (`relation "1" does not exist`); now refused.
/// And the input functions of the name types (`regclass`, reached by a
/// cast or an implicit coercion), of `tsquery` and others quote what they
/// read in messages of classes that were relayed whole (42, 3F): now
/// those SQLSTATEs lose their message, which named `north` before.
#[test]
fn errors_do_not_quote_values() {
    let Some(env) = env() else { return };
    for sql in [
        "SELECT pg_catalog.to_regclass(count(*)::text) FROM chan_t WHERE ward = 'north'",
        "SELECT pg_catalog.has_table_privilege((row_number() OVER ())::text, 'SELECT') FROM chan_t",
        "SELECT pg_catalog.has_table_privilege(x, 'SELECT') \
         FROM (SELECT count(*)::text AS x FROM chan_t) s",
        // It takes a regclass: a table's text would name a relation.
        "SELECT pg_catalog.pg_partition_root(ward) FROM chan_t WHERE id = 1",
    ] {
        assert_refused_by("catalog_function_argument", sql, &chan(env, sql));
    }
    for (sql, sqlstate) in [
        ("SELECT ward::regclass FROM chan_t WHERE id = 1", "42P01"),
        ("SELECT ward::regtype FROM chan_t WHERE id = 1", "42704"),
        ("SELECT ward::regrole FROM chan_t WHERE id = 1", "42704"),
        ("SELECT ward::regproc FROM chan_t WHERE id = 1", "42883"),
        (
            "SELECT (ward || '.x')::regclass FROM chan_t WHERE id = 1",
            "3F000",
        ),
        ("SELECT ward::tsquery FROM chan_t WHERE id = 3", "42601"),
    ] {
        let out = chan(env, sql);
        assert!(
            out.contains(&format!("SQLSTATE {sqlstate}")) && out.contains("withholds"),
            "{sql}: {out}"
        );
        assert!(
            !out.contains("north"),
            "{sql}: a value in the message: {out}"
        );
    }
    // Errors of the statement's own names still say what they are.
    let out = chan(env, "SELECT id FROM chan_t GROUP BY ward");
    assert!(out.contains("must appear in the GROUP BY clause"), "{out}");
}

/// A database whose encoding is not UTF8 (SQL_ASCII stores any bytes):
/// a value that is not UTF-8 could not be sanitized, and ending the
/// session on it would tell which values are not. Proxy mode refuses the
/// session at its start, whatever the rows hold.
#[test]
fn a_database_that_is_not_utf8_is_refused_at_the_start() {
    let Some(env) = env() else { return };
    // The role is the cluster's: made once, by the shared set-up (two
    // sessions checking for it and creating it at once would collide).
    proxy_port(env);
    let ascii = format!("{}_ascii", db());
    let have = direct(
        "postgres",
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{ascii}'"),
    );
    if have.trim() == "0" {
        direct(
            "postgres",
            &format!("CREATE DATABASE {ascii} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"),
        );
    }
    direct(
        &ascii,
        "DO $$BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'chan_reader') THEN CREATE ROLE chan_reader LOGIN; END IF;
         END$$;
         DROP TABLE IF EXISTS chan_a;
         CREATE TABLE chan_a (id int, note text);
         INSERT INTO chan_a VALUES (1, 'plain');
         GRANT SELECT ON chan_a TO chan_reader;",
    );
    let config = chan_config(
        env,
        &ascii,
        "[[rule]]\ntable = \"chan_a\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n",
    );
    let port = spawn_proxy(&config).0;
    let out = text(
        &psql_cmd(port, &ascii, "chan", "chan-pw")
            .args(["-c", "SELECT id FROM chan_a"])
            .output()
            .expect("psql"),
    );
    assert!(out.contains("needs a UTF8 database"), "{out}");
    assert!(!out.contains("plain"), "{out}");
}

/// Rows are sanitized in batches counted by rows, never by bytes: a batch
/// sent once its raw rows reached `max_message_bytes` would get rows out
/// before a value the sanitizer refuses (over the engine's input limit)
/// ends the session, by the raw length of the rows before it. Here the
/// rows before the refused value number the same, and get out or not the
/// same, whatever the padding beside a protected value (before the fix
/// they got out exactly when the padding and the raw note passed the
/// limit together).
#[test]
fn rows_before_a_refused_value_get_out_by_count_not_by_raw_length() {
    let Some(env) = env() else { return };
    proxy_port(env);
    direct(
        db(),
        "DROP TABLE IF EXISTS chan_big;
         CREATE TABLE chan_big (id int, note text);
         INSERT INTO chan_big VALUES (4, repeat('Long letter. ', 250000));
         GRANT SELECT ON chan_big TO chan_reader;",
    );
    let config = chan_config(
        env,
        db(),
        &format!(
            "[engine]\nmax_input_bytes = 1000000\n\
             [limits]\nmax_message_bytes = {MAX_MESSAGE}\n{NOTE_RULE}\
             [[rule]]\ntable = \"chan_big\"\ncolumn = \"note\"\nrule = \"santext(eps => 2)\"\n"
        ),
    );
    let port = spawn_proxy(&config).0;
    let conninfo = conninfo_at(port);
    let rows_out = |pad: usize| {
        let sql = format!(
            "SELECT g.g, a.note, b.note, CASE WHEN g.g = 2 THEN pg_catalog.repeat('x', {pad}) ELSE '' END \
             FROM pg_catalog.generate_series(1, 3) g \
             LEFT JOIN chan_t a ON a.id = 2 AND g.g = 1 \
             LEFT JOIN chan_big b ON b.id = 4 AND g.g = 3"
        );
        python_client("proxy_mode_rows_out.py", &[&conninfo, &sql])
            .map(|v| v["rows"].as_u64().expect("a count"))
    };
    // Row 1 (the note) and row 2 (the padding) together pass the limit
    // with the larger padding, alone neither does.
    let small = rows_out(10);
    let large = rows_out(MAX_MESSAGE - 60);
    assert_eq!(small, large, "rows out before the refused value");
}

/// The most parallel workers seen serving `chan_reader` sessions while
/// `run` runs (polled as the superuser).
fn parallel_workers_during(run: impl FnOnce() -> String + Send) -> (usize, String) {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let out = run();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            out
        });
        let mut most = 0;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let n = direct(
                db(),
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker' \
                 AND leader_pid IN (SELECT pid FROM pg_stat_activity WHERE usename = 'chan_reader')",
            );
            most = most.max(n.trim().parse().unwrap_or(0));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        (most, worker.join().expect("the query's thread"))
    })
}

/// A Gather interleaves its workers' rows as their queues fill, and a
/// queue holds fewer rows the longer their raw values, so an unordered
/// read's row order would follow raw lengths. Proxy-mode sessions start
/// with `max_parallel_workers_per_gather=0`, over the role's own default
/// (which this test sets to 2, with parallel plans made cheap, and checks
/// by running the same query directly as the role: it gets workers).
#[test]
fn proxy_mode_sessions_run_no_parallel_query() {
    let Some(env) = env() else { return };
    proxy_port(env);
    direct(
        db(),
        "DROP TABLE IF EXISTS chan_par;
         CREATE TABLE chan_par AS SELECT g AS id, 'row ' || g AS ward FROM generate_series(1, 40000) g;
         ALTER TABLE chan_par SET (parallel_workers = 2);
         ANALYZE chan_par;
         GRANT SELECT ON chan_par TO chan_reader;
         ALTER ROLE chan_reader SET max_parallel_workers_per_gather = 2;
         ALTER ROLE chan_reader SET parallel_setup_cost = 0;
         ALTER ROLE chan_reader SET parallel_tuple_cost = 0;
         ALTER ROLE chan_reader SET min_parallel_table_scan_size = 0;",
    );
    let sql = "SELECT count(*) FROM chan_par WHERE md5(repeat(ward, 3000)) <> ''";
    let (direct_workers, direct_out) = parallel_workers_during(|| {
        text(
            &direct_cmd(env, db(), "chan_reader")
                .args(["-c", sql])
                .output()
                .expect("psql"),
        )
    });
    let (proxied_workers, proxied_out) = parallel_workers_during(|| chan(env, sql));
    direct(
        db(),
        "ALTER ROLE chan_reader RESET ALL; DROP TABLE chan_par;",
    );
    assert_eq!(direct_out.trim(), "40000", "{direct_out}");
    assert_eq!(proxied_out.trim(), "40000", "{proxied_out}");
    assert!(
        direct_workers > 0,
        "the role's own sessions should get parallel workers (the test's set-up)"
    );
    assert_eq!(
        proxied_workers, 0,
        "a proxy-mode session ran a parallel plan"
    );
}

/// Any error of the server inside a result with protected columns ends
/// the session with the proxy's one FATAL for a result that ended early,
/// whatever the error: a row too large to build, or anything else the
/// server met while it held raw values, would otherwise be a bit (or a
/// SQLSTATE's worth) about them. Before, only 54000 and 53200 did, and
/// this division by zero reached the client as ERROR 22012. A result
/// without protected columns keeps its error and its session.
#[test]
fn a_server_error_inside_a_protected_result_ends_the_session() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    let run = |sql: &str| chan_at(port, &[sql, "SELECT 'still here'"]);
    // Inside the result; and before it, where the server stores the rows
    // of SQL-level EXECUTE and FETCH before it describes them (an error
    // there came before the proxy had seen the result's columns).
    for sql in [
        "SELECT note, 1 / (id - 3) FROM chan_t",
        "PREPARE p AS SELECT note, 1 / (id - 3) FROM chan_t; EXECUTE p",
        "BEGIN; DECLARE c CURSOR FOR SELECT note, 1 / (id - 3) FROM chan_t; FETCH ALL FROM c",
    ] {
        let out = run(sql);
        assert_no_marker("an error inside a protected result", &out);
        assert!(out.contains("ended early"), "{sql}: {out}");
        assert!(!out.contains("22012"), "{sql}: {out}");
        assert!(
            !out.contains("still here"),
            "the session went on: {sql}: {out}"
        );
    }
    let out = run("SELECT ward, 1 / (id - 3) FROM chan_t");
    assert!(out.contains("22012"), "{out}");
    assert!(out.contains("still here"), "{out}");
    // A seventh review's sentinel: a class-42 error (a regclass cast of a
    // value) of a later row, relayed with the session kept, told that an
    // earlier, padded row had been stored. Class 42 is relayed only where
    // rows are streamed (sent, and judged, before a later row's error).
    let sentinel = "(CASE WHEN id = 3 THEN 'no_such_relation' ELSE 'pg_class' END)::regclass";
    for sql in [
        format!("PREPARE p AS SELECT {sentinel}, note FROM chan_t; EXECUTE p"),
        format!(
            "BEGIN; DECLARE c CURSOR FOR SELECT {sentinel}, note FROM chan_t; FETCH ALL FROM c"
        ),
    ] {
        let out = run(&sql);
        assert!(out.contains("ended early"), "{sql}: {out}");
        assert!(!out.contains("42P01"), "{sql}: {out}");
        assert!(!out.contains("still here"), "{sql}: {out}");
    }
    let out = run(&format!("SELECT {sentinel}, note FROM chan_t"));
    assert_no_marker("a streamed result's class-42 error", &out);
    assert!(out.contains("42P01"), "{out}");
    assert!(out.contains("still here"), "{out}");
}

/// A seventh review's finding: after an error in an extended-protocol
/// message the server discards everything up to the next Sync, a
/// pipelined simple Query and its ReadyForQuery included; the proxy kept
/// expecting that ReadyForQuery, so every later answer was judged against
/// the wrong statement (a protected EXECUTE's error relayed, the session
/// kept: with a padded row, exact lengths). The queue dropped the skipped
/// Query; since the twelfth review a Query inside an unfinished batch is
/// refused outright (42501). The protected EXECUTE after it ends the
/// session.
#[test]
fn an_error_before_a_pipelined_query_keeps_the_proxy_in_step() {
    let Some(env) = env() else { return };
    let Some((out, text)) = chan_script(env, "proxy_mode_pipelined.py", "after a pipelined Query")
    else {
        return;
    };
    assert_eq!(out["plain"], serde_json::json!(["1"]), "{text}");
    assert_eq!(
        out["errors"],
        serde_json::json!(["22012", "42501", "54000"]),
        "{text}"
    );
    assert_eq!(out["closed"], serde_json::json!(true), "{text}");
}

/// LOG and DEBUG messages, which PostgreSQL sends a client that asks for
/// them (`client_min_messages`), can be about anything the server did: a
/// temporary file a stored result spilled to, at a size a padding column
/// tunes. Proxy mode drops them (before, they came through scrubbed).
#[test]
fn log_and_debug_messages_do_not_reach_masked_clients() {
    let Some(env) = env() else { return };
    let out = chan(
        env,
        "SET client_min_messages = debug5; SELECT id FROM chan_plain; SELECT 'done'",
    );
    assert!(out.contains("done"), "{out}");
    assert!(!out.contains("DEBUG") && !out.contains("LOG"), "{out}");
}

/// A protected column may be output beside `ORDER BY` the columns of a
/// unique key (a total order: no ties for a spilled sort to reorder), not
/// beside any other.
#[test]
fn protected_output_may_be_ordered_by_a_unique_key() {
    let Some(env) = env() else { return };
    let out = chan(env, "SELECT id, note FROM chan_t ORDER BY id DESC");
    assert_no_marker("ordered by the primary key", &out);
    let ids: Vec<&str> = out.lines().filter_map(|l| l.split('|').next()).collect();
    assert_eq!(ids, ["3", "2", "1"], "{out}");
    assert_refused_by(
        "protected_with_buffering",
        "ORDER BY ward",
        &chan(env, "SELECT id, note FROM chan_t ORDER BY ward"),
    );
}

/// With `temp_file_limit` set for the session's role, a sort or the
/// stored rows of SQL-level `EXECUTE` and `FETCH` would fail once their
/// temporary files pass it, at a size a padding column tunes: one bit
/// about raw lengths per session. Such statements are refused in that
/// session; streaming reads are not.
#[test]
fn a_temp_file_limit_refuses_statements_that_store_protected_rows() {
    let Some(env) = env() else { return };
    proxy_port(env);
    direct(
        db(),
        "DO $$BEGIN
           IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'chan_limited') THEN CREATE ROLE chan_limited LOGIN; END IF;
         END$$;
         ALTER ROLE chan_limited SET temp_file_limit = '10MB';
         GRANT SELECT ON chan_t TO chan_limited;",
    );
    let config = chan_config(env, db(), NOTE_RULE).replace(
        "upstream_user = \"chan_reader\"",
        "upstream_user = \"chan_limited\"",
    );
    let port = spawn_proxy(&config).0;
    let run = |sql: &str| chan_at(port, &[sql]);
    for sql in [
        "SELECT id, note FROM chan_t ORDER BY id",
        "PREPARE p AS SELECT repeat('x', 4000000) AS pad, note FROM chan_t; EXECUTE p",
        "BEGIN; DECLARE c CURSOR FOR SELECT note FROM chan_t; FETCH ALL FROM c",
    ] {
        let out = run(sql);
        assert_refused_by("protected_with_buffering", sql, &out);
        assert!(out.contains("temp_file_limit is 10MB"), "{sql}: {out}");
    }
    let out = run("SELECT id, note FROM chan_t");
    assert_no_marker("a streamed read", &out);
    assert_eq!(out.lines().count(), 3, "{out}");
}

/// Generated columns computed from a protected column (its length, a
/// flag of what it contains) are refused, by name or through `*`, as the
/// sanitized column beside them would otherwise be undone; one computed
/// from other columns stays readable. Before, `SELECT note_len,
/// note_flag` gave the raw length and `true`.
#[test]
fn columns_generated_from_protected_ones_are_not_read() {
    let Some(env) = env() else { return };
    proxy_port(env);
    for sql in [
        "SELECT id, note, note_len, note_flag FROM chan_gen",
        "SELECT * FROM chan_gen",
        "SELECT count(*) FROM chan_gen WHERE note_flag",
    ] {
        let out = chan(env, sql);
        assert_refused_by("derived_column", sql, &out);
        assert!(
            out.contains("generated from protected column note"),
            "{out}"
        );
    }
    let out = chan(env, "SELECT id, id_text, note FROM chan_gen");
    assert_no_marker("a generated column of other columns", &out);
    assert!(out.starts_with("1|1|"), "{out}");
}

/// A fifth review's shapes, each of which gave exact raw lengths: an
/// `ORDER BY id` the server bound to a subquery's own alias (every row
/// tied, so a sort past `work_mem` merged its runs in an order that
/// showed where the padded row ended), a subquery hidden in a subscript
/// (pg_query's walk did not look there), and a `SCROLL` cursor over a
/// plan that cannot run backwards read with `MOVE` (the server stored the
/// padded rows, failing past 1 GiB or `temp_file_limit`, and `MOVE` sent
/// nothing the proxy could judge). All refused; forward `FETCH` of a
/// plain cursor over protected columns still works.
#[test]
fn sorts_and_cursors_that_hold_rows_never_sent_are_refused() {
    let Some(env) = env() else { return };
    for sql in [
        "SELECT note, (SELECT ARRAY[n.ward] AS id)[1] FROM chan_t n ORDER BY id",
        "SELECT note, (SELECT 1)[1] FROM chan_t",
        "SELECT id, note, repeat('x', 10) FROM chan_t ORDER BY id LIMIT 1",
        "BEGIN; DECLARE c SCROLL CURSOR FOR SELECT id, generate_series(1, 1) AS g, note FROM chan_t",
    ] {
        assert_refused_by("protected_with_buffering", sql, &chan(env, sql));
    }
    for sql in [
        "BEGIN; DECLARE c CURSOR FOR SELECT id, note FROM chan_t; MOVE FORWARD ALL IN c",
        "BEGIN; DECLARE c CURSOR FOR SELECT id, note FROM chan_t; FETCH ABSOLUTE 3 FROM c",
    ] {
        assert_refused_by("construct_not_allowed", sql, &chan(env, sql));
    }
    let out = chan(
        env,
        "BEGIN; DECLARE c CURSOR FOR SELECT id, note FROM chan_t ORDER BY id; FETCH 2 FROM c; FETCH ALL FROM c; COMMIT",
    );
    assert_no_marker("a cursor fetched forward", &out);
    let ids: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once('|'))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ids, ["1", "2", "3"], "{out}");
}

/// A sixth review's finding: a `FETCH` or `MOVE` parsed as a protocol-level
/// statement was analysed against its cursor as it stood then, and bound
/// after the cursor was declared again over protected columns: `MOVE`
/// (refused over protected columns when sent fresh) ran, its error a
/// plain ERROR with the session alive, and with `temp_file_limit` set a
/// stale `FETCH` gave exact lengths one bit per session. `MOVE` (and
/// `FETCH` that skips rows) is now refused over any cursor, and every
/// `FETCH` and `EXECUTE` is taken to output protected columns whatever
/// its analysis saw (refused under `temp_file_limit`, any error ends the
/// session).
#[test]
fn statements_parsed_before_their_cursor_changed_do_not_run_unchecked() {
    let Some(env) = env() else { return };
    let Some((out, text)) = chan_script(env, "proxy_mode_stale.py", "a stale FETCH or MOVE") else {
        return;
    };
    let (fetch, moved) = (&out["fetch"], &out["move"]);
    assert_eq!(fetch["closed"], serde_json::json!(true), "{text}");
    assert!(!fetch.to_string().contains("22012"), "{text}");
    // The MOVE never ran: refused when parsed, so no division by zero.
    assert_eq!(
        moved["errors"],
        serde_json::json!(["42501", "26000"]),
        "{text}"
    );
    // The session goes on after the Bind's 26000 (it ended, in runs under
    // load, before the proxy followed the server's skip to the Sync:
    // `the_rest_of_a_failed_batch_expects_no_answer`).
    assert_eq!(moved["closed"], serde_json::json!(false), "{text}");
    assert_eq!(moved["values"], serde_json::json!(["still here"]), "{text}");
}

/// An extended-protocol message fails, and the client's next messages
/// reach the proxy only after the server's error did (a loaded machine,
/// a slow client): the server discards them up to the Sync, so they get
/// no answer. The proxy expected one for an `Execute` read after the
/// error, and ended the session at the Sync's ReadyForQuery (a test
/// passed or failed with the machine's load). The script waits for the
/// error before it sends the rest, so the order is forced. Also the
/// twelfth review's finding: an error at a `Flush` (a statement timeout
/// the server raises at the next message it reads), which the proxy did
/// not record, desynchronized every later answer; a simple Query inside
/// an unfinished batch is now refused, and a Flush recorded.
#[test]
fn the_rest_of_a_failed_batch_expects_no_answer() {
    let Some(env) = env() else { return };
    let Some((out, text)) = chan_script(env, "proxy_mode_late_sync.py", "a late Sync") else {
        return;
    };
    assert_eq!(
        out["late"]["errors"],
        serde_json::json!(["26000"]),
        "{text}"
    );
    for case in ["query", "refused"] {
        assert_eq!(
            out[case]["errors"],
            serde_json::json!(["26000", "42501"]),
            "{case}: {text}"
        );
    }
    for case in ["late", "query", "refused", "timeout"] {
        assert_eq!(
            out[case]["values"],
            serde_json::json!(["still here"]),
            "{case}: {text}"
        );
    }
    for case in ["late", "query", "refused"] {
        assert_eq!(
            out[case]["closed"],
            serde_json::json!(false),
            "{case}: {text}"
        );
    }
    // The timeout at the Flush (57014), the refused Query, and the
    // protected EXECUTE's failure ending the session (54000), in step.
    assert_eq!(
        out["timeout"]["errors"],
        serde_json::json!(["57014", "42501", "54000"]),
        "{text}"
    );
    assert_eq!(out["timeout"]["closed"], serde_json::json!(true), "{text}");
}

/// An eighth review's finding: a portal of a protocol-level `EXECUTE` or
/// `FETCH` is filled whole the first time it runs, so read in part (an
/// `Execute` with a row limit, or SQL `FETCH 1` of a named portal) it
/// built a padded row the proxy never judged, and the session survived
/// when it fit and ended when the server's 1 GiB limit failed it: exact
/// lengths in one session. Such statements now bind only to the unnamed
/// portal (SQL cannot name it) and execute whole.
#[test]
fn stored_portals_are_never_read_in_part() {
    let Some(env) = env() else { return };
    let Some((out, text)) = chan_script(env, "proxy_mode_stored_portal.py", "a stored portal")
    else {
        return;
    };
    for step in ["row_limit", "named_portal"] {
        assert_eq!(
            out[step]["errors"],
            serde_json::json!(["42501"]),
            "{step}: {text}"
        );
        assert_eq!(out[step]["values"], serde_json::json!([]), "{step}: {text}");
    }
    assert_eq!(out["whole"]["errors"], serde_json::json!([]), "{text}");
    assert_eq!(
        out["whole"]["values"].as_array().map(Vec::len),
        Some(6),
        "{text}"
    );
    assert_eq!(out["closed"], serde_json::json!(false), "{text}");
}

/// A ninth review's finding: with `limits.max_message_bytes` near 1 GiB
/// (PostgreSQL's own row limit), a padded row that fit on the server was
/// sent (its sanitized note made it shorter) and one that did not ended
/// the session: exact lengths. Rows with protected columns are now held
/// to a limit that leaves room for every raw value the sanitizer takes
/// (`engine.max_input_bytes` each), so a row the server would fail is
/// over it by its padding alone. Shown cheaply with an input limit of
/// 1 GiB less 1 MiB: rows with protected columns then get under 1 MiB
/// whatever `max_message_bytes` says, and rows without them do not.
#[test]
fn rows_with_protected_columns_leave_room_for_raw_values() {
    let Some(env) = env() else { return };
    let port = note_rule_proxy(
        env,
        "[limits]\nmax_message_bytes = 1073741824\n[engine]\nmax_input_bytes = 1072693248\n",
    );
    let run = |sql: &str| chan_at(port, &[sql, "SELECT 'still here'"]);
    let out = run("SELECT note, repeat('x', 500000) FROM chan_t WHERE id = 1");
    let tail = &out[out.len().saturating_sub(300)..];
    assert!(
        out.contains("xxxxxxxxxx") && !out.contains("ended early"),
        "{tail}"
    );
    assert!(out.contains("still here"), "{tail}");
    let out = run("SELECT note, repeat('x', 2000000) FROM chan_t WHERE id = 1");
    let tail = &out[out.len().saturating_sub(300)..];
    assert!(out.contains("ended early"), "{tail}");
    assert!(!out.contains("still here"), "{tail}");
    // Without a protected column the configured limit holds.
    let out = run("SELECT id, repeat('x', 2000000) FROM chan_t WHERE id = 1");
    let tail = &out[out.len().saturating_sub(300)..];
    assert!(
        out.contains("xxxxxxxxxx") && !out.contains("ended early"),
        "{tail}"
    );
    assert!(out.contains("still here"), "{tail}");
}

/// A tenth review's finding: a protected value over the engine's input
/// limit ended the session without a message, while a row the server
/// could not build ended it with the proxy's FATAL; with a padding column
/// and `max_message_bytes` near 1 GiB, which of the two came told a long
/// value's exact length. Now a value over the input limit is refused
/// before it is read, and any value the sanitizer cannot take ends the
/// session with the same FATAL.
#[test]
fn a_value_over_the_input_limit_ends_the_session_like_a_row_over_the_limit() {
    let Some(env) = env() else { return };
    let port = note_rule_proxy(env, "[engine]\nmax_input_bytes = 100\n");
    let out = chan_at(port, &["SELECT id, note FROM chan_t ORDER BY id"]);
    assert_no_marker("a value over the input limit", &out);
    // (psql drops the rows before it once the session ends.)
    assert!(out.contains("ended early"), "{out}");
    // An eleventh review's finding: this ending sent the rows held in the
    // batch before the refused value, while a value the sanitizer refused
    // (one over a detection rule's own limit) lost them: which rows came
    // before the FATAL told which limit a value broke. Every ending of a
    // protected result now loses its batch.
    let conninfo = conninfo_at(port);
    let Some(out) = python_client("proxy_mode_batch_end.py", &[&conninfo]) else {
        return;
    };
    assert_eq!(out["values"], serde_json::json!([]), "{out}");
    assert_eq!(out["errors"], serde_json::json!(["54000"]), "{out}");
    assert_eq!(out["closed"], serde_json::json!(true), "{out}");
}
