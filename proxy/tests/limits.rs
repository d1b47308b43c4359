//! What a connection may cost the proxy, against a fake upstream in this
//! process (no PostgreSQL server needed, only psql): the upstream connect
//! timeout, the size
//! of server messages, slots for clients still starting up, the start-up
//! deadline, `max_sessions` across a reload, and the ErrorResponse with a
//! SQLSTATE that each limit sends.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::start_proxy;

/// How the fake upstream behaves.
#[derive(Clone, Copy)]
enum Upstream {
    /// Accepts and never answers.
    Silent,
    /// Logs anyone in; answers every query with an empty result.
    Ready,
    /// Logs anyone in; answers a query with a row that says it is 400 MB
    /// long, sends 1 MB of it and waits.
    Huge,
}

fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![tag];
    f.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// A typed message from `s`: (tag, body); `None` at the end.
fn read_message(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    s.read_exact(&mut head).ok()?;
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let mut body = vec![0u8; usize::try_from(len).ok()?.checked_sub(4)?];
    s.read_exact(&mut body).ok()?;
    Some((head[0], body))
}

fn serve_fake(mut s: TcpStream, how: Upstream) {
    if let Upstream::Silent = how {
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).is_err() {
        return;
    }
    let mut startup = vec![0u8; i32::from_be_bytes(len) as usize - 4];
    if s.read_exact(&mut startup).is_err() {
        return;
    }
    let mut hello = frame(b'R', &0i32.to_be_bytes());
    hello.extend(frame(b'K', &[0, 0, 0, 1, 0, 0, 0, 2]));
    hello.extend(frame(b'Z', b"I"));
    if s.write_all(&hello).is_err() {
        return;
    }
    while let Some((tag, _)) = read_message(&mut s) {
        match (tag, how) {
            (b'Q', Upstream::Huge) => {
                // RowDescription: one text column "x".
                let mut desc = 1i16.to_be_bytes().to_vec();
                desc.extend_from_slice(b"x\0");
                desc.extend_from_slice(&[0; 6]);
                desc.extend_from_slice(&25i32.to_be_bytes());
                desc.extend_from_slice(&(-1i16).to_be_bytes());
                desc.extend_from_slice(&(-1i32).to_be_bytes());
                desc.extend_from_slice(&0i16.to_be_bytes());
                let mut out = frame(b'T', &desc);
                // A DataRow of 400,000,000 bytes, of which 1 MB comes.
                let n: i32 = 400_000_000;
                out.push(b'D');
                out.extend_from_slice(&(n + 4).to_be_bytes());
                out.extend_from_slice(&1i16.to_be_bytes());
                out.extend_from_slice(&(n - 6).to_be_bytes());
                out.extend_from_slice(&vec![b'a'; 1 << 20]);
                let _ = s.write_all(&out);
                std::thread::sleep(Duration::from_secs(30));
                return;
            }
            (b'Q', _) => {
                let mut out = frame(b'I', b"");
                out.extend(frame(b'Z', b"I"));
                if s.write_all(&out).is_err() {
                    return;
                }
            }
            (b'X', _) => return,
            _ => {}
        }
    }
}

/// A fake upstream on a free port; its port.
fn fake_upstream(how: Upstream) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            std::thread::spawn(move || serve_fake(s, how));
        }
    });
    port
}

/// A proxy over the fake upstream on `upstream_port`, with `limits`
/// (TOML lines) and one unmasked user "u".
fn config(upstream_port: u16, limits: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nkey = \"a proxy test key, not a secret\"\n\
         [upstream]\nhost = \"127.0.0.1\"\nport = {upstream_port}\ndbname = \"d\"\n\
         sslmode = \"disable\"\nconnect_timeout_secs = 1\n\
         [[user]]\nname = \"u\"\npassword = \"u-pw\"\nmasked = false\nupstream_user = \"r\"\n\
         [limits]\n{limits}\n"
    )
}

fn login(port: u16) -> Result<postgres::Client, postgres::Error> {
    postgres::Config::new()
        .host("127.0.0.1")
        .port(port)
        .user("u")
        .password("u-pw")
        .dbname("d")
        .connect_timeout(Duration::from_secs(20))
        .connect(postgres::NoTls)
}

/// The SQLSTATE and message of a server error.
fn db_error(e: &postgres::Error) -> (String, String) {
    match e.as_db_error() {
        Some(d) => (d.code().code().to_string(), d.message().to_string()),
        None => (String::new(), e.to_string()),
    }
}

/// The SQLSTATE and message of the ErrorResponse a raw connection reads
/// next, within `within`.
fn raw_error(s: &mut TcpStream, within: Duration) -> (String, String) {
    s.set_read_timeout(Some(within)).expect("timeout");
    let Some((b'E', body)) = read_message(s) else {
        panic!("no ErrorResponse within {within:?}");
    };
    let mut code = String::new();
    let mut message = String::new();
    for field in body.split(|b| *b == 0) {
        if let Some((&t, v)) = field.split_first() {
            let v = String::from_utf8_lossy(v).into_owned();
            match t {
                b'C' => code = v,
                b'M' => message = v,
                _ => {}
            }
        }
    }
    (code, message)
}

#[test]
fn a_silent_upstream_fails_the_login_within_the_connect_timeout_and_frees_its_slot() {
    let (port, _, proxy) =
        start_proxy(&config(fake_upstream(Upstream::Silent), "max_sessions = 1"));
    // With one slot, the second login would read "too many sessions" if
    // the first had kept its slot.
    for attempt in 0..2 {
        let t = Instant::now();
        let e = match login(port) {
            Ok(_) => panic!("logged in through a silent upstream"),
            Err(e) => e,
        };
        let (code, message) = db_error(&e);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!(code, "08006", "attempt {attempt}: {message}");
        assert!(
            message.contains("upstream.connect_timeout_secs"),
            "{message}"
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(proxy.admission().sessions(), 0);
}

/// psql (verbose errors) through the proxy on `port` as "u", running `sql`
/// within `within`: what it printed.
fn psql(port: u16, sql: &str, within: Duration) -> String {
    let mut child = std::process::Command::new("psql")
        .args([
            "-X",
            "-v",
            "VERBOSITY=verbose",
            "-h",
            "127.0.0.1",
            "-U",
            "u",
            "-d",
            "d",
        ])
        .args(["-p", &port.to_string(), "-c", sql])
        .env("PGPASSWORD", "u-pw")
        .env_remove("PGOPTIONS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("psql");
    let t = Instant::now();
    while child.try_wait().expect("psql").is_none() {
        if t.elapsed() > within {
            let _ = child.kill();
            panic!("psql still waits after {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    common::text(&child.wait_with_output().expect("psql"))
}

/// The sync `postgres` client reports a FATAL error that ends a query as
/// "connection closed", so this test reads it with psql.
#[test]
fn a_server_message_over_the_limit_ends_the_session_with_54000() {
    let (port, _, _) = start_proxy(&config(
        fake_upstream(Upstream::Huge),
        "max_message_bytes = 1048576",
    ));
    let out = psql(
        port,
        "SELECT repeat('a', 400000000)",
        Duration::from_secs(10),
    );
    assert!(
        out.contains(
            "FATAL:  54000: dptext-proxy: the server sent a message 'D' of 400000004 \
             bytes, over limits.max_message_bytes (1048576)"
        ),
        "{out}"
    );
}

#[test]
fn silent_connections_do_not_lock_real_users_out() {
    let (port, _, proxy) = start_proxy(&config(
        fake_upstream(Upstream::Ready),
        "max_sessions = 4\nmax_pending = 16\nstartup_timeout_secs = 30",
    ));
    let mut silent: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect();
    // The proxy has seen them all when the last one has a slot.
    std::thread::sleep(Duration::from_millis(500));
    assert!(proxy.admission().pending_len() <= 16);
    let t = Instant::now();
    let mut client = login(port).expect("a real user is locked out");
    client.simple_query("").expect("query");
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "login took {:?}",
        t.elapsed()
    );
    // The oldest silent connections were told why they were closed.
    let (code, message) = raw_error(&mut silent[0], Duration::from_secs(2));
    assert_eq!(code, "53300", "{message}");
    assert!(message.contains("limits.max_pending = 16"), "{message}");
    drop(silent);
    assert_eq!(proxy.admission().sessions(), 1);
}

#[test]
fn the_start_up_deadline_counts_from_accept_and_one_ssl_request_is_allowed() {
    let (port, _, _) = start_proxy(&config(
        fake_upstream(Upstream::Ready),
        "startup_timeout_secs = 1",
    ));
    let ssl_request = [0, 0, 0, 8, 4, 210, 22, 47];
    // A second SSLRequest is refused.
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(&ssl_request).expect("SSLRequest");
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer).expect("answer");
    assert_eq!(&answer, b"N");
    s.write_all(&ssl_request).expect("second SSLRequest");
    let (code, message) = raw_error(&mut s, Duration::from_secs(2));
    assert_eq!(code, "08P01", "{message}");
    assert!(message.contains("one SSLRequest"), "{message}");
    // A client that sends half a start-up packet, slowly, is closed one
    // second after it connected, however it spreads its bytes.
    let t = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(&ssl_request).expect("SSLRequest");
    s.read_exact(&mut answer).expect("answer");
    for b in [0u8, 0, 0] {
        std::thread::sleep(Duration::from_millis(250));
        s.write_all(&[b]).expect("a byte");
    }
    let (code, message) = raw_error(&mut s, Duration::from_secs(3));
    assert!(
        t.elapsed() < Duration::from_millis(1800),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(code, "57014", "{message}");
    assert!(message.contains("limits.startup_timeout_secs"), "{message}");
}

#[test]
fn max_sessions_follows_a_reload() {
    let upstream = fake_upstream(Upstream::Ready);
    let (port, _, proxy) = start_proxy(&config(upstream, "max_sessions = 1"));
    let mut first = login(port).expect("first session");
    let e = match login(port) {
        Ok(_) => panic!("a second session over max_sessions = 1"),
        Err(e) => e,
    };
    let (code, message) = db_error(&e);
    assert_eq!(code, "53300", "{message}");
    assert!(message.contains("limits.max_sessions = 1"), "{message}");
    let raised =
        dptext_proxy::config::Config::parse(&config(upstream, "max_sessions = 2")).expect("config");
    raised.validate().expect("valid");
    proxy.reload(raised).expect("reload");
    let mut second = login(port).expect("a second session after the reload");
    first.simple_query("").expect("first still serves");
    second.simple_query("").expect("second serves");
}
