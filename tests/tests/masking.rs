//! Masking at the source, against the real server the test command starts:
//! the leak battery (`tests/leak_battery.py`) run by a role labelled
//! `MASKED` directly, the plan invariant (`tests/plan_invariant.py`: no
//! raw labelled value leaves the scan that reads it, in any plan shape the
//! planner's settings can force) over its statements, `pg_dump` run as
//! that role, and the computed-once store (`tests/store_check.py`).
//!
//! Needs `DPTEXT_TEST_DB`, `PGHOST`, `PGPORT`, `DPTEXT_KEY_FILE` (a key file
//! the server can read) and psycopg 3 on `DPTEXT_PYLIB`; skipped without
//! the database unless `DPTEXT_REQUIRE_PG=1`.

use std::process::Command;

struct Env {
    dsn: String,
    key_file: String,
    pylib: String,
}

fn env() -> Option<Env> {
    let Ok(db) = std::env::var("DPTEXT_TEST_DB") else {
        assert!(
            std::env::var("DPTEXT_REQUIRE_PG").as_deref() != Ok("1"),
            "DPTEXT_REQUIRE_PG=1 but DPTEXT_TEST_DB is not set"
        );
        eprintln!("skipping: DPTEXT_TEST_DB not set (scripts/test.sh sets it)");
        return None;
    };
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into());
    let port = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
    Some(Env {
        dsn: format!("host={host} port={port} user=postgres dbname={db}"),
        key_file: std::env::var("DPTEXT_KEY_FILE")
            .expect("DPTEXT_KEY_FILE is set with DPTEXT_TEST_DB"),
        pylib: std::env::var("DPTEXT_PYLIB").unwrap_or_default(),
    })
}

const MARKERS: [&str; 4] = ["zebediah", "quincewhistle", "pennyfeather", "brambleworth"];

/// Runs one of this folder's Python checks against the test database and
/// asserts it passed, with its summary line: `N passed, 0 failed`.
fn run_check(env: &Env, script: &str, extra: &[&str]) {
    let out = Command::new("python3")
        .arg(format!("{}/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(["--owner-dsn", &env.dsn, "--key-file", &env.key_file])
        .args(extra)
        .env("PYTHONPATH", &env.pylib)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" 0 failed"), "no summary line: {stdout}");
}

/// The computed-once store: stored outputs equal computed ones for every
/// model-based rule, a changed rule, key or value is never served an old
/// entry, warm and prune work, masked sessions cannot reach the store.
#[test]
fn model_rules_are_computed_once_and_served_correctly() {
    let Some(env) = env() else { return };
    run_check(&env, "store_check.py", &[]);
}

#[test]
fn masked_role_leaks_nothing_through_any_channel_directly() {
    let Some(env) = env() else { return };
    run_check(&env, "leak_battery.py", &[]);
    // Every plan of the battery's statements and of the invariant's own,
    // under every planner profile (run after the battery: it walks the
    // battery's fixtures too).
    run_check(&env, "plan_invariant.py", &["--battery"]);

    // pg_dump reads table data through COPY: as the masked role it dumps
    // sanitized values (run after the battery, which made the fixtures).
    let db = std::env::var("DPTEXT_TEST_DB").unwrap_or_default();
    let dump = Command::new("pg_dump")
        .args([
            "--data-only",
            "-t",
            "leak_t",
            "-t",
            "leak_p1",
            "-U",
            "leak_masked",
            "-d",
            &db,
        ])
        .output()
        .expect("pg_dump runs");
    let text = String::from_utf8_lossy(&dump.stdout).to_lowercase();
    assert!(
        dump.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    assert!(
        text.contains("copy public.leak_t"),
        "the dump has no data: {text}"
    );
    for m in MARKERS {
        assert!(
            !text.contains(m),
            "pg_dump as the masked role dumped {m}:\n{text}"
        );
    }
    // The owner's dump has them: the check above can fail.
    let raw = Command::new("pg_dump")
        .args(["--data-only", "-t", "leak_t", "-U", "postgres", "-d", &db])
        .output()
        .expect("pg_dump runs");
    assert!(String::from_utf8_lossy(&raw.stdout)
        .to_lowercase()
        .contains(MARKERS[1]));
}
