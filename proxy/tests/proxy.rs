//! The proxy in front of a real PostgreSQL: a leak battery for masked
//! users, byte-for-byte results for unmasked ones, the extended protocol
//! with binary results, and faults.
//!
//! Needs the server the test command starts (`DPTEXT_TEST_DB`, `PGHOST`,
//! `PGPORT`); skipped without it unless `DPTEXT_REQUIRE_PG=1`.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::OnceLock;

/// Values planted in the table; none may come back raw to a masked user.
const MARKERS: [&str; 3] = [
    "Zebediah Quincewhistle",
    "Marmaduke Pennyfeather",
    "Octavia Brambleworth",
];

struct Env {
    db: String,
    proxy: SocketAddr,
}

fn env() -> Option<&'static Env> {
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
        direct(
            &db,
            &format!(
                "DROP TABLE IF EXISTS proxy_t CASCADE;
                 CREATE TABLE proxy_t (id int PRIMARY KEY, note text UNIQUE, code varchar(40), n int);
                 INSERT INTO proxy_t VALUES
                   (1, 'Seen by {} on Monday.', 'plain code one', 10),
                   (2, 'Called {} about results.', 'plain code two', 20),
                   (3, 'Letter from {}.', NULL, 30);
                 CREATE VIEW proxy_v AS SELECT id, note FROM proxy_t;
                 DROP TABLE IF EXISTS proxy_p CASCADE;
                 CREATE TABLE proxy_p (id int, note text) PARTITION BY RANGE (id);
                 CREATE TABLE proxy_p1 PARTITION OF proxy_p FOR VALUES FROM (0) TO (100);
                 INSERT INTO proxy_p VALUES (1, 'Partitioned note of {}.');",
                MARKERS[0], MARKERS[1], MARKERS[2], MARKERS[1]
            ),
        );
        let host = std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into());
        let port = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
        let config = format!(
            r#"
listen = "127.0.0.1:0"
key = "a proxy test key, not a secret"
workers = 2
[upstream]
host = "{host}"
port = {port}
user = "postgres"
dbname = "{db}"
[[user]]
name = "analyst"
password = "analyst-pw"
masked = true
[[user]]
name = "admin"
password = "admin-pw"
masked = false
[[rule]]
table = "public.proxy_t"
column = "note"
mechanism = "santext"
params = {{ eps = 2.0 }}
[[rule]]
table = "public.proxy_p"
column = "note"
mechanism = "santext"
params = {{ eps = 2.0 }}
[masking]
upstream_rules = false
[limits]
max_message_bytes = 100000
"#
        );
        let (port, _) = spawn_proxy(&config);
        let proxy = SocketAddr::from(([127, 0, 0, 1], port));
        Some(Env { db, proxy })
    })
    .as_ref()
}

/// Starts a proxy for the TOML `config` in this process, on a free port,
/// with a metrics endpoint; (proxy port, metrics port).
fn spawn_proxy(config: &str) -> (u16, u16) {
    let config = dptext_proxy::config::Config::parse(config).expect("config");
    config.validate().expect("valid");
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
            let shared = dptext_proxy::shared(config).expect("shared");
            let _ = dptext_proxy::serve(listener, dptext_proxy::current(shared)).await;
        });
    });
    rx.recv().expect("proxy ports")
}

fn direct(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            db,
            "-c",
            sql,
        ])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// psql (`-X -A -t`) through the proxy listening on `port`, as `user`.
fn psql_cmd(port: u16, db: &str, user: &str, password: &str) -> Command {
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
    .env("PGPASSWORD", password);
    c
}

/// stdout then stderr, as text.
fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// stdout and stderr of psql through the proxy as `user`.
fn via(env: &Env, user: &str, sql: &str) -> String {
    let out = psql_cmd(env.proxy.port(), &env.db, user, &format!("{user}-pw"))
        .args(["-c", sql])
        .output()
        .expect("psql");
    text(&out)
}

/// No part of any marker, in any letter case, is in `out`.
fn assert_no_marker(what: &str, out: &str) {
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

#[test]
fn masked_users_never_see_planted_values() {
    let Some(env) = env() else { return };
    let battery = [
        "SELECT note FROM proxy_t",
        "SELECT note AS alias FROM proxy_t",
        "SELECT * FROM proxy_v",
        "SELECT x FROM (SELECT note AS x FROM proxy_t) s",
        "WITH c AS (SELECT note FROM proxy_t) SELECT * FROM c",
        "SELECT note::varchar(200) FROM proxy_t",
        "SELECT upper(note) FROM proxy_t",
        "SELECT note || '' FROM proxy_t",
        "SELECT string_agg(note, ',') FROM proxy_t",
        "SELECT json_agg(note) FROM proxy_t",
        "SELECT row_to_json(t) FROM proxy_t t",
        "SELECT t FROM proxy_t t",
        "SELECT array_agg(note) FROM proxy_t",
        "SELECT to_tsvector('simple', note) FROM proxy_t",
        "COPY proxy_t TO STDOUT",
        "COPY (SELECT note FROM proxy_t) TO STDOUT",
        "BEGIN; DECLARE c CURSOR FOR SELECT note FROM proxy_t; FETCH ALL FROM c; COMMIT",
        "PREPARE p AS SELECT note FROM proxy_t; EXECUTE p",
        "SELECT note::int FROM proxy_t",
        "SELECT convert_to(note, 'UTF8') FROM proxy_t",
        "DO $$BEGIN RAISE NOTICE '%', (SELECT note FROM proxy_t WHERE id = 1); END$$",
        "SELECT pg_notify('ch', note) FROM proxy_t WHERE id = 1",
        // Error messages that quote values, whatever their class.
        "SELECT note::regclass FROM proxy_t",
        "SELECT to_tsquery(note) FROM proxy_t",
        "SELECT current_setting(note) FROM proxy_t",
        // JSON keys computed from values.
        "SELECT jsonb_object_agg(regexp_replace(lower(note), '[^a-z0-9_]', '_', 'g'), 1) FROM proxy_t",
        // Laundering through the system catalogs (temporary objects).
        "DO $$BEGIN EXECUTE format('CREATE TEMP TABLE %I ()', (SELECT note FROM proxy_t WHERE id = 1)); END$$; \
         SELECT relname FROM pg_class WHERE relname LIKE 'Seen%'",
        "SELECT set_config('application_name', note, false) FROM proxy_t WHERE id = 1",
        // A partition of a table with a rule.
        "SELECT note FROM proxy_p1",
        "SELECT note FROM proxy_p",
    ];
    for sql in battery {
        let out = via(env, "analyst", sql);
        assert!(
            !out.contains("server closed the connection"),
            "{sql}: {out}"
        );
        assert_no_marker(sql, &out);
    }
    // Writes that echo values: RETURNING, and a unique violation's DETAIL.
    let out = via(
        env,
        "analyst",
        &format!(
            "INSERT INTO proxy_t VALUES (9, 'Visit of {} today.') RETURNING note",
            MARKERS[0]
        ),
    );
    assert_no_marker("INSERT RETURNING", &out);
    let out = via(
        env,
        "analyst",
        &format!(
            "INSERT INTO proxy_t VALUES (10, 'Seen by {} on Monday.')",
            MARKERS[0]
        ),
    );
    assert!(
        out.contains("ERROR") && out.contains("unique violation"),
        "{out}"
    );
    assert_no_marker("unique violation", &out);
    direct(&env.db, "DELETE FROM proxy_t WHERE id >= 9");
    // Keyed: the same value asked twice comes back the same.
    let a = via(env, "analyst", "SELECT note FROM proxy_t ORDER BY id");
    assert_eq!(
        a,
        via(env, "analyst", "SELECT note FROM proxy_t ORDER BY id")
    );
    // ... but a guess typed as a literal is not sanitized like the column,
    // so it cannot be checked against the column's output.
    let stored = via(env, "analyst", "SELECT note FROM proxy_t WHERE id = 1");
    let guess = via(
        env,
        "analyst",
        &format!("SELECT 'Seen by {} on Monday.'::text", MARKERS[0]),
    );
    assert_ne!(
        stored, guess,
        "a literal guess matches the protected value's output"
    );
    // Plain columns of a table without a rule are untouched.
    assert_eq!(
        via(env, "analyst", "SELECT code, n FROM proxy_t ORDER BY id"),
        "plain code one|10\nplain code two|20\n|30\n"
    );
}

#[test]
fn unmasked_users_get_the_server_results_byte_for_byte() {
    let Some(env) = env() else { return };
    for sql in [
        "SELECT * FROM proxy_t ORDER BY id",
        "SELECT upper(note), row_to_json(t) FROM proxy_t t ORDER BY id",
        "COPY proxy_t TO STDOUT",
        "SELECT 1/0",
        "SELECT note::int FROM proxy_t",
    ] {
        let out = Command::new("psql")
            .args(["-X", "-A", "-t", "-d", &env.db, "-c", sql])
            .output()
            .expect("psql");
        assert_eq!(via(env, "admin", sql), text(&out), "{sql}");
    }
}

#[test]
fn extended_protocol_with_binary_results_is_sanitized() {
    let Some(env) = env() else { return };
    let conn = format!(
        "host=127.0.0.1 port={} user=analyst password=analyst-pw dbname={}",
        env.proxy.port(),
        env.db
    );
    let mut client =
        postgres::Client::connect(&conn, postgres::NoTls).expect("connect through the proxy");
    // Parse/Bind/Describe/Execute; rust-postgres asks for binary results.
    let rows = client
        .query("SELECT id, note, code FROM proxy_t WHERE id = $1", &[&1i32])
        .expect("query");
    let note: String = rows[0].get(1);
    let code: String = rows[0].get(2);
    assert_no_marker("extended", &note);
    assert_eq!(code, "plain code one");
    let stmt = client
        .prepare("SELECT array_agg(note ORDER BY id), json_agg(note) FROM proxy_t")
        .expect("prepare");
    for _ in 0..2 {
        let row = client.query_one(&stmt, &[]).expect("named statement");
        let arr: Vec<String> = row.get(0);
        let js: serde_json::Value = row.get(1);
        assert_eq!(arr.len(), 3);
        assert_no_marker("binary array", &arr.join(" "));
        assert_no_marker("binary json", &js.to_string());
    }
    let err = client
        .query("SELECT convert_to(note, 'UTF8') FROM proxy_t", &[])
        .unwrap_err();
    assert!(format!("{err:?}").contains("bytea"), "{err:?}");
    // The session survives a refused query.
    let n: i64 = client
        .query_one("SELECT count(*) FROM proxy_t", &[])
        .expect("after refusal")
        .get(0);
    assert_eq!(n, 3);
}

#[test]
fn bad_passwords_and_oversized_messages_are_errors_not_crashes() {
    let Some(env) = env() else { return };
    let port = env.proxy.port();
    let out = psql_cmd(port, &env.db, "analyst", "wrong")
        .args(["-c", "SELECT 1"])
        .output()
        .expect("psql");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("password authentication failed"), "{err}");
    let big = std::env::temp_dir().join(format!("dptext-proxy-big-{}.sql", std::process::id()));
    std::fs::write(&big, format!("SELECT '{}';", "x".repeat(200_000))).expect("write");
    let out = psql_cmd(port, &env.db, "analyst", "analyst-pw")
        .arg("-f")
        .arg(&big)
        .output()
        .expect("psql");
    let _ = std::fs::remove_file(&big);
    let out = text(&out);
    assert!(out.contains("limit") || out.contains("closed"), "{out}");
    // Masked sessions decode text as UTF-8: other client encodings are refused.
    let out = psql_cmd(port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT note FROM proxy_t"])
        .env("PGCLIENTENCODING", "LATIN1")
        .output()
        .expect("psql");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("client_encoding UTF8"), "{err}");
    // The proxy still serves.
    assert_eq!(via(env, "analyst", "SELECT 40 + 2"), "42\n");
}

/// A second proxy over the same server with TLS required and metrics.
fn tls_proxy(env: &Env) -> (u16, u16) {
    let dir = std::env::temp_dir().join(format!("dptext-proxy-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl")
        .status
        .success();
    assert!(ok, "openssl could not make a test certificate");
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into());
    let port = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
    let config = format!(
        r#"
[upstream]
host = "{host}"
port = {port}
user = "postgres"
dbname = "{}"
[[user]]
name = "analyst"
password = "analyst-pw"
[tls]
cert = "{}"
key = "{}"
required = true
"#,
        env.db,
        cert.display(),
        key.display()
    );
    spawn_proxy(&config)
}

#[test]
fn tls_is_offered_and_can_be_required_and_metrics_count_sessions() {
    let Some(env) = env() else { return };
    // This proxy has no rule in its file: it reads the label from dptext.rules.
    direct(
        &env.db,
        "SECURITY LABEL FOR dptext ON COLUMN proxy_t.note IS 'MASKED WITH santext(eps => 2)'",
    );
    let (port, metrics_port) = tls_proxy(env);
    let run = |mode: &str| {
        let out = psql_cmd(port, &env.db, "analyst", "analyst-pw")
            .args(["-c", "SELECT note FROM proxy_t WHERE id = 1"])
            .env("PGSSLMODE", mode)
            .output()
            .expect("psql");
        text(&out)
    };
    let over_tls = run("require");
    assert!(
        !over_tls.contains("ERROR") && !over_tls.trim().is_empty(),
        "{over_tls}"
    );
    assert_no_marker("over TLS", &over_tls);
    let plain = run("disable");
    assert!(plain.contains("requires TLS"), "{plain}");
    // Metrics over HTTP.
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).expect("metrics");
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .expect("write");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read");
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    let sessions: u64 = body
        .lines()
        .find_map(|l| l.strip_prefix("dptext_proxy_sessions_total "))
        .and_then(|v| v.parse().ok())
        .expect("sessions counter");
    assert!(sessions >= 2, "{body}");
    assert!(
        body.contains("dptext_proxy_query_seconds_bucket{le=\"+Inf\"}"),
        "{body}"
    );
}

/// Runs openssl with `args` in `dir`.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", text(&out));
}

#[test]
fn upstream_tls_follows_sslmode_and_checks_the_certificate() {
    let Some(env) = env() else { return };
    let dir = std::env::temp_dir().join(format!("dptext-proxy-up-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // A CA, a server certificate it signs for DNS:localhost only, and an
    // unrelated CA.
    for ca in ["ca", "other"] {
        let (key, crt, subj) = (
            format!("{ca}.key"),
            format!("{ca}.crt"),
            format!("/CN=dptext test {ca}"),
        );
        openssl(
            &dir,
            &[
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", &subj,
                "-keyout", &key, "-out", &crt,
            ],
        );
    }
    openssl(
        &dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=DNS:localhost\n").expect("ext");
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-out",
            "server.crt",
            "-extfile",
            "ext.cnf",
        ],
    );
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into());
    let port = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
    // The TLS-only server: a proxy that refuses plain connections.
    let (tls_port, _) = spawn_proxy(&format!(
        r#"
[upstream]
host = "{host}"
port = {port}
user = "postgres"
dbname = "{db}"
sslmode = "disable"
[[user]]
name = "relay"
password = "relay-pw"
masked = false
[tls]
cert = "{d}/server.crt"
key = "{d}/server.key"
required = true
"#,
        db = env.db,
        d = dir.display()
    ));
    // A proxy in front of it with the given upstream host, port and TLS lines.
    let front_as = |host: &str, port: u16, tls: &str, (user, password): (&str, &str)| {
        let (p, _) = spawn_proxy(&format!(
            r#"
[upstream]
host = "{host}"
port = {port}
user = "{user}"
password = "{password}"
dbname = "{db}"
{tls}
[[user]]
name = "admin"
password = "admin-pw"
masked = false
"#,
            db = env.db,
        ));
        let out = psql_cmd(p, &env.db, "admin", "admin-pw")
            .args(["-c", "SELECT note FROM proxy_t ORDER BY id"])
            .output()
            .expect("psql");
        text(&out)
    };
    let front = |host: &str, port: u16, tls: &str| front_as(host, port, tls, ("relay", "relay-pw"));
    let want = direct(&env.db, "SELECT note FROM proxy_t ORDER BY id");
    let ca = format!("sslrootcert = \"{}/ca.crt\"", dir.display());
    let other = format!("sslrootcert = \"{}/other.crt\"", dir.display());
    // Verified, by name and by chain; the TLS-only server proves TLS was used.
    assert_eq!(
        front(
            "localhost",
            tls_port,
            &format!("sslmode = \"verify-full\"\n{ca}")
        ),
        want
    );
    assert_eq!(
        front(
            "127.0.0.1",
            tls_port,
            &format!("sslmode = \"verify-ca\"\n{ca}")
        ),
        want
    );
    assert_eq!(front("127.0.0.1", tls_port, "sslmode = \"require\""), want);
    assert_eq!(
        front("127.0.0.1", tls_port, ""),
        want,
        "prefer (the default) uses TLS when offered"
    );
    // The name does not match (the certificate is for localhost only).
    let out = front(
        "127.0.0.1",
        tls_port,
        &format!("sslmode = \"verify-full\"\n{ca}"),
    );
    assert!(
        out.contains("not valid for name") && !out.contains(MARKERS[0]),
        "{out}"
    );
    // Signed by another CA; require with a CA file verifies the chain too.
    for mode in ["verify-full", "require"] {
        let out = front(
            "localhost",
            tls_port,
            &format!("sslmode = \"{mode}\"\n{other}"),
        );
        assert!(
            out.contains("invalid peer certificate") && !out.contains(MARKERS[0]),
            "{mode}: {out}"
        );
    }
    // disable against a TLS-only server: refused there.
    let out = front("127.0.0.1", tls_port, "sslmode = \"disable\"");
    assert!(out.contains("requires TLS"), "{out}");
    // A server without TLS (the main test proxy, as its unmasked user):
    // require fails, prefer falls back to plain.
    let admin = ("admin", "admin-pw");
    let out = front_as(
        "127.0.0.1",
        env.proxy.port(),
        "sslmode = \"require\"",
        admin,
    );
    assert!(out.contains("does not offer TLS"), "{out}");
    assert_eq!(front_as("127.0.0.1", env.proxy.port(), "", admin), want);
    // verify-full without CA certificates is a configuration error.
    let c = dptext_proxy::config::Config::parse(
        "[upstream]\nhost = \"db\"\nuser = \"u\"\ndbname = \"d\"\nsslmode = \"verify-full\"\n[[user]]\nname = \"a\"\npassword = \"p\"\n",
    )
    .expect("parse");
    let err = c
        .validate()
        .expect_err("verify-full without sslrootcert")
        .to_string();
    assert!(err.contains("sslrootcert"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pgbench_runs_through_the_proxy_in_every_query_mode() {
    let Some(env) = env() else { return };
    let init = Command::new("pgbench")
        .args(["-i", "-q", "-s", "1", &env.db])
        .output()
        .expect("pgbench");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let port = env.proxy.port().to_string();
    for user in ["admin", "analyst"] {
        for mode in ["simple", "extended", "prepared"] {
            let out = Command::new("pgbench")
                .args([
                    "-n",
                    "-S",
                    "-t",
                    "200",
                    "-M",
                    mode,
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    user,
                    &env.db,
                ])
                .env("PGPASSWORD", format!("{user}-pw"))
                .output()
                .expect("pgbench");
            let printed = text(&out);
            assert!(out.status.success(), "{user} -M {mode}: {printed}");
            assert!(
                printed.contains("number of transactions actually processed: 200/200"),
                "{user} -M {mode}: {printed}"
            );
        }
    }
}

#[test]
fn faults_end_one_session_and_spare_the_others() {
    let Some(env) = env() else { return };
    let port = env.proxy.port();
    // The upstream backend of a session dies mid-session.
    let victim = psql_cmd(port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT pg_sleep(3)"])
        .env("PGAPPNAME", "victim")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql");
    std::thread::sleep(std::time::Duration::from_millis(800));
    direct(
        &env.db,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'victim'",
    );
    let out = victim.wait_with_output().expect("victim");
    assert!(!out.status.success(), "the victim's query should fail");
    assert_eq!(
        via(env, "analyst", "SELECT 1"),
        "1\n",
        "other sessions go on"
    );
    // A client that vanishes mid-result frees its upstream connection.
    let mut gone = psql_cmd(port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT pg_sleep(1), note FROM proxy_t"])
        .env("PGAPPNAME", "vanish")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("psql");
    std::thread::sleep(std::time::Duration::from_millis(400));
    gone.kill().expect("kill");
    let _ = gone.wait();
    let mut left = String::new();
    for _ in 0..40 {
        left = direct(
            &env.db,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'vanish'",
        );
        if left.trim() == "0" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert_eq!(
        left.trim(),
        "0",
        "the upstream connection of a vanished client stays"
    );
}

fn psycopg(conninfo: &str) -> Option<serde_json::Value> {
    let pylib = std::env::var("DPTEXT_PYLIB").ok()?;
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/psycopg_client.py"
        ))
        .arg(conninfo)
        .env("PYTHONPATH", pylib)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("json"))
}

/// psycopg 3 with server-side prepared statements and binary results.
#[test]
fn psycopg_with_prepared_statements_and_binary_results() {
    let Some(env) = env() else { return };
    if std::env::var("DPTEXT_PYLIB").is_err() {
        assert!(
            std::env::var("DPTEXT_REQUIRE_PG").as_deref() != Ok("1"),
            "DPTEXT_PYLIB (psycopg) is not set: run scripts/setup.sh"
        );
        return;
    }
    let port = env.proxy.port();
    let via = |user: &str| {
        psycopg(&format!(
            "host=127.0.0.1 port={port} user={user} password={user}-pw dbname={}",
            env.db
        ))
        .expect("psycopg")
    };
    let host = std::env::var("PGHOST").unwrap_or_default();
    let pgport = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
    let direct = psycopg(&format!(
        "host={host} port={pgport} user=postgres dbname={}",
        env.db
    ))
    .expect("psycopg");
    let admin = via("admin");
    assert_eq!(
        admin["results"], direct["results"],
        "unmasked results differ from direct ones"
    );
    assert!(
        admin["prepared_statements"].as_i64().unwrap_or(0) > 0,
        "{admin}"
    );
    let analyst = via("analyst");
    assert_no_marker("psycopg", &analyst["results"].to_string());
    assert!(
        analyst["prepared_statements"].as_i64().unwrap_or(0) > 0,
        "{analyst}"
    );
    // Plain columns come back as they are, in both formats.
    for r in analyst["results"].as_array().expect("results") {
        if r["sql"].as_str().is_some_and(|s| s.contains("code, n")) {
            assert_eq!(r["rows"][0][2], "plain code one", "{r}");
            assert_eq!(r["rows"][0][3], 10, "{r}");
        }
    }
}

/// The binary: `check`, serving, and SIGHUP reloading the file for new
/// sessions while an open session goes on.
#[test]
fn the_binary_checks_serves_and_reloads_on_sighup() {
    let Some(env) = env() else { return };
    let dir = std::env::temp_dir().join(format!("dptext-proxy-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into());
    let pgport = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
    let file = dir.join("proxy.toml");
    let config = |users: &str| {
        format!(
            "listen = \"127.0.0.1:{port}\"\nkey = \"a proxy test key, not a secret\"\n[upstream]\nhost = \"{host}\"\nport = {pgport}\nuser = \"postgres\"\ndbname = \"{}\"\n{users}",
            env.db
        )
    };
    let first = "[[user]]\nname = \"analyst\"\npassword = \"analyst-pw\"\n";
    std::fs::write(&file, config(first)).expect("write");
    let bin = env!("CARGO_BIN_EXE_dptext-proxy");
    let check = Command::new(bin)
        .arg("check")
        .arg(&file)
        .output()
        .expect("check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("connected"));
    std::fs::write(
        dir.join("bad.toml"),
        config(first).replace("listen", "lissen"),
    )
    .expect("write");
    let bad = Command::new(bin)
        .arg("check")
        .arg(dir.join("bad.toml"))
        .output()
        .expect("check");
    assert!(
        !bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("unknown field")
    );

    let mut child = Command::new(bin)
        .arg("--config")
        .arg(&file)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let psql = |user: &str, pw: &str| {
        psql_cmd(port, &env.db, user, pw)
            .args(["-c", "SELECT 7"])
            .output()
            .expect("psql")
    };
    let mut ok = false;
    for _ in 0..50 {
        if psql("analyst", "analyst-pw").status.success() {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(ok, "the proxy did not start");
    // A session open across the reload.
    let long = psql_cmd(port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT pg_sleep(1.5), 4242"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("psql");
    assert!(!psql("second", "second-pw").status.success());
    std::fs::write(
        &file,
        config(&format!(
            "{first}[[user]]\nname = \"second\"\npassword = \"second-pw\"\n"
        )),
    )
    .expect("write");
    let hup = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(hup.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        psql("second", "second-pw").status.success(),
        "the reloaded user cannot log in"
    );
    let out = long.wait_with_output().expect("long session");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("4242"),
        "the open session was dropped"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// A rule naming a column the server does not have refuses masked sessions.
#[test]
fn a_rule_that_does_not_resolve_refuses_masked_sessions() {
    let Some(env) = env() else { return };
    let host = std::env::var("PGHOST").unwrap_or_else(|_| "/var/run/postgresql".into());
    let pgport = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into());
    let (port, _) = spawn_proxy(&format!(
        "[upstream]\nhost = \"{host}\"\nport = {pgport}\nuser = \"postgres\"\ndbname = \"{}\"\n\
         [[user]]\nname = \"analyst\"\npassword = \"analyst-pw\"\n\
         [[rule]]\ntable = \"public.proxy_t\"\ncolumn = \"renamed_away\"\nmechanism = \"santext\"\nparams = {{ eps = 2.0 }}\n",
        env.db
    ));
    let out = psql_cmd(port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT note FROM proxy_t"])
        .output()
        .expect("psql");
    let printed = text(&out);
    assert!(
        !out.status.success() && printed.contains("no such column"),
        "{printed}"
    );
    assert_no_marker("unresolved rule", &printed);
}
