//! The proxy in front of a real PostgreSQL with the extension: a masked
//! user gets exactly what its upstream role gets directly (the database
//! masks, the proxy changes nothing), an unmasked user what its role gets;
//! a masked user whose upstream cannot mask is refused; start-up options,
//! cancel requests and SCRAM salts; psycopg, SQLAlchemy with pandas, and
//! pgbench.
//!
//! Needs the server the test command starts (`DPTEXT_TEST_DB`, `PGHOST`,
//! `PGPORT`, `DPTEXT_KEY_FILE`); skipped without it unless
//! `DPTEXT_REQUIRE_PG=1`.

mod common;

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// `out` with backend process ids replaced: notifications name the
/// upstream backend, which differs from one connection to the next.
fn without_pids(out: &str) -> String {
    let mut s = String::new();
    let mut rest = out;
    while let Some(i) = rest.find("process with PID ") {
        let (head, tail) = rest.split_at(i + "process with PID ".len());
        s.push_str(head);
        s.push('N');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    s.push_str(rest);
    s
}

/// Statements whose output, masked or not, must be the same through the
/// proxy as directly: data, computed values, errors and notices quoting
/// values, notifications, COPY, cursors, prepared statements, server
/// metadata and the catalogs (psql's `\d`).
const SAME_AS_DIRECT: [&str; 24] = [
    "SELECT id, note, code, n FROM proxy_t ORDER BY id",
    "SELECT note AS alias FROM proxy_t ORDER BY id",
    "SELECT * FROM proxy_v ORDER BY id",
    "SELECT upper(note), length(note), md5(note) FROM proxy_t ORDER BY id",
    "SELECT row_to_json(t) FROM proxy_t t ORDER BY id",
    "SELECT jsonb_object_agg(note, id) FROM proxy_t",
    "SELECT string_agg(note, ',' ORDER BY id) FROM proxy_t",
    "SELECT count(*) FROM proxy_t WHERE note LIKE '%Quincewhistle%'",
    "COPY proxy_t TO STDOUT",
    "COPY (SELECT note FROM proxy_t ORDER BY id) TO STDOUT",
    "SELECT note::int FROM proxy_t ORDER BY id",
    "DO $$BEGIN RAISE NOTICE '%', (SELECT note FROM proxy_t WHERE id = 1); END$$",
    "LISTEN ch; SELECT pg_notify('ch', note) FROM proxy_t WHERE id = 1",
    "BEGIN; DECLARE c CURSOR FOR SELECT note FROM proxy_t ORDER BY id; FETCH ALL FROM c; COMMIT",
    "PREPARE p AS SELECT note FROM proxy_t WHERE id = $1; EXECUTE p(2)",
    "BEGIN; INSERT INTO proxy_t VALUES (9, 'x', 'x', 9) RETURNING id; ROLLBACK",
    "SELECT version(), current_user, session_user",
    "SHOW search_path",
    "SELECT 'Zebediah Quincewhistle'::text AS literal, '{\"a key\": [1, \"two\"]}'::jsonb AS js",
    "SELECT table_name, column_name, data_type FROM information_schema.columns \
     WHERE table_name = 'proxy_t' ORDER BY ordinal_position",
    "\\d proxy_t",
    "\\dt proxy_*",
    "\\dv proxy_v",
    "SELECT relname FROM pg_class WHERE relname LIKE 'proxy_%' ORDER BY 1",
];

/// The key property: through the proxy a masked user gets, byte for byte,
/// what a direct connection as its upstream role gets, so the proxy adds
/// no channel and changes nothing (and tools see real catalogs).
#[test]
fn a_masked_user_gets_exactly_what_its_masked_role_gets_directly() {
    let Some(env) = env() else { return };
    for sql in SAME_AS_DIRECT {
        let through = via(env, "analyst", sql);
        assert!(
            !through.contains("dptext-proxy"),
            "{sql}: the proxy refused or failed:\n{through}"
        );
        assert_eq!(
            without_pids(&through),
            without_pids(&direct_as(env, "proxy_masked", sql)),
            "{sql}"
        );
    }
    // The database masked them: no planted value reached the client.
    for sql in &SAME_AS_DIRECT[..16] {
        assert_no_marker(sql, &via(env, "analyst", sql));
    }
    // Keyed at the source: asking again gives the same text.
    let sql = "SELECT note FROM proxy_t ORDER BY id";
    assert_eq!(via(env, "analyst", sql), via(env, "analyst", sql));
    assert_eq!(
        via(
            env,
            "analyst",
            "SELECT current_user, code, n FROM proxy_t ORDER BY id"
        ),
        "proxy_masked|plain code one|10\nproxy_masked|plain code two|20\nproxy_masked||30\n"
    );
}

#[test]
fn an_unmasked_user_gets_exactly_what_its_role_gets_directly() {
    let Some(env) = env() else { return };
    for sql in SAME_AS_DIRECT {
        assert_eq!(
            without_pids(&via(env, "admin", sql)),
            without_pids(&direct_as(env, "proxy_admin", sql)),
            "{sql}"
        );
    }
    let raw = via(env, "admin", "SELECT note FROM proxy_t WHERE id = 1");
    assert_eq!(raw, format!("Seen by {} on Monday.\n", MARKERS[0]));
}

/// The rust-postgres client: extended protocol, binary results, a named
/// statement, through the proxy and directly as the masked role.
#[test]
fn extended_protocol_with_binary_results_matches_direct() {
    let Some(env) = env() else { return };
    let rows = |conn: &str| {
        let mut c = postgres::Client::connect(conn, postgres::NoTls).expect("connect");
        let mut out = Vec::new();
        let stmt = c
            .prepare("SELECT id, note, code, array_agg(note) OVER (), json_agg(note) OVER () FROM proxy_t ORDER BY id")
            .expect("prepare");
        for _ in 0..2 {
            for r in c.query(&stmt, &[]).expect("query") {
                let (id, note, code, arr, js): (
                    i32,
                    String,
                    Option<String>,
                    Vec<String>,
                    serde_json::Value,
                ) = (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
                out.push(format!("{id}|{note}|{code:?}|{arr:?}|{js}"));
            }
        }
        let err = c.query("SELECT note::int FROM proxy_t", &[]).unwrap_err();
        out.push(format!(
            "{:?}",
            err.as_db_error().map(|e| (e.code().code(), e.message()))
        ));
        out
    };
    let through = rows(&format!(
        "host=127.0.0.1 port={} user=analyst password=analyst-pw dbname={}",
        env.port, env.db
    ));
    let direct = rows(&format!(
        "host={} port={} user=proxy_masked dbname={}",
        env.host, env.pgport, env.db
    ));
    assert_eq!(through, direct);
    assert_no_marker("extended protocol", &through.join("\n"));
}

/// Masked users whose upstream cannot mask are refused at start-up, with
/// SQLSTATE 28000 and a message saying what to fix.
#[test]
fn a_masked_user_whose_upstream_cannot_mask_is_refused_with_what_to_fix() {
    let Some(env) = env() else { return };
    for (user, fix) in [
        (
            "unlabelled",
            "upstream role \"proxy_unlabelled\" is not labelled MASKED: run SECURITY LABEL FOR dptext ON ROLE \"proxy_unlabelled\" IS 'MASKED'",
        ),
        ("nokey", "no key is in force for upstream role \"proxy_nokey\""),
        ("ghost", "role \"proxy_no_such_role\" does not exist"),
    ] {
        let out = via(env, user, "SELECT note FROM proxy_t");
        assert!(
            out.contains(&format!("masked user \"{user}\" refused")) && out.contains(fix),
            "{user}: {out}"
        );
        assert_no_marker(user, &out);
        let err = postgres::Client::connect(
            &format!(
                "host=127.0.0.1 port={} user={user} password={user}-pw dbname={}",
                env.port, env.db
            ),
            postgres::NoTls,
        )
        .err()
        .expect("refused");
        assert_eq!(
            err.code(),
            Some(&postgres::error::SqlState::INVALID_AUTHORIZATION_SPECIFICATION),
            "{user}: {err:?}"
        );
    }
    // A database without the extension: the masked user is refused, the
    // unmasked one served.
    let (port, _) = spawn_proxy(&format!(
        "{}{}",
        upstream_toml(env, no_extension_db()),
        users_toml()
    ));
    let out = psql_cmd(port, no_extension_db(), "analyst", "analyst-pw")
        .args(["-c", "SELECT 1"])
        .output()
        .expect("psql");
    let printed = text(&out);
    assert!(
        !out.status.success()
            && printed.contains(&format!(
                "extension dptext is not installed in database \"{}\"",
                no_extension_db()
            ))
            && printed.contains("CREATE EXTENSION dptext"),
        "{printed}"
    );
    let out = psql_cmd(port, no_extension_db(), "admin", "admin-pw")
        .args(["-c", "SELECT current_user"])
        .output()
        .expect("psql");
    assert_eq!(text(&out), "proxy_admin\n");
}

/// A masked client's start-up parameters are cut to the allow-list:
/// `options` never reaches the server; display settings do.
#[test]
fn a_masked_clients_start_up_options_are_dropped() {
    let Some(env) = env() else { return };
    let show = |user: &str, envs: &[(&str, &str)]| {
        let mut c = psql_cmd(env.port, &env.db, user, &format!("{user}-pw"));
        c.args([
            "-c",
            "SELECT current_setting('search_path'), current_setting('work_mem'), \
             current_setting('application_name'), current_setting('TimeZone')",
        ]);
        for (k, v) in envs {
            c.env(k, v);
        }
        text(&c.output().expect("psql"))
    };
    let options = [
        ("PGOPTIONS", "-c search_path=evil -c work_mem=7MB"),
        ("PGAPPNAME", "notebook"),
        ("PGTZ", "Pacific/Auckland"),
    ];
    let default = direct_as(env, "proxy_masked", "SHOW search_path");
    let work_mem = direct_as(env, "proxy_masked", "SHOW work_mem");
    assert_eq!(
        show("analyst", &options),
        format!(
            "{}|{}|notebook|Pacific/Auckland\n",
            default.trim(),
            work_mem.trim()
        ),
        "a masked client's options reached the server"
    );
    // An unmasked user's options are passed on.
    assert_eq!(
        show("admin", &options),
        "evil|7MB|notebook|Pacific/Auckland\n"
    );
}

/// Runs `SELECT pg_sleep(30)` as `user` through the proxy and cancels it
/// with rust-postgres's cancel token; the error and how long it took.
fn cancelled_sleep(env: &Env, user: &str) -> (String, Duration) {
    let mut client = postgres::Client::connect(
        &format!(
            "host=127.0.0.1 port={} user={user} password={user}-pw dbname={}",
            env.port, env.db
        ),
        postgres::NoTls,
    )
    .expect("connect");
    let token = client.cancel_token();
    let sleeper = std::thread::spawn(move || {
        let start = Instant::now();
        let r = client.simple_query("SELECT pg_sleep(30)");
        (r, start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(700));
    token.cancel_query(postgres::NoTls).expect("cancel request");
    let (r, took) = sleeper.join().expect("sleeper");
    let err = r.expect_err("the sleep was not cancelled");
    (
        err.code().map(|c| c.code().to_string()).unwrap_or_default(),
        took,
    )
}

#[test]
fn cancel_requests_reach_the_server() {
    let Some(env) = env() else { return };
    for user in ["analyst", "admin"] {
        let (code, took) = cancelled_sleep(env, user);
        assert_eq!(code, "57014", "{user}");
        assert!(took < Duration::from_secs(3), "{user}: took {took:?}");
    }
    // psql's own cancel, on SIGINT.
    let start = Instant::now();
    let child = psql_cmd(env.port, &env.db, "analyst", "analyst-pw")
        .args(["-c", "SELECT pg_sleep(30)"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql");
    std::thread::sleep(Duration::from_millis(1000));
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let out = child.wait_with_output().expect("psql");
    let took = start.elapsed();
    let printed = text(&out);
    assert!(
        printed.contains("canceling statement due to user request"),
        "{printed}"
    );
    assert!(took < Duration::from_secs(4), "psql cancel took {took:?}");
}

/// Reads one message (tag, body) from a raw connection.
fn read_message(s: &mut std::net::TcpStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 5];
    s.read_exact(&mut head).expect("message header");
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let mut body = vec![0u8; len - 4];
    s.read_exact(&mut body).expect("message body");
    (head[0], body)
}

/// The server-first SCRAM message the proxy sends for `user`, from a
/// client that stops there.
fn server_first(port: u16, user: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut body = 196_608i32.to_be_bytes().to_vec();
    for p in ["user", user, "database", "x", ""] {
        body.extend_from_slice(p.as_bytes());
        body.push(0);
    }
    let mut startup = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    startup.extend_from_slice(&body);
    s.write_all(&startup).expect("startup");
    let (tag, body) = read_message(&mut s);
    assert_eq!((tag, &body[..4]), (b'R', &10i32.to_be_bytes()[..]));
    let first = b"n,,n=,r=fixedclientnonce";
    let mut msg = b"SCRAM-SHA-256\0".to_vec();
    msg.extend_from_slice(&(first.len() as i32).to_be_bytes());
    msg.extend_from_slice(first);
    let mut frame = vec![b'p'];
    frame.extend_from_slice(&((msg.len() + 4) as i32).to_be_bytes());
    frame.extend_from_slice(&msg);
    s.write_all(&frame).expect("SASLInitialResponse");
    let (tag, body) = read_message(&mut s);
    assert_eq!((tag, &body[..4]), (b'R', &11i32.to_be_bytes()[..]));
    String::from_utf8(body[4..].to_vec()).expect("utf-8")
}

/// (salt, iterations) of a server-first message.
fn salt_and_iterations(first: &str) -> (String, String) {
    let field = |k: &str| {
        first
            .split(',')
            .find_map(|f| f.strip_prefix(k))
            .unwrap_or_default()
            .to_string()
    };
    (field("s="), field("i="))
}

#[test]
fn scram_salts_do_not_tell_unknown_names_from_known_ones() {
    let Some(env) = env() else { return };
    let unknown = salt_and_iterations(&server_first(env.port, "nobody_here"));
    let again = salt_and_iterations(&server_first(env.port, "nobody_here"));
    let other = salt_and_iterations(&server_first(env.port, "nobody_else"));
    let known = salt_and_iterations(&server_first(env.port, "analyst"));
    let known_again = salt_and_iterations(&server_first(env.port, "analyst"));
    assert_eq!(
        unknown, again,
        "an unknown name's salt changes between attempts"
    );
    assert_eq!(known, known_again);
    assert_ne!(unknown.0, other.0);
    assert_ne!(unknown.0, known.0);
    assert_eq!(unknown.1, "4096");
    assert_eq!(known.1, unknown.1, "iteration counts differ");
    assert_eq!(known.0.len(), unknown.0.len(), "salt lengths differ");
}

/// psycopg 3 with server-side prepared statements, text and binary: the
/// same rows through the proxy as directly, for both kinds of user.
#[test]
fn psycopg_through_the_proxy_matches_direct() {
    let Some(env) = env() else { return };
    let via = |user: &str| {
        psycopg(&format!(
            "host=127.0.0.1 port={} user={user} password={user}-pw dbname={}",
            env.port, env.db
        ))
    };
    let direct_as = |role: &str| {
        psycopg(&format!(
            "host={} port={} user={role} dbname={}",
            env.host, env.pgport, env.db
        ))
    };
    let (Some(analyst), Some(masked)) = (via("analyst"), direct_as("proxy_masked")) else {
        return;
    };
    assert_eq!(analyst["results"], masked["results"]);
    assert_no_marker("psycopg", &analyst["results"].to_string());
    assert!(
        analyst["prepared_statements"].as_i64().unwrap_or(0) > 0,
        "{analyst}"
    );
    let (Some(admin), Some(raw)) = (via("admin"), direct_as("proxy_admin")) else {
        return;
    };
    assert_eq!(admin["results"], raw["results"]);
    assert!(admin["results"].to_string().contains(MARKERS[0]));
}

/// SQLAlchemy (postgresql+psycopg) with pandas, as a data scientist would
/// use it: reflection from the catalogs (`sqlalchemy.inspect`), pandas
/// `read_sql_table` on the labelled table and its view, and
/// `read_sql_query` with a bound parameter. Through the proxy a masked user
/// gets the same DataFrames as its masked role directly, with no planted
/// value in them; an unmasked user gets the raw ones, so the comparison
/// tells masked from raw.
#[test]
fn sqlalchemy_and_pandas_through_the_proxy_match_direct() {
    let Some(env) = env() else { return };
    let port = env.port.to_string();
    let via = |user: &str| sqlalchemy(user, &format!("{user}-pw"), "127.0.0.1", &port, &env.db);
    let direct_as = |role: &str| sqlalchemy(role, "", &env.host, &env.pgport, &env.db);
    let (Some(analyst), Some(masked)) = (via("analyst"), direct_as("proxy_masked")) else {
        return;
    };
    assert_eq!(analyst, masked);
    assert_eq!(analyst["whoami"], "proxy_masked");
    assert_no_marker("sqlalchemy and pandas", &analyst.to_string());
    // Reflection read the real catalogs, and read_sql_table every row.
    assert_eq!(analyst["primary_key"], serde_json::json!(["id"]));
    assert_eq!(analyst["views"], serde_json::json!(["proxy_v"]));
    let columns: Vec<&str> = analyst["columns"]["proxy_t"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(columns, ["id", "note", "code", "n"]);
    assert_eq!(analyst["columns"]["proxy_t"][2]["type"], "VARCHAR(40)");
    let rows = &analyst["table"]["rows"];
    assert_eq!(rows.as_array().map(Vec::len), Some(3), "{rows}");
    assert_eq!(rows[0]["code"], "plain code one");
    assert_eq!(rows[2]["code"], serde_json::Value::Null);
    assert_eq!(rows[1]["n"], 20);
    assert!(
        rows[0]["note"].as_str().is_some_and(|n| !n.is_empty()),
        "{rows}"
    );
    assert_eq!(analyst["view"]["rows"][0]["note"], rows[0]["note"]);
    assert_eq!(analyst["query"]["rows"][0]["note"], rows[1]["note"]);

    let (Some(admin), Some(raw)) = (via("admin"), direct_as("proxy_admin")) else {
        return;
    };
    assert_eq!(admin, raw);
    assert_eq!(
        admin["table"]["rows"][0]["note"],
        format!("Seen by {} on Monday.", MARKERS[0])
    );
    // Same shape, other values: the masked frames are not the raw ones.
    assert_eq!(admin["columns"], analyst["columns"]);
    assert_ne!(admin["table"], analyst["table"]);
}

#[test]
fn pgbench_runs_through_the_proxy_in_every_query_mode() {
    let Some(env) = env() else { return };
    let init = Command::new("pgbench")
        .args(["-i", "-q", "-s", "1", &env.db])
        .output()
        .expect("pgbench");
    assert!(init.status.success(), "{}", text(&init));
    direct(
        &env.db,
        "GRANT SELECT ON pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history \
         TO proxy_masked, proxy_admin",
    );
    let port = env.port.to_string();
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
                ])
                .args(["-U", user, &env.db])
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
