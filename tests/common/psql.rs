//! psql as the connecting user, shared by the cross-crate tests
//! (`tests/tests/*.rs`) and the proxy's (`proxy/tests/common`), which
//! include this file with `#[path]`: the server comes from `PGHOST`,
//! `PGPORT` and `PGUSER`, as the test command sets them.

#![allow(dead_code)]

use std::process::Command;

/// `DPTEXT_TEST_DB`, the test database (UTF8, with the extension), or
/// `None` to skip the test; a panic instead when `DPTEXT_REQUIRE_PG=1`.
pub fn database() -> Option<String> {
    match std::env::var("DPTEXT_TEST_DB") {
        Ok(db) if !db.is_empty() => Some(db),
        _ => {
            assert!(
                std::env::var("DPTEXT_REQUIRE_PG").as_deref() != Ok("1"),
                "DPTEXT_REQUIRE_PG=1 but DPTEXT_TEST_DB is not set"
            );
            eprintln!("skipping: DPTEXT_TEST_DB not set (scripts/test.sh sets it)");
            None
        }
    }
}

/// Runs `sql` with psql on `db` (`-X -A -t`, `ON_ERROR_STOP`; `-q` when
/// `quiet`, which drops command tags such as `SET`) and returns its
/// standard output as is; panics with psql's standard error on any error.
pub fn psql(db: &str, sql: &str, quiet: bool) -> String {
    let mut c = Command::new("psql");
    c.arg("-X");
    if quiet {
        c.arg("-q");
    }
    let out = c
        .args(["-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `sql` with psql on `db` (`-X`, `ON_ERROR_STOP`, verbose errors,
/// which carry the SQLSTATE) where it must fail; returns psql's standard
/// error and panics if it succeeded.
pub fn psql_error(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose"])
        .args(["-d", db, "-c", sql])
        .output()
        .expect("psql runs");
    assert!(
        !out.status.success(),
        "psql succeeded on {sql:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}
