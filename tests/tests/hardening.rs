//! Masking's hardening across sessions, against the real server the test
//! command starts: a label change waits for the transactions that planned
//! under the old labels (a prepared statement, a PL/pgSQL loop, a
//! partition read directly, a role labelled while its transaction is
//! open), and a masked session gets no server log message (whose figures,
//! such as `trace_sort`'s memory, depend on raw values).
//!
//! Each test drives interactive psql processes (one per session) over
//! pipes. Needs `DPTEXT_TEST_DB` (with the extension), `PGHOST`, `PGPORT`
//! and `DPTEXT_KEY_FILE` (a key file the server can read); skipped without
//! the database unless `DPTEXT_REQUIRE_PG=1`.

#[path = "../common/psql.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use common::{database, psql, psql_error};

/// How long one statement may take before the test fails (a session that
/// should not wait, or a wait that never ends).
const STATEMENT_LIMIT: Duration = Duration::from_secs(60);

/// A marker no test row or masked text contains.
const MARKER: &str = "ZQXMARKER7";

/// An interactive psql session: statements are written to its standard
/// input, its output (standard error too: notices, errors) read back.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    sent: u32,
    done: u32,
}

impl Session {
    /// A session of `user` on `db`, named `name` in `pg_stat_activity`.
    fn new(db: &str, user: &str, name: &str) -> Session {
        let mut child = Command::new("sh")
            .args([
                "-c",
                "exec psql -X -A -t -q -v VERBOSITY=verbose \"$@\" 2>&1",
                "sh",
                "-d",
                db,
                "-U",
                user,
            ])
            .env("PGAPPNAME", name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("psql runs");
        let stdin = child.stdin.take().expect("psql's standard input");
        let stdout = child.stdout.take().expect("psql's standard output");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Session {
            child,
            stdin,
            lines,
            sent: 0,
            done: 0,
        }
    }

    /// Sends `sql` without waiting for it to finish.
    fn send(&mut self, sql: &str) {
        self.sent += 1;
        writeln!(self.stdin, "{sql}\n\\echo __hardening_done_{}__", self.sent)
            .and_then(|()| self.stdin.flush())
            .expect("psql reads its input");
    }

    /// Waits for everything sent to finish; returns what it printed.
    fn finish(&mut self) -> String {
        let mut out = Vec::new();
        let deadline = Instant::now() + STATEMENT_LIMIT;
        while self.done < self.sent {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "psql did not finish within {STATEMENT_LIMIT:?}; so far:\n{}",
                    out.join("\n")
                )
            });
            if line == format!("__hardening_done_{}__", self.done + 1) {
                self.done += 1;
            } else {
                out.push(line);
            }
        }
        out.join("\n")
    }

    /// Runs `sql` and returns what it printed.
    fn run(&mut self, sql: &str) -> String {
        self.send(sql);
        self.finish()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test database, and the key file masked roles read under.
fn setup() -> Option<(String, String)> {
    let db = database()?;
    let key = std::env::var("DPTEXT_KEY_FILE").expect("DPTEXT_KEY_FILE is set with DPTEXT_TEST_DB");
    Some((db, key))
}

/// Creates login role `role` (again, if it exists) with the key file, and
/// labels it `MASKED` when `masked`.
fn login_role(db: &str, key: &str, role: &str, masked: bool) {
    let label = if masked { "'MASKED'" } else { "NULL" };
    psql(
        db,
        &format!(
            "DO $$ BEGIN
               IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN
                 EXECUTE 'DROP OWNED BY {role} CASCADE; DROP ROLE {role}';
               END IF;
             END $$;
             CREATE ROLE {role} LOGIN;
             ALTER ROLE {role} SET dptext.key_file = '{key}';
             SECURITY LABEL FOR dptext ON ROLE {role} IS {label};"
        ),
        true,
    );
}

/// Waits until the session named `name` waits for a lock: true when it
/// does within a few seconds, false when it never does (it finished its
/// statements without waiting).
fn waits_for_lock(db: &str, name: &str) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let state = psql(
            db,
            &format!(
                "SELECT coalesce(max(CASE WHEN wait_event_type = 'Lock' THEN 'waiting' ELSE state END), 'none')
                   FROM pg_stat_activity WHERE application_name = '{name}'"
            ),
            true,
        );
        match state.trim() {
            "waiting" => return true,
            "idle" if started.elapsed() > Duration::from_secs(2) => return false,
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    false
}

/// A column label set while a masked session's transaction holds a plan
/// made before it: the label waits for that transaction, so the plan
/// never serves a row inserted after the label (raw), and the next
/// transaction reads the column masked.
#[test]
fn a_column_label_waits_for_the_transactions_that_planned_before_it() {
    let Some((db, key)) = setup() else { return };
    login_role(&db, &key, "hd_masked_a", true);
    psql(
        &db,
        "DROP TABLE IF EXISTS hd_late;
         CREATE TABLE hd_late (id int, note text);
         INSERT INTO hd_late VALUES (1, 'harmless old row about the weather and the garden today');
         GRANT SELECT ON hd_late TO hd_masked_a;",
        true,
    );
    let mut s = Session::new(&db, "hd_masked_a", "hd_reader_a");
    let before = s.run(
        "BEGIN;
         PREPARE p AS SELECT id, note FROM hd_late ORDER BY id;
         EXECUTE p;",
    );
    assert!(
        before.contains("harmless old row about the weather and the garden today"),
        "{before}"
    );

    let mut admin = Session::new(&db, "postgres", "hd_admin_a");
    admin.send(&format!(
        "SECURITY LABEL FOR dptext ON COLUMN hd_late.note IS 'MASKED WITH santext(eps => 3)';
         INSERT INTO hd_late VALUES (2, 'Patient {MARKER} secret');"
    ));
    let waited = waits_for_lock(&db, "hd_admin_a");
    let same_transaction = s.run("EXECUTE p;");
    assert!(
        !same_transaction.contains(MARKER),
        "the plan made before the label served the new row raw: {same_transaction}"
    );
    assert!(waited, "the label did not wait for the open transaction");
    s.run("COMMIT;");
    let labelled = admin.finish();
    assert!(!labelled.contains("ERROR"), "{labelled}");
    let after = s.run("EXECUTE p;");
    assert_eq!(after.lines().count(), 2, "{after}");
    assert!(
        !after.contains(MARKER)
            && !after.contains("harmless old row about the weather and the garden today"),
        "the next transaction read the column raw: {after}"
    );
    drop(s);
    psql(&db, "DROP TABLE hd_late; DROP ROLE hd_masked_a", true);
}

/// A label on a partitioned table's column changes the rules of every
/// partition: it waits for a transaction that read a partition directly.
#[test]
fn a_label_on_a_parent_waits_for_readers_of_its_partitions() {
    let Some((db, key)) = setup() else { return };
    login_role(&db, &key, "hd_masked_b", true);
    psql(
        &db,
        "DROP TABLE IF EXISTS hd_parts;
         CREATE TABLE hd_parts (id int, note text) PARTITION BY LIST (id);
         CREATE TABLE hd_parts_1 PARTITION OF hd_parts FOR VALUES IN (1, 2);
         INSERT INTO hd_parts VALUES (1, 'harmless old row about the weather and the garden today');
         GRANT SELECT ON hd_parts, hd_parts_1 TO hd_masked_b;",
        true,
    );
    let mut s = Session::new(&db, "hd_masked_b", "hd_reader_b");
    let before = s.run(
        "BEGIN;
         PREPARE p AS SELECT id, note FROM hd_parts_1 ORDER BY id;
         EXECUTE p;",
    );
    assert!(
        before.contains("harmless old row about the weather and the garden today"),
        "{before}"
    );
    let mut admin = Session::new(&db, "postgres", "hd_admin_b");
    admin.send(&format!(
        "SECURITY LABEL FOR dptext ON COLUMN hd_parts.note IS 'MASKED WITH santext(eps => 3)';
         INSERT INTO hd_parts VALUES (2, 'Patient {MARKER} secret');"
    ));
    let waited = waits_for_lock(&db, "hd_admin_b");
    let same_transaction = s.run("EXECUTE p;");
    assert!(
        !same_transaction.contains(MARKER),
        "the partition's plan served the new row raw: {same_transaction}"
    );
    assert!(
        waited,
        "the parent's label did not wait for the partition's reader"
    );
    s.run("COMMIT;");
    admin.finish();
    let after = s.run("EXECUTE p;");
    assert!(!after.contains(MARKER), "{after}");
    drop(s);
    psql(&db, "DROP TABLE hd_parts; DROP ROLE hd_masked_b", true);
}

/// A PL/pgSQL loop reuses its plan for the whole statement: a label set
/// meanwhile waits for the loop to end, and no iteration reads a row
/// inserted after the label raw.
#[test]
fn a_label_waits_for_a_running_plpgsql_loop() {
    let Some((db, key)) = setup() else { return };
    login_role(&db, &key, "hd_masked_c", true);
    psql(
        &db,
        "DROP TABLE IF EXISTS hd_loop;
         CREATE TABLE hd_loop (id int, note text);
         INSERT INTO hd_loop VALUES (1, 'harmless old row about the weather and the garden today');
         GRANT SELECT ON hd_loop TO hd_masked_c;",
        true,
    );
    let mut s = Session::new(&db, "hd_masked_c", "hd_reader_c");
    s.send(
        "DO $$ DECLARE v text; BEGIN
           FOR i IN 1..6 LOOP
             SELECT string_agg(note, ' | ') INTO v FROM hd_loop;
             RAISE NOTICE 'iteration %: %', i, v;
             PERFORM pg_sleep(0.5);
           END LOOP; END $$;",
    );
    std::thread::sleep(Duration::from_millis(1200));
    let mut admin = Session::new(&db, "postgres", "hd_admin_c");
    admin.send(&format!(
        "SECURITY LABEL FOR dptext ON COLUMN hd_loop.note IS 'MASKED WITH santext(eps => 3)';
         INSERT INTO hd_loop VALUES (2, 'Patient {MARKER} secret');"
    ));
    let waited = waits_for_lock(&db, "hd_admin_c");
    let notices = s.finish();
    assert!(notices.contains("iteration 6"), "{notices}");
    assert!(
        !notices.contains(MARKER),
        "an iteration read the row inserted after the label raw: {notices}"
    );
    assert!(waited, "the label did not wait for the loop");
    admin.finish();
    drop(s);
    psql(&db, "DROP TABLE hd_loop; DROP ROLE hd_masked_c", true);
}

/// A role labelled `MASKED` while its transaction is open: the label waits
/// for that transaction (whose plans were made unmasked), and the role's
/// next transaction is masked.
#[test]
fn a_role_label_waits_for_the_roles_open_transaction() {
    let Some((db, key)) = setup() else { return };
    login_role(&db, &key, "hd_late_d", false);
    psql(
        &db,
        "DROP TABLE IF EXISTS hd_secrets;
         CREATE TABLE hd_secrets (id int, note text);
         INSERT INTO hd_secrets VALUES (1, 'an old note about the weather and the garden today');
         SECURITY LABEL FOR dptext ON COLUMN hd_secrets.note IS 'MASKED WITH santext(eps => 3)';
         GRANT SELECT ON hd_secrets TO hd_late_d;",
        true,
    );
    let mut s = Session::new(&db, "hd_late_d", "hd_reader_d");
    let before = s.run(
        "BEGIN;
         PREPARE p AS SELECT id, note FROM hd_secrets ORDER BY id;
         EXECUTE p;",
    );
    assert!(
        before.contains("an old note about the weather"),
        "not labelled yet: {before}"
    );
    let mut admin = Session::new(&db, "postgres", "hd_admin_d");
    admin.send(&format!(
        "SECURITY LABEL FOR dptext ON ROLE hd_late_d IS 'MASKED';
         INSERT INTO hd_secrets VALUES (100, 'New admission {MARKER} after labelling');"
    ));
    let waited = waits_for_lock(&db, "hd_admin_d");
    let same_transaction = s.run("EXECUTE p;");
    assert!(
        !same_transaction.contains(MARKER),
        "the unmasked plan served a row inserted after the role's label: {same_transaction}"
    );
    assert!(
        waited,
        "the role's label did not wait for its open transaction"
    );
    s.run("COMMIT;");
    admin.finish();
    let after = s.run("EXECUTE p; SELECT dptext.session_masking()->>'masked';");
    assert!(
        !after.contains(MARKER)
            && !after.contains("an old note about the weather")
            && after.ends_with("true"),
        "the next transaction is not masked: {after}"
    );
    drop(s);
    psql(
        &db,
        "DROP TABLE hd_secrets; DROP OWNED BY hd_late_d; DROP ROLE hd_late_d",
        true,
    );
}

/// What waiting means for the one who labels: `lock_timeout` bounds it,
/// as for `ALTER TABLE` (SQLSTATE 55P03).
#[test]
fn a_label_change_obeys_lock_timeout() {
    let Some((db, key)) = setup() else { return };
    login_role(&db, &key, "hd_masked_e", true);
    psql(
        &db,
        "DROP TABLE IF EXISTS hd_timeout;
         CREATE TABLE hd_timeout (id int, note text);
         GRANT SELECT ON hd_timeout TO hd_masked_e;",
        true,
    );
    let mut s = Session::new(&db, "hd_masked_e", "hd_reader_e");
    s.run("BEGIN; SELECT count(*) FROM hd_timeout;");
    let err = psql_error(
        &db,
        "SET lock_timeout = '300ms';
         SECURITY LABEL FOR dptext ON COLUMN hd_timeout.note IS 'MASKED WITH santext(eps => 3)'",
    );
    assert!(err.contains("55P03"), "{err}");
    let err = psql_error(
        &db,
        "SET lock_timeout = '300ms'; SECURITY LABEL FOR dptext ON ROLE hd_masked_e IS NULL",
    );
    assert!(err.contains("55P03"), "{err}");
    s.run("COMMIT;");
    psql(
        &db,
        "SECURITY LABEL FOR dptext ON COLUMN hd_timeout.note IS 'MASKED WITH santext(eps => 3)'",
        true,
    );
    drop(s);
    psql(&db, "DROP TABLE hd_timeout; DROP ROLE hd_masked_e", true);
}

/// Server log messages report figures of raw values (`trace_sort`: the
/// memory a sort used, the sort holding the raw column): a masked session
/// never gets them, whatever its `client_min_messages`; an unmasked one
/// does.
#[test]
fn masked_sessions_get_no_server_log_messages() {
    let Some((db, key)) = setup() else { return };
    login_role(&db, &key, "hd_masked_f", true);
    login_role(&db, &key, "hd_plain_f", false);
    psql(
        &db,
        "DROP TABLE IF EXISTS hd_sorted;
         CREATE TABLE hd_sorted AS SELECT g AS id, repeat('word ', g) AS note FROM generate_series(1, 100) g;
         SECURITY LABEL FOR dptext ON COLUMN hd_sorted.note IS 'MASKED WITH santext(eps => 3)';
         GRANT SELECT ON hd_sorted TO hd_masked_f, hd_plain_f;",
        true,
    );
    let sort = "SET client_min_messages = log; SET trace_sort = on;
                SELECT length(note) FROM (SELECT note FROM hd_sorted ORDER BY id DESC LIMIT 50) s LIMIT 1;";
    let unmasked = Session::new(&db, "hd_plain_f", "hd_plain_f").run(sort);
    assert!(
        unmasked.contains("LOG:"),
        "no log message to compare with: {unmasked}"
    );
    let masked = Session::new(&db, "hd_masked_f", "hd_masked_f").run(sort);
    assert!(
        !masked.contains("LOG:"),
        "a masked session got server log messages: {masked}"
    );
    psql(
        &db,
        "DROP TABLE hd_sorted; DROP ROLE hd_masked_f; DROP ROLE hd_plain_f",
        true,
    );
}
