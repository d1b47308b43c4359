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
    for protocol in ["simple", "extended"] {
        let Some(out) = python_client("proxy_mode_cancel.py", &[&conninfo, sql, protocol]) else {
            return;
        };
        check_cancelled(protocol, &out);
    }
}

/// What the raw client read of a cancelled read (`proxy_mode_cancel.py`).
fn check_cancelled(protocol: &str, out: &serde_json::Value) {
    let text = format!("{protocol} protocol: {out}");
    eprintln!("a cancelled read, {text}");
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

/// The size of the one large value read through proxy mode.
const BIG: usize = 200 << 20;

/// The size of each of the values read at once.
const CONCURRENT: usize = 60 << 20;

/// How many sessions read them at once.
const SESSIONS: usize = 4;

/// A proxy-mode proxy running as its own process (the binary, or the one
/// `DPTEXT_PROXY_BIN` names, to measure another build), so that its
/// memory is its own: its process and port. Messages up to 256 MiB.
struct Child {
    process: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Child {
    fn start(env: &Env) -> Child {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("proxy.toml");
        let config = format!(
            "listen = \"127.0.0.1:{port}\"\nkey = \"a proxy-mode test key, not secret\"\n{}\
             [[user]]\nname = \"pm\"\npassword = \"pm-pw\"\nmasked = true\n\
             upstream_user = \"proxy_unlabelled\"\nupstream_password = \"unlabelled-up-pw\"\n\
             [limits]\nmax_message_bytes = {}\n\
             [masking]\nmode = \"proxy\"\n\
             [[rule]]\ntable = \"pm_cancel\"\ncolumn = \"note\"\n\
             rule = \"santext(eps => 2)\"\n",
            upstream_toml(env, no_extension_db()),
            256 << 20
        );
        std::fs::write(&file, config).expect("write");
        let bin = std::env::var("DPTEXT_PROXY_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_dptext-proxy").to_owned());
        let process = std::process::Command::new(bin)
            .arg("-c")
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the proxy's binary");
        let child = Child {
            process,
            port,
            _dir: dir,
        };
        for _ in 0..600 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return child;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("the proxy did not listen within 60 s");
    }

    /// A field of /proc/PID/status, in bytes (VmRSS, VmHWM).
    fn memory(&self, field: &str) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.id()))
            .expect("/proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
            .map(|kb| kb << 10)
            .expect("a memory field")
    }

    /// Its memory now (VmRSS), with its peak (VmHWM) reset to it, so that
    /// the next peak is the next reads' own, not the start-up's (loading
    /// the catalog and the rule's vectors peaks higher than it stays).
    fn rest(&self) -> usize {
        std::fs::write(format!("/proc/{}/clear_refs", self.process.id()), "5")
            .expect("reset the peak (/proc/PID/clear_refs)");
        self.memory("VmRSS")
    }

    /// Reads `sql` through the proxy with psql, the rows thrown away;
    /// whether it worked.
    fn read(&self, sql: &str) -> bool {
        psql_cmd(self.port, no_extension_db(), "pm", "pm-pw")
            .args(["-c", sql])
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

/// The large values, once per test binary.
fn large_values() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        direct(
            no_extension_db(),
            &format!(
                "DROP TABLE IF EXISTS pm_big;
                 CREATE TABLE pm_big (id int PRIMARY KEY, body text);
                 ALTER TABLE pm_big ALTER body SET STORAGE EXTERNAL;
                 INSERT INTO pm_big VALUES (0, repeat('x', {BIG}));
                 INSERT INTO pm_big SELECT i, repeat(chr(96 + i), {CONCURRENT})
                   FROM generate_series(1, {SESSIONS}) i;
                 GRANT SELECT ON pm_big TO proxy_unlabelled;"
            ),
        );
    });
}

const MIB: usize = 1 << 20;

#[test]
fn one_large_unprotected_value_is_streamed_not_held() {
    let Some(env) = env() else { return };
    large_values();
    let proxy = Child::start(env);
    // Its memory at rest, once a session has run (the catalog's, the
    // rule's vectors).
    assert!(proxy.read("SELECT 1"));
    let rest = proxy.rest();
    assert!(proxy.read("SELECT body FROM pm_big WHERE id = 0"));
    let peak = proxy.memory("VmHWM");
    let grew = peak.saturating_sub(rest);
    eprintln!(
        "one {} MiB value: {} MiB at rest, peak {} MiB (+{} MiB)",
        BIG / MIB,
        rest / MIB,
        peak / MIB,
        grew / MIB
    );
    // A row of a result without protected columns is copied to the client
    // a chunk at a time as it is read: the value is never held whole
    // (before, the proxy held the 200 MiB row once: +200 MiB).
    assert!(
        grew < 16 * MIB,
        "a {} MiB value took the proxy from {} MiB to {} MiB",
        BIG / MIB,
        rest / MIB,
        peak / MIB
    );
}

#[test]
fn concurrent_large_unprotected_values_are_streamed_not_held() {
    let Some(env) = env() else { return };
    large_values();
    let proxy = Child::start(env);
    assert!(proxy.read("SELECT 1"));
    let rest = proxy.rest();
    std::thread::scope(|s| {
        let reads: Vec<_> = (1..=SESSIONS)
            .map(|i| {
                let proxy = &proxy;
                s.spawn(move || proxy.read(&format!("SELECT body FROM pm_big WHERE id = {i}")))
            })
            .collect();
        for r in reads {
            assert!(r.join().unwrap_or(false), "a read failed");
        }
    });
    let peak = proxy.memory("VmHWM");
    let grew = peak.saturating_sub(rest);
    eprintln!(
        "{SESSIONS} x {} MiB at once: {} MiB at rest, peak {} MiB (+{} MiB)",
        CONCURRENT / MIB,
        rest / MIB,
        peak / MIB,
        grew / MIB
    );
    // Each session holds a chunk, not its value (before: +212 MiB).
    assert!(
        grew < 32 * MIB,
        "{SESSIONS} values of {} MiB at once took the proxy from {} MiB to {} MiB",
        CONCURRENT / MIB,
        rest / MIB,
        peak / MIB
    );
}

/// Sessions open at once in the memory-return test.
const MANY: usize = 64;

#[test]
fn memory_returns_once_sessions_close() {
    let Some(env) = env() else { return };
    large_values();
    let proxy = Child::start(env);
    assert!(proxy.read("SELECT 1"));
    let rest = proxy.memory("VmRSS");
    let conninfo = format!(
        "host=127.0.0.1 port={} user=pm password=pm-pw dbname={}",
        proxy.port,
        no_extension_db()
    );
    // Each session reads its catalog and sanitized rows, and stays open
    // until all have.
    let sessions: Vec<postgres::Client> = std::thread::scope(|s| {
        let opened: Vec<_> = (0..MANY)
            .map(|i| {
                let conninfo = &conninfo;
                s.spawn(move || {
                    let mut c = postgres::Client::connect(conninfo, postgres::NoTls).ok()?;
                    let sql = format!("SELECT id, note FROM pm_cancel WHERE id > {i} LIMIT 20");
                    c.simple_query(&sql).ok()?;
                    Some(c)
                })
            })
            .collect();
        opened
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect()
    });
    assert_eq!(sessions.len(), MANY, "sessions failed");
    let held = proxy.memory("VmRSS");
    drop(sessions);
    // The allocator gives freed pages back after its decay time (10 s),
    // not all of them (its own caches, the proxy's parse cache): glibc's
    // malloc gave back almost nothing (64 sessions: 50 MiB at rest, 222
    // open, 223 after), jemalloc most (53, 203, 94-121).
    let mut after = held;
    for _ in 0..30 {
        std::thread::sleep(std::time::Duration::from_secs(1));
        after = proxy.memory("VmRSS");
        if after.saturating_sub(rest) < held.saturating_sub(rest) / 4 {
            break;
        }
    }
    eprintln!(
        "{MANY} sessions: {} MiB at rest, {} MiB with them open, {} MiB after they closed",
        rest / MIB,
        held / MIB,
        after / MIB
    );
    assert!(
        after.saturating_sub(rest) < held.saturating_sub(rest) / 2,
        "{MANY} sessions took the proxy from {} to {} MiB; {} MiB after they closed",
        rest / MIB,
        held / MIB,
        after / MIB
    );
}
