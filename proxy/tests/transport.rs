//! The proxy as a server: TLS with clients and to the upstream, metrics,
//! limits and faults, and the binary (`check`, serving, reload on SIGHUP).
//!
//! Needs the server the test command starts (`DPTEXT_TEST_DB`, `PGHOST`,
//! `PGPORT`, `DPTEXT_KEY_FILE`); skipped without it unless
//! `DPTEXT_REQUIRE_PG=1`.

mod common;

use std::process::Command;

use common::*;

#[test]
fn bad_passwords_oversized_messages_and_other_encodings_are_errors_not_crashes() {
    let Some(env) = env() else { return };
    let port = env.port;
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
    assert!(out.contains("limits.max_message_bytes"), "{out}");
    let out = psql_cmd(port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT 1"])
        .env("PGCLIENTENCODING", "LATIN1")
        .output()
        .expect("psql");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("client_encoding UTF8"), "{err}");
    // The proxy still serves.
    assert_eq!(via(env, "analyst", "SELECT 40 + 2"), "42\n");
}

/// A result row over `limits.max_message_bytes` (100000 for the main
/// proxy) ends the session with an error that names the limit, for masked
/// and unmasked users alike, before the proxy reads the row.
#[test]
fn a_row_over_max_message_bytes_ends_the_session_with_54000() {
    let Some(env) = env() else { return };
    for user in ["admin", "analyst"] {
        let out = psql_cmd(env.port, &env.db, user, &format!("{user}-pw"))
            .args(["-v", "VERBOSITY=verbose", "-c", "SELECT 1", "-c"])
            .arg("SELECT repeat('a', 200000)")
            .output()
            .expect("psql");
        let printed = text(&out);
        assert!(
            printed.starts_with("1\n")
                && printed.contains("FATAL:  54000: dptext-proxy: the server sent a message 'D'")
                && printed.contains("limits.max_message_bytes (100000)"),
            "{user}: {printed}"
        );
    }
    assert_eq!(via(env, "admin", "SELECT 40 + 2"), "42\n");
}

/// A second proxy over the same server with TLS required.
fn tls_proxy(env: &Env) -> (u16, u16) {
    let dir = std::env::temp_dir().join(format!("dptext-proxy-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    openssl(
        &dir,
        &[
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
            "server.key",
            "-out",
            "server.crt",
        ],
    );
    spawn_proxy(&format!(
        "{}{}[tls]\ncert = \"{d}/server.crt\"\nkey = \"{d}/server.key\"\nrequired = true\n",
        upstream_toml(env, &env.db),
        users_toml(),
        d = dir.display()
    ))
}

#[test]
fn tls_is_offered_and_can_be_required_and_metrics_count_sessions() {
    let Some(env) = env() else { return };
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
    assert_eq!(
        over_tls,
        direct_as(env, "proxy_masked", "SELECT note FROM proxy_t WHERE id = 1")
    );
    let plain = run("disable");
    assert!(plain.contains("requires TLS"), "{plain}");
    // A refused masked session counts.
    let _ = psql_cmd(port, &env.db, "unlabelled", "unlabelled-pw")
        .args(["-c", "SELECT 1"])
        .env("PGSSLMODE", "require")
        .output();
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).expect("metrics");
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .expect("write");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("read");
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    let counter = |name: &str| -> u64 {
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing:\n{body}"))
    };
    assert!(counter("dptext_proxy_sessions_total") >= 3, "{body}");
    assert!(counter("dptext_proxy_masking_refused_total") >= 1, "{body}");
    assert!(counter("dptext_proxy_queries_total") >= 1, "{body}");
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
    // The TLS-only server: a proxy that refuses plain connections, its
    // user "relay" mapped to the unmasked upstream role.
    let (tls_port, _) = spawn_proxy(&format!(
        "{}sslmode = \"disable\"\n\
         [[user]]\nname = \"relay\"\npassword = \"relay-pw\"\nmasked = false\nupstream_user = \"proxy_admin\"\n\
         [tls]\ncert = \"{d}/server.crt\"\nkey = \"{d}/server.key\"\nrequired = true\n",
        upstream_toml(env, &env.db),
        d = dir.display()
    ));
    // A proxy in front of another server at host:port, whose user
    // (name, password) it logs in as, with the given TLS lines.
    let front_as = |host: &str, port: u16, tls: &str, (user, password): (&str, &str)| {
        let (p, _) = spawn_proxy(&format!(
            "[upstream]\nhost = \"{host}\"\nport = {port}\ndbname = \"{db}\"\n{tls}\n\
             [[user]]\nname = \"admin\"\npassword = \"admin-pw\"\nmasked = false\n\
             upstream_user = \"{user}\"\nupstream_password = \"{password}\"\n",
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
    let out = front_as("127.0.0.1", env.port, "sslmode = \"require\"", admin);
    assert!(out.contains("does not offer TLS"), "{out}");
    assert_eq!(front_as("127.0.0.1", env.port, "", admin), want);
    // verify-full without CA certificates is a configuration error, found
    // by the TLS file check that load_config (check, serve, reload) runs.
    let c = dptext_proxy::config::Config::parse(
        "[upstream]\nhost = \"db\"\ndbname = \"d\"\nsslmode = \"verify-full\"\n\
         [[user]]\nname = \"a\"\npassword = \"p\"\nupstream_user = \"r\"\n",
    )
    .expect("parse");
    c.validate().expect("valid apart from its TLS files");
    let err = dptext_proxy::tls::check(&c)
        .expect_err("verify-full without sslrootcert")
        .to_string();
    assert!(err.contains("sslrootcert"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn faults_end_one_session_and_spare_the_others() {
    let Some(env) = env() else { return };
    let port = env.port;
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
    // An idle client is closed with a message.
    let (idle_port, _) = spawn_proxy(&format!(
        "{}{}[limits]\nidle_timeout_secs = 1\n",
        upstream_toml(env, &env.db),
        users_toml()
    ));
    let out = psql_cmd(idle_port, &env.db, "admin", "admin-pw")
        .args(["-c", "SELECT 1", "-c", "\\! sleep 2", "-c", "SELECT 2"])
        .output()
        .expect("psql");
    let printed = text(&out);
    assert!(
        printed.starts_with("1\n") && printed.contains("limits.idle_timeout_secs"),
        "{printed}"
    );
    // ... but a client waiting for a long query is not idle.
    let out = psql_cmd(idle_port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT pg_sleep(2.5), 7"])
        .output()
        .expect("psql");
    assert_eq!(text(&out), "|7\n");
}

/// The binary: `check` (the masking check of every user, its warnings,
/// failure for a user that would be refused), serving, and SIGHUP
/// reloading the file for new sessions while an open session goes on.
#[test]
fn the_binary_checks_serves_and_reloads_on_sighup() {
    let Some(env) = env() else { return };
    let dir = std::env::temp_dir().join(format!("dptext-proxy-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let user = |name: &str, masked: bool, role: &str| {
        format!(
            "[[user]]\nname = \"{name}\"\npassword = \"{name}-pw\"\nmasked = {masked}\nupstream_user = \"{role}\"\n"
        )
    };
    let config = |users: &str| {
        format!(
            "listen = \"127.0.0.1:{port}\"\n{}{users}",
            upstream_toml(env, &env.db)
        )
    };
    let file = dir.join("proxy.toml");
    let first = format!(
        "{}{}{}",
        user("analyst", true, "proxy_masked2"),
        user("writer", true, "proxy_writer"),
        user("root", false, "postgres")
    );
    std::fs::write(&file, config(&first)).expect("write");
    let bin = env!("CARGO_BIN_EXE_dptext-proxy");
    let check = |path: &std::path::Path, envs: &[(&str, &str)]| {
        let mut c = Command::new(bin);
        c.arg("check").arg(path);
        for (k, v) in envs {
            c.env(k, v);
        }
        c.output().expect("check")
    };
    let out = check(
        &file,
        &[("DPTEXT_PROXY_UPSTREAM_PASSWORD_ROOT", "unused here")],
    );
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    for want in [
        "mode: database",
        "user \"analyst\" (masked) -> upstream role \"proxy_masked2\": connected; masked and keyed",
        "user \"root\" (unmasked) -> upstream role \"postgres\": connected; rows relayed unchanged",
        "warning: upstream role \"postgres\" is a superuser",
        "warning: upstream role \"proxy_writer\" may write",
        "text column(s) without a dptext rule are read raw by it: ",
        "public.proxy_t.code",
        "3 user(s) ok",
    ] {
        assert!(printed.contains(want), "{want:?} missing:\n{printed}");
    }
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, config(&user("lost", true, "proxy_unlabelled"))).expect("write");
    let out = check(&bad, &[]);
    let printed = text(&out);
    assert!(
        !out.status.success()
            && printed.contains("REFUSED")
            && printed.contains("is not labelled MASKED"),
        "{printed}"
    );
    std::fs::write(&bad, config(&first).replace("listen", "lissen")).expect("write");
    let out = check(&bad, &[]);
    assert!(!out.status.success() && text(&out).contains("unknown field"));

    let mut child = Command::new(bin)
        .arg("--config")
        .arg(&file)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let psql = |user: &str| {
        psql_cmd(port, &env.db, user, &format!("{user}-pw"))
            .args(["-c", "SELECT 7"])
            .output()
            .expect("psql")
    };
    let mut ok = false;
    for _ in 0..50 {
        if psql("analyst").status.success() {
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
    assert!(!psql("second").status.success());
    std::fs::write(
        &file,
        config(&format!("{first}{}", user("second", false, "proxy_admin"))),
    )
    .expect("write");
    let hup = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(hup.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        psql("second").status.success(),
        "the reloaded user cannot log in"
    );
    let out = long.wait_with_output().expect("long session");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("4242"),
        "the open session was dropped"
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
