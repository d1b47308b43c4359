//! psql as the connecting user, shared by the cross-crate tests
//! (`tests/tests/*.rs`) and the proxy's (`proxy/tests/common`), which
//! include this file with `#[path]`: the server comes from `PGHOST`,
//! `PGPORT` and `PGUSER`, as the test command sets them.

#![allow(dead_code)]

use std::process::Command;

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
