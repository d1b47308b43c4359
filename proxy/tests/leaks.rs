//! The leak battery (`tests/leak_battery.py`, written against a direct
//! connection) run through the proxy, in both modes: a masked proxy user
//! attacks labelled columns through every channel, and no planted marker
//! may come back in any decoding. In database mode its upstream role is
//! the battery's masked role; in proxy mode it is a role with the same
//! grants and no label, so only the proxy's analysis and sanitizing stand
//! in the way.
//!
//! Needs `DPTEXT_TEST_DB`, `PGHOST`, `PGPORT`, `DPTEXT_KEY_FILE` and psycopg
//! 3 on `DPTEXT_PYLIB`; skipped without the database unless
//! `DPTEXT_REQUIRE_PG=1`.

mod common;

use std::process::Command;
use std::sync::Mutex;

use common::*;

/// The battery recreates its fixtures: one run at a time.
static BATTERY: Mutex<()> = Mutex::new(());

/// Runs the battery through a proxy started with `config` (whose masked
/// user is `leaker` / `leaker-pw`), with `mode` (`database` or `proxy`);
/// its output, after checking that nothing leaked. `None` without the
/// test server or psycopg.
fn battery_through(config: &str, mode: &str) -> Option<String> {
    let env = env()?;
    let _one = BATTERY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Ok(pylib) = std::env::var("DPTEXT_PYLIB") else {
        assert!(
            std::env::var("DPTEXT_REQUIRE_PG").as_deref() != Ok("1"),
            "DPTEXT_PYLIB (psycopg) is not set: run scripts/setup.sh"
        );
        return None;
    };
    let battery = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/leak_battery.py");
    assert!(
        std::path::Path::new(battery).is_file(),
        "{battery} is missing"
    );
    let (port, _) = spawn_proxy(config);
    let key_file = std::env::var("DPTEXT_KEY_FILE").unwrap_or_default();
    let out = Command::new("python3")
        .arg(battery)
        .args([
            "--mode",
            mode,
            "--owner-dsn",
            &format!(
                "host={} port={} user=postgres dbname={}",
                env.host, env.pgport, env.db
            ),
            "--key-file",
            &key_file,
            "--masked-dsn",
            &format!(
                "host=127.0.0.1 port={port} user=leaker password=leaker-pw dbname={}",
                env.db
            ),
        ])
        .env("PYTHONPATH", pylib)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains(" 0 failed"),
        "the leak battery failed through the proxy ({mode} mode):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

#[test]
fn the_leak_battery_finds_nothing_through_the_proxy() {
    let Some(env) = env() else { return };
    // The battery creates its role leak_masked (labelled, keyed) before its
    // first masked session; the proxy checks it at every session start.
    let config = format!(
        "{}[[user]]\nname = \"leaker\"\npassword = \"leaker-pw\"\nmasked = true\n\
         upstream_user = \"leak_masked\"\n",
        upstream_toml(env, &env.db)
    );
    battery_through(&config, "database");
}

#[test]
fn the_leak_battery_finds_nothing_through_proxy_mode() {
    let Some(env) = env() else { return };
    // The proxy reads each session's catalog and the labels (dptext.rules)
    // when the session starts, after the battery made its fixtures.
    let config = format!(
        "key = \"a proxy-mode battery key, not secret\"\n{}[[user]]\nname = \"leaker\"\n\
         password = \"leaker-pw\"\nmasked = true\nupstream_user = \"leak_pm\"\n\
         [masking]\nmode = \"proxy\"\n",
        upstream_toml(env, &env.db)
    );
    let Some(stdout) = battery_through(&config, "proxy") else {
        return;
    };
    // It ran the attacks, not only the set-up.
    assert!(stdout.matches("\nok ").count() > 40, "{stdout}");
}
