//! Proxy mode's own work on large results: a cancel stops the proxy's
//! sanitizing of a result the server has already sent (the session goes
//! on).
//!
//! Needs what the other proxy tests need (`DPTEXT_TEST_DB`, `PGHOST`,
//! `PGPORT`, `DPTEXT_PYLIB` for the raw client) and the assets
//! (`DPTEXT_ASSETS`); skipped without the database unless
//! `DPTEXT_REQUIRE_PG=1`.

mod common;

use std::sync::OnceLock;

use common::*;

/// Rows of the cancelled read: far more than the proxy sanitizes in a
/// second, even in a debug build.
const ROWS: usize = 2000;

/// The proxy-mode proxy of these tests (one per test binary): its port.
fn proxy_port(env: &Env) -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        direct(
            no_extension_db(),
            &format!(
                "DROP TABLE IF EXISTS pm_cancel;
                 CREATE TABLE pm_cancel (id int PRIMARY KEY, note text);
                 INSERT INTO pm_cancel
                   SELECT i, 'Seen by {m0} on Monday, visit ' || i || ', called {m1} about results.'
                   FROM generate_series(1, {ROWS}) i;
                 GRANT SELECT ON pm_cancel TO proxy_unlabelled;",
                m0 = MARKERS[0],
                m1 = MARKERS[1],
            ),
        );
        let config = format!(
            "listen = \"127.0.0.1:0\"\nkey = \"a proxy-mode test key, not secret\"\n{}\
             [[user]]\nname = \"pm\"\npassword = \"pm-pw\"\nmasked = true\n\
             upstream_user = \"proxy_unlabelled\"\nupstream_password = \"unlabelled-up-pw\"\n\
             [masking]\nmode = \"proxy\"\nbatch_rows = 20\n\
             [[rule]]\ntable = \"pm_cancel\"\ncolumn = \"note\"\n\
             rule = \"deidentify(strategy => typed_placeholder)\"\n",
            upstream_toml(env, no_extension_db())
        );
        spawn_proxy(&config).0
    })
}

#[test]
fn a_cancel_stops_the_proxys_sanitizing_within_a_second_and_the_session_goes_on() {
    let Some(env) = env() else { return };
    let port = proxy_port(env);
    let conninfo = format!(
        "host=127.0.0.1 port={port} user=pm password=pm-pw dbname={}",
        no_extension_db()
    );
    let sql = "SELECT id, note FROM pm_cancel ORDER BY id";
    let Some(out) = python_client("proxy_mode_cancel.py", &[&conninfo, sql]) else {
        return;
    };
    let text = out.to_string();
    eprintln!("a cancelled read: {text}");
    assert_no_marker("a cancelled read", &text);
    assert_eq!(out["closed"], serde_json::json!(false), "{text}");
    assert_eq!(out["errors"], serde_json::json!(["57014"]), "{text}");
    let to_error = out["to_error"].as_f64().unwrap_or(f64::MAX);
    assert!(
        to_error < 1.0,
        "the error came {to_error} s after the cancel: {text}"
    );
    let to_ready = out["to_ready"].as_f64().unwrap_or(f64::MAX);
    assert!(
        to_ready < 2.0,
        "ReadyForQuery came {to_ready} s after the cancel: {text}"
    );
    let rows = out["before"].as_u64().unwrap_or(0) + out["after"].as_u64().unwrap_or(0);
    assert!(
        rows < ROWS as u64 / 2,
        "{rows} of {ROWS} rows came: the sanitizing went on: {text}"
    );
    assert_eq!(out["then"], serde_json::json!(["42"]), "{text}");
}
