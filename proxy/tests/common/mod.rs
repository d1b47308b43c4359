//! What the proxy's integration tests share: the fixture in the test
//! database (tables, labels, and the upstream roles the proxy logs in as),
//! proxies started in the test process, and psql through them or directly.
//!
//! Needs the server the test command starts (`DPTEXT_TEST_DB`, `PGHOST`,
//! `PGPORT`, and `DPTEXT_KEY_FILE`, the key file its masked roles get with
//! `ALTER ROLE r SET dptext.key_file`); skipped without it unless
//! `DPTEXT_REQUIRE_PG=1`.

#![allow(dead_code)]

use std::process::Command;
use std::sync::OnceLock;

#[path = "../../../tests/common/psql.rs"]
mod psql;

/// Values planted in the table; none may come back raw to a masked user.
pub const MARKERS: [&str; 3] = [
    "Zebediah Quincewhistle",
    "Marmaduke Pennyfeather",
    "Octavia Brambleworth",
];

/// A database of the tests' own beside `DPTEXT_TEST_DB`, named after it
/// (`<DPTEXT_TEST_DB>_<suffix>`): two checkouts that test against one
/// server under different `DPTEXT_TEST_DB` names never share one.
pub fn side_db(suffix: &str) -> String {
    let base = std::env::var("DPTEXT_TEST_DB").unwrap_or_else(|_| "dptext_proxy".into());
    format!("{base}_{suffix}")
}

/// A database without the extension, for the refusal tests and proxy
/// mode (`<DPTEXT_TEST_DB>_noext`).
pub fn no_extension_db() -> &'static str {
    static DB: OnceLock<String> = OnceLock::new();
    DB.get_or_init(|| side_db("noext"))
}

/// The test database and the main proxy.
pub struct Env {
    /// `DPTEXT_TEST_DB`.
    pub db: String,
    /// The server's host (a unix-socket directory) and port.
    pub host: String,
    /// Its port.
    pub pgport: String,
    /// The main proxy's port.
    pub port: u16,
    /// Its metrics port.
    pub metrics_port: u16,
}

/// The upstream roles the fixture creates (cluster-wide, kept between
/// runs), and their passwords (the test cluster trusts local connections,
/// so they are set but not checked).
pub const ROLES: [(&str, &str); 6] = [
    // Labelled MASKED, SELECT on the test tables.
    ("proxy_masked", "masked-up-pw"),
    // Not masked; reads and writes the test tables.
    ("proxy_admin", "admin-up-pw"),
    // Not labelled, SELECT on the test tables.
    ("proxy_unlabelled", "unlabelled-up-pw"),
    // Labelled MASKED, but its sessions have no key (no dptext.key_file).
    ("proxy_nokey", "nokey-up-pw"),
    // Labelled MASKED, may write a scratch table.
    ("proxy_writer", "writer-up-pw"),
    // Labelled MASKED, for the binary's own tests.
    ("proxy_masked2", "masked2-up-pw"),
];

/// The `[[user]]` sections of the main proxy: client user, client
/// password, masked, upstream role, upstream password.
pub fn users_toml() -> String {
    [
        ("analyst", true, "proxy_masked", "masked-up-pw"),
        ("admin", false, "proxy_admin", "admin-up-pw"),
        ("unlabelled", true, "proxy_unlabelled", "unlabelled-up-pw"),
        ("nokey", true, "proxy_nokey", "nokey-up-pw"),
        ("ghost", true, "proxy_no_such_role", "x"),
    ]
    .iter()
    .map(|(name, masked, role, pw)| {
        format!(
            "[[user]]\nname = \"{name}\"\npassword = \"{name}-pw\"\nmasked = {masked}\n\
             upstream_user = \"{role}\"\nupstream_password = \"{pw}\"\n"
        )
    })
    .collect()
}

/// The `[upstream]` section for database `db`.
pub fn upstream_toml(env: &Env, db: &str) -> String {
    format!(
        "[upstream]\nhost = \"{}\"\nport = {}\ndbname = \"{db}\"\n",
        env.host, env.pgport
    )
}

fn fixture(db: &str, key_file: &str) {
    let roles: String = ROLES
        .iter()
        .map(|(r, pw)| {
            format!(
                "IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{r}') THEN CREATE ROLE {r} LOGIN; END IF;\n\
                 ALTER ROLE {r} PASSWORD '{pw}';\n"
            )
        })
        .collect();
    direct(
        db,
        &format!(
            "DO $$BEGIN\n{roles}END$$;
             DROP TABLE IF EXISTS proxy_t, proxy_scratch CASCADE;
             CREATE TABLE proxy_t (id int PRIMARY KEY, note text, code varchar(40), n int);
             INSERT INTO proxy_t VALUES
               (1, 'Seen by {m0} on Monday.', 'plain code one', 10),
               (2, 'Called {m1} about results.', 'plain code two', 20),
               (3, 'Letter from {m2}.', NULL, 30);
             SECURITY LABEL FOR dptext ON COLUMN proxy_t.note IS 'MASKED WITH santext(eps => 2)';
             CREATE VIEW proxy_v AS SELECT id, note FROM proxy_t;
             CREATE TABLE proxy_scratch (x int);
             SECURITY LABEL FOR dptext ON ROLE proxy_masked IS 'MASKED';
             SECURITY LABEL FOR dptext ON ROLE proxy_masked2 IS 'MASKED';
             SECURITY LABEL FOR dptext ON ROLE proxy_nokey IS 'MASKED';
             SECURITY LABEL FOR dptext ON ROLE proxy_writer IS 'MASKED';
             SECURITY LABEL FOR dptext ON ROLE proxy_unlabelled IS NULL;
             SECURITY LABEL FOR dptext ON ROLE proxy_admin IS NULL;
             ALTER ROLE proxy_masked SET dptext.key_file = '{key_file}';
             ALTER ROLE proxy_masked2 SET dptext.key_file = '{key_file}';
             ALTER ROLE proxy_writer SET dptext.key_file = '{key_file}';
             ALTER ROLE proxy_unlabelled SET dptext.key_file = '{key_file}';
             ALTER ROLE proxy_nokey RESET ALL;
             GRANT SELECT ON proxy_t, proxy_v TO proxy_masked, proxy_masked2, proxy_unlabelled, proxy_nokey, proxy_writer;
             GRANT ALL ON proxy_t, proxy_v TO proxy_admin;
             GRANT INSERT ON proxy_scratch TO proxy_writer;",
            m0 = MARKERS[0],
            m1 = MARKERS[1],
            m2 = MARKERS[2],
        ),
    );
    let have = direct(
        "postgres",
        &format!(
            "SELECT count(*) FROM pg_database WHERE datname = '{}'",
            no_extension_db()
        ),
    );
    if have.trim() == "0" {
        direct(
            "postgres",
            &format!("CREATE DATABASE {}", no_extension_db()),
        );
    }
}

/// The fixture and the main proxy, once per test binary; `None` when no
/// test server is configured.
pub fn env() -> Option<&'static Env> {
    static ENV: OnceLock<Option<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let db = match std::env::var("DPTEXT_TEST_DB") {
            Ok(db) => db,
            Err(_) => {
                assert!(
                    std::env::var("DPTEXT_REQUIRE_PG").as_deref() != Ok("1"),
                    "DPTEXT_REQUIRE_PG=1 but DPTEXT_TEST_DB is not set"
                );
                return None;
            }
        };
        let key_file = std::env::var("DPTEXT_KEY_FILE")
            .expect("DPTEXT_KEY_FILE (the cluster's key file) is set with DPTEXT_TEST_DB");
        fixture(&db, &key_file.replace('\'', "''"));
        let mut env = Env {
            db,
            host: std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into()),
            pgport: std::env::var("PGPORT").unwrap_or_else(|_| "5432".into()),
            port: 0,
            metrics_port: 0,
        };
        let config = format!(
            "listen = \"127.0.0.1:0\"\nkey = \"a proxy test key, not a secret\"\n{}{}\
             [limits]\nmax_message_bytes = 100000\n",
            upstream_toml(&env, &env.db),
            users_toml()
        );
        (env.port, env.metrics_port) = spawn_proxy(&config);
        Some(env)
    })
    .as_ref()
}

/// Starts a proxy for the TOML `config` in this process, on a free port,
/// with a metrics endpoint; (proxy port, metrics port).
pub fn spawn_proxy(config: &str) -> (u16, u16) {
    let (port, metrics, _) = start_proxy(config);
    (port, metrics)
}

/// As [`spawn_proxy`], with the proxy itself, to reload it or look at its
/// slots.
pub fn start_proxy(config: &str) -> (u16, u16, std::sync::Arc<dptext_proxy::Proxy>) {
    // The proxy's logs on stderr with DPTEXT_LOG (e.g. dptext_proxy=debug),
    // as the binary; shown for failing tests.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("DPTEXT_LOG"))
        .with_writer(std::io::stderr)
        .try_init();
    let config = dptext_proxy::config::Config::parse(config).expect("config");
    config.validate().expect("valid");
    dptext_proxy::tls::check(&config).expect("TLS files load");
    let proxy = dptext_proxy::Proxy::new(config).expect("proxy");
    let serving = proxy.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async move {
            let bind = || tokio::net::TcpListener::bind("127.0.0.1:0");
            let listener = bind().await.expect("bind");
            let metrics = bind().await.expect("bind");
            let port = |l: &tokio::net::TcpListener| l.local_addr().expect("addr").port();
            tx.send((port(&listener), port(&metrics))).expect("send");
            tokio::spawn(dptext_proxy::metrics::serve(metrics));
            let _ = dptext_proxy::serve(listener, serving).await;
        });
    });
    let (port, metrics) = rx.recv().expect("proxy ports");
    (port, metrics, proxy)
}

/// psql as the superuser, on `db`; stdout, and a panic on any error.
pub fn direct(db: &str, sql: &str) -> String {
    psql::psql(db, sql, false)
}

/// psql (`-X -A -t`) through the proxy listening on `port`, as `user`.
pub fn psql_cmd(port: u16, db: &str, user: &str, password: &str) -> Command {
    let mut c = Command::new("psql");
    c.args([
        "-X",
        "-A",
        "-t",
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        user,
        "-d",
        db,
    ])
    .env("PGPASSWORD", password)
    .env_remove("PGOPTIONS")
    .env_remove("PGAPPNAME");
    c
}

/// stdout then stderr, as text.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One psql session through the proxy at `port`: it runs `SELECT
/// 'started'` (so the session has read its catalog), waits `wait`, then
/// `between` runs (objects created upstream mid-session), then `sql`.
/// Returns stdout and stderr.
pub fn psql_mid_session(
    port: u16,
    db: &str,
    user: &str,
    password: &str,
    wait: std::time::Duration,
    between: impl FnOnce(),
    sql: &str,
) -> String {
    use std::io::Write;
    let mut child = psql_cmd(port, db, user, password)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "SELECT 'started';").expect("write");
    stdin.flush().expect("flush");
    std::thread::sleep(wait);
    between();
    writeln!(stdin, "{sql}").expect("write");
    drop(stdin);
    text(&child.wait_with_output().expect("psql"))
}

/// stdout and stderr of psql through the main proxy as `user`.
pub fn via(env: &Env, user: &str, sql: &str) -> String {
    let out = psql_cmd(env.port, &env.db, user, &format!("{user}-pw"))
        .args(["-c", sql])
        .output()
        .expect("psql");
    text(&out)
}

/// psql (`-X -A -t`) connected directly (unix socket) as `role` to `db`.
pub fn direct_cmd(env: &Env, db: &str, role: &str) -> Command {
    let mut c = Command::new("psql");
    c.args(["-X", "-A", "-t", "-h", &env.host, "-p", &env.pgport])
        .args(["-U", role, "-d", db])
        .env_remove("PGOPTIONS")
        .env_remove("PGAPPNAME");
    c
}

/// stdout and stderr of psql connected directly (unix socket) as `role`.
pub fn direct_as(env: &Env, role: &str, sql: &str) -> String {
    let out = direct_cmd(env, &env.db, role)
        .args(["-c", sql])
        .output()
        .expect("psql");
    text(&out)
}

/// No part of any marker, in any letter case, is in `out`.
pub fn assert_no_marker(what: &str, out: &str) {
    let lower = out.to_lowercase();
    for m in MARKERS {
        for part in m.split(' ') {
            assert!(
                !lower.contains(&part.to_lowercase()),
                "{what}: raw value {part:?} came back:\n{out}"
            );
        }
    }
}

/// `out`, what `sql` got through a masked proxy-mode session, is a
/// refusal by `rule`, without a raw protected value.
pub fn assert_refused_by(rule: &str, sql: &str, out: &str) {
    assert!(
        out.contains(&format!("statement refused ({rule})")),
        "{sql}: expected a refusal by {rule}:\n{out}"
    );
    assert_no_marker(sql, out);
}

/// Runs psycopg_client.py against `conninfo`; `None` without psycopg
/// (`DPTEXT_PYLIB`), which `DPTEXT_REQUIRE_PG=1` makes an error.
pub fn psycopg(conninfo: &str) -> Option<serde_json::Value> {
    python_client("psycopg_client.py", &[conninfo])
}

/// Runs sqlalchemy_client.py (SQLAlchemy and pandas) as `user` with
/// `password` (may be empty) on `host` (a name or a unix-socket
/// directory), `port` and `db`; `None` without `DPTEXT_PYLIB`, which
/// `DPTEXT_REQUIRE_PG=1` makes an error.
pub fn sqlalchemy(
    user: &str,
    password: &str,
    host: &str,
    port: &str,
    db: &str,
) -> Option<serde_json::Value> {
    python_client("sqlalchemy_client.py", &[user, password, host, port, db])
}

/// Runs the Python script `script` of this folder with `args`, with
/// `DPTEXT_PYLIB` (what scripts/setup.sh installs) on its path, and parses
/// what it prints as JSON; `None` without `DPTEXT_PYLIB`, which
/// `DPTEXT_REQUIRE_PG=1` makes an error.
pub fn python_client(script: &str, args: &[&str]) -> Option<serde_json::Value> {
    let Ok(pylib) = std::env::var("DPTEXT_PYLIB") else {
        assert!(
            std::env::var("DPTEXT_REQUIRE_PG").as_deref() != Ok("1"),
            "DPTEXT_PYLIB (psycopg, SQLAlchemy, pandas) is not set: run scripts/setup.sh"
        );
        return None;
    };
    let out = Command::new("python3")
        .arg(format!("{}/tests/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args)
        .env("PYTHONPATH", pylib)
        .env_remove("PGOPTIONS")
        .env_remove("PGAPPNAME")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("json"))
}
