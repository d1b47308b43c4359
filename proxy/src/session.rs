//! One client session: startup and SCRAM-SHA-256, the upstream
//! connection, then the relay.
//!
//! Unmasked users get a byte-for-byte relay. Masked sessions relay every
//! message too, but read the server's RowDescriptions and rewrite each
//! DataRow by the session's [`Policy`]. So that every row's description is
//! known, each Execute is preceded by a Describe of its portal whose
//! answer the client never sees. COPY out, and any result the policy
//! refuses, become an error and everything up to the next ReadyForQuery is
//! dropped. Errors and notices lose the fields that can echo values.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use dptext_core::mechanisms::MechanismSpec;
use pgwire::api::auth::sasl::scram::ScramServerAuth;
use pgwire::api::auth::Password;
use pgwire::tokio::tokio_rustls;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};

use crate::config::{Catalog, Config, Expressions};
use crate::error::{ProxyError, Result};
use crate::metrics::{inc, METRICS};
use crate::policy::Policy;
use crate::pool::{Pool, RowPlan};
use crate::upstream::{self, Upstream};
use crate::wire::{self, put_cstr, Frame};

/// A client user as the proxy checks it.
pub struct UserAuth {
    salt: Vec<u8>,
    salted: Vec<u8>,
    /// Whether the user's results are sanitized.
    pub masked: bool,
}

/// Everything sessions share.
pub struct Shared {
    /// The configuration.
    pub config: Config,
    /// Users by name.
    pub users: HashMap<String, UserAuth>,
    /// The sanitization workers.
    pub pool: Pool,
    /// Rules from the config: (schema, table, column, mechanism).
    pub rules: Vec<(String, String, String, MechanismSpec)>,
    /// The default mechanism.
    pub default_spec: MechanismSpec,
    /// TLS, when configured.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Shared {
    /// Prepares users (salted passwords) and validated rules.
    pub fn new(config: Config, pool: Pool) -> Result<Self> {
        let users = config
            .users
            .iter()
            .map(|u| {
                let salt: [u8; 16] = rand::random();
                let salted = pgwire::api::auth::sasl::scram::gen_salted_password(
                    u.password.expose(),
                    &salt,
                    4096,
                );
                (
                    u.name.clone(),
                    UserAuth {
                        salt: salt.to_vec(),
                        salted,
                        masked: u.masked,
                    },
                )
            })
            .collect();
        let rules = config
            .rules
            .iter()
            .map(|r| {
                let (s, t) = r.qualified();
                Ok((s, t, r.column.clone(), r.spec()?))
            })
            .collect::<Result<_>>()?;
        let default_spec = config.masking.spec()?;
        let tls = config.tls.as_ref().map(crate::tls::acceptor).transpose()?;
        Ok(Shared {
            config,
            users,
            pool,
            rules,
            default_spec,
            tls,
        })
    }
}

async fn write<W: AsyncWrite + Unpin>(w: &mut W, f: &Frame) -> Result<()> {
    w.write_all(&f.to_bytes()).await?;
    Ok(())
}

async fn fail<W: AsyncWrite + Unpin>(w: &mut W, e: &ProxyError) -> Result<()> {
    write(w, &wire::error("FATAL", e.sqlstate(), &e.to_string())).await?;
    w.flush().await?;
    Ok(())
}

/// How long a client may take over each startup and authentication step.
const STARTUP: std::time::Duration = std::time::Duration::from_secs(30);

/// `f`, or a protocol error after [`STARTUP`].
async fn in_time<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(STARTUP, f)
        .await
        .map_err(|_| ProxyError::Protocol("startup took too long".into()))?
}

/// The startup code of an SSLRequest (clients' and the proxy's own).
pub(crate) const SSL_REQUEST: i32 = 80_877_103;
const GSSENC_REQUEST: i32 = 80_877_104;

/// Serves one TCP client to its end: TLS when the client asks for it and
/// `[tls]` is configured (refused when `tls.required` and it does not ask).
pub async fn accept(tcp: tokio::net::TcpStream, shared: Arc<Shared>) -> Result<()> {
    inc(&METRICS.sessions_total);
    METRICS
        .sessions_active
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let r = negotiate(tcp, shared).await;
    METRICS
        .sessions_active
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    r
}

async fn negotiate(mut tcp: tokio::net::TcpStream, shared: Arc<Shared>) -> Result<()> {
    let first = in_time(wire::read_startup(&mut tcp)).await?;
    let code = wire::Reader::new(&first).i32()?;
    if code == SSL_REQUEST {
        if let Some(acceptor) = &shared.tls {
            tcp.write_all(b"S").await?;
            let tls = in_time(async { Ok(acceptor.accept(tcp).await?) }).await?;
            return serve(tls, shared, None).await;
        }
        tcp.write_all(b"N").await?;
        return serve(tcp, shared, None).await;
    }
    if shared.config.tls.as_ref().is_some_and(|t| t.required) && code != 80_877_102 {
        let e = ProxyError::Protocol("this proxy requires TLS (sslmode=require)".into());
        let mut w = BufWriter::new(tcp);
        let _ = fail(&mut w, &e).await;
        return Err(e);
    }
    serve(tcp, shared, Some(first)).await
}

/// Serves one client connection to its end; `first` is a startup packet
/// already read.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    client: S,
    shared: Arc<Shared>,
    mut first: Option<Vec<u8>>,
) -> Result<()> {
    let (cr, cw) = tokio::io::split(client);
    let mut cr = BufReader::new(cr);
    let mut cw = BufWriter::new(cw);
    // Startup: no GSS encryption, no TLS inside TLS; cancels forwarded.
    let params = loop {
        let body = match first.take() {
            Some(b) => b,
            None => in_time(wire::read_startup(&mut cr)).await?,
        };
        let mut r = wire::Reader::new(&body);
        match r.i32()? {
            SSL_REQUEST | GSSENC_REQUEST => {
                cw.write_all(b"N").await?;
                cw.flush().await?;
            }
            80_877_102 => {
                upstream::cancel(&shared.config.upstream, &body[4..]).await?;
                return Ok(());
            }
            v if v >> 16 == 3 => {
                let mut params = Vec::new();
                while !r.done() {
                    let k = r.cstr()?;
                    if k.is_empty() {
                        break;
                    }
                    params.push((k.to_string(), r.cstr()?.to_string()));
                }
                break params;
            }
            v => {
                let e = ProxyError::Protocol(format!("unsupported protocol version {v:#x}"));
                fail(&mut cw, &e).await?;
                return Err(e);
            }
        }
    };
    let user = params
        .iter()
        .find(|(k, _)| k == "user")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let masked = match authenticate(&mut cr, &mut cw, &shared, &user).await {
        Ok(m) => m,
        Err(e) => {
            inc(&METRICS.sessions_failed);
            let _ = fail(&mut cw, &e).await;
            return Err(e);
        }
    };
    let mut up = match upstream::connect(&shared.config.upstream, &params).await {
        Ok(u) => u,
        Err(e) => {
            inc(&METRICS.sessions_failed);
            let _ = fail(&mut cw, &e).await;
            return Err(e);
        }
    };
    let policy = if masked {
        match load_policy(&mut up, &shared).await {
            Ok(p) => Some(Arc::new(p)),
            Err(e) => {
                let _ = fail(&mut cw, &e).await;
                return Err(e);
            }
        }
    } else {
        None
    };
    if policy.is_some() {
        for f in &up.parameters {
            if let Err(e) = check_encoding(&f.body) {
                let _ = fail(&mut cw, &e).await;
                return Err(e);
            }
        }
    }
    write(&mut cw, &wire::auth(0, &[])).await?;
    for f in up.parameters.iter().chain(up.key_data.iter()) {
        write(&mut cw, f).await?;
    }
    write(&mut cw, &Frame::new(b'Z', vec![b'I'])).await?;
    cw.flush().await?;
    tracing::info!(%user, masked, "session started");
    let (ur, uw) = tokio::io::split(up.stream);
    match policy {
        None => {
            // Unmasked: bytes both ways, untouched.
            let mut client = tokio::io::join(cr, cw);
            let mut server = tokio::io::join(ur, uw);
            tokio::io::copy_bidirectional(&mut client, &mut server).await?;
            Ok(())
        }
        Some(policy) => relay(cr, cw, ur, uw, policy, shared).await,
    }
}

/// SCRAM-SHA-256 with the client; whether the user is masked.
async fn authenticate<R, W>(cr: &mut R, cw: &mut W, shared: &Shared, user: &str) -> Result<bool>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // Unknown users go through the same exchange against a random secret,
    // so that a login attempt does not tell which names exist.
    let decoy = UserAuth {
        salt: rand::random::<[u8; 16]>().to_vec(),
        salted: rand::random::<[u8; 32]>().to_vec(),
        masked: true,
    };
    let known = shared.users.get(user);
    let auth = known.unwrap_or(&decoy);
    let mut mechs = Vec::new();
    put_cstr(&mut mechs, "SCRAM-SHA-256");
    mechs.push(0);
    write(cw, &wire::auth(10, &mechs)).await?;
    cw.flush().await?;
    let first = in_time(wire::read_frame(cr, 10_000))
        .await?
        .filter(|f| f.tag == b'p')
        .ok_or_else(|| ProxyError::Protocol("expected SASLInitialResponse".into()))?;
    let mut r = wire::Reader::new(&first.body);
    if r.cstr()? != "SCRAM-SHA-256" {
        return Err(ProxyError::Auth(user.to_string()));
    }
    let n = r.i32()?;
    let data = r.bytes(n.max(0) as usize)?;
    let mut server = ScramServerAuth::new();
    server.set_iterations(4096);
    let (server_first, waiting) = server
        .on_client_first_message(
            data,
            Password::new(Some(auth.salt.clone()), auth.salted.clone()),
        )
        .map_err(|_| ProxyError::Auth(user.to_string()))?;
    write(cw, &wire::auth(11, server_first.as_bytes())).await?;
    cw.flush().await?;
    let fin = in_time(wire::read_frame(cr, 10_000))
        .await?
        .filter(|f| f.tag == b'p')
        .ok_or_else(|| ProxyError::Protocol("expected SASLResponse".into()))?;
    let server_final = waiting
        .on_client_final_message(&fin.body)
        .map_err(|_| ProxyError::Auth(user.to_string()))?;
    let Some(known) = known else {
        return Err(ProxyError::Auth(user.to_string()));
    };
    write(cw, &wire::auth(12, server_final.as_bytes())).await?;
    Ok(known.masked)
}

fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A rule's column and the same-named column of every table that inherits
/// from it (partitions, inheritance children): (table OID, attnum) pairs.
fn descendants_sql(table: &str, column: &str) -> String {
    format!(
        "WITH RECURSIVE d(relid) AS (SELECT {table}::oid \
           UNION SELECT i.inhrelid FROM pg_catalog.pg_inherits i JOIN d ON i.inhparent = d.relid) \
         SELECT d.relid, a.attnum FROM d JOIN pg_catalog.pg_attribute a \
           ON a.attrelid = d.relid AND a.attname = {} AND NOT a.attisdropped",
        literal(column)
    )
}

/// The session's policy from the catalog: plain tables, column names,
/// config rules and the upstream's `dptext.rules`, each extended to the
/// tables that inherit from its table. A config rule whose column does not
/// exist refuses the session (fail-closed).
async fn load_policy(up: &mut Upstream, shared: &Shared) -> Result<Policy> {
    let catalog = |r: std::result::Result<Vec<Vec<Option<String>>>, String>| {
        r.map_err(|e| ProxyError::Upstream(format!("reading the catalog: {e}")))
    };
    let system = if shared.config.masking.catalog == Catalog::Pass {
        ""
    } else {
        " AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%'"
    };
    let tables: HashSet<u32> = catalog(
        up.query(&format!(
            "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p', 'f'){system}"
        ))
        .await?,
    )?
    .into_iter()
    .filter_map(|r| r.first().cloned().flatten()?.parse().ok())
    .collect();
    let column_names: HashSet<String> = catalog(
        up.query("SELECT DISTINCT attname FROM pg_catalog.pg_attribute WHERE attnum > 0 AND NOT attisdropped")
            .await?,
    )?
    .into_iter()
    .filter_map(|r| r.into_iter().next().flatten())
    .collect();
    let mut specs = vec![shared.default_spec.clone()];
    let mut rules = HashMap::new();
    let mut add =
        |rows: Vec<Vec<Option<String>>>, spec: &MechanismSpec, specs: &mut Vec<MechanismSpec>| {
            specs.push(spec.clone());
            for r in rows {
                let oid: u32 = r[0].as_deref().unwrap_or("0").parse().unwrap_or(0);
                let attnum: i16 = r[1].as_deref().unwrap_or("0").parse().unwrap_or(0);
                // A rule in the config wins over the catalog's.
                rules.entry((oid, attnum)).or_insert(specs.len() - 1);
            }
        };
    for (schema, table, column, spec) in &shared.rules {
        let oid = format!(
            "(SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
              WHERE n.nspname = {} AND c.relname = {})",
            literal(schema),
            literal(table)
        );
        let rows = catalog(up.query(&descendants_sql(&oid, column)).await?)?;
        if rows.is_empty() {
            return Err(ProxyError::Config(format!(
                "rule {schema}.{table}.{column}: no such column upstream; masked sessions are refused until the rule is fixed"
            )));
        }
        add(rows, spec, &mut specs);
    }
    if shared.config.masking.upstream_rules {
        match up
            .query("SELECT table_oid, column_name, mechanism, params::text FROM dptext.rules")
            .await?
        {
            Ok(found) => {
                for r in found {
                    let (Some(oid), Some(column), Some(m), Some(p)) = (&r[0], &r[1], &r[2], &r[3])
                    else {
                        continue;
                    };
                    let params: serde_json::Value =
                        serde_json::from_str(p).map_err(|e| ProxyError::Upstream(e.to_string()))?;
                    let spec = MechanismSpec::parse(m, &params)?;
                    let oid: u32 = oid.parse().unwrap_or(0);
                    let rows =
                        catalog(up.query(&descendants_sql(&oid.to_string(), column)).await?)?;
                    add(rows, &spec, &mut specs);
                }
            }
            Err(e) => tracing::debug!(error = %e, "no dptext.rules upstream"),
        }
    }
    Ok(Policy {
        mechanisms: Arc::new(crate::pool::Mechanisms::new(specs, column_names)),
        rules,
        tables,
        refuse_expressions: shared.config.masking.expressions == Expressions::Refuse,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Describe { injected: bool },
    Query,
    Sync,
}

/// Fields of an error or notice that can echo values: detail, where
/// (context), hint, internal query.
const SCRUBBED: [u8; 4] = [b'D', b'W', b'H', b'q'];

/// A short name for common SQLSTATEs, to keep errors usable when their
/// message is withheld.
fn condition(code: &str) -> &'static str {
    match code {
        "42601" => "syntax error",
        "42P01" => "undefined table",
        "42703" => "undefined column",
        "42883" => "undefined function",
        "42501" => "insufficient privilege",
        "42804" => "datatype mismatch",
        "23505" => "unique violation",
        "23503" => "foreign key violation",
        "23502" => "not-null violation",
        "23514" => "check violation",
        "22P02" => "invalid text representation",
        "22012" => "division by zero",
        "25P02" => "in failed transaction",
        "57014" => "query canceled",
        "40001" => "serialization failure",
        "40P01" => "deadlock detected",
        _ => "error",
    }
}

/// An error or notice with every field that can carry data removed or
/// replaced: detail, where (context), hint and internal query go; an
/// error's message (any class can quote a value: `note::regclass`,
/// `to_tsquery(note)`, ...) is replaced by its SQLSTATE and condition; a
/// notice's message (free text, e.g. `RAISE NOTICE`) is sanitized with the
/// default mechanism.
async fn scrub(tag: u8, body: &[u8], shared: &Shared) -> Result<Vec<u8>> {
    let fields = wire::parse_fields(body)?;
    let code = fields
        .iter()
        .find(|(c, _)| *c == b'C')
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let mut kept = Vec::with_capacity(fields.len());
    for (c, v) in fields {
        if SCRUBBED.contains(&c) {
            continue;
        }
        let v = match (c, tag) {
            (b'M', b'E') => format!(
                "{} (SQLSTATE {code}); the message may quote data and was withheld by dptext-proxy",
                condition(&code)
            ),
            (b'M', _) => shared.pool.text(v, shared.default_spec.clone()).await?,
            _ => v,
        };
        kept.push((c, v));
    }
    Ok(wire::fields_body(&kept))
}

/// Refuses a session whose client encoding is not UTF8 (masked sessions
/// decode text as UTF-8); `body` is a ParameterStatus.
fn check_encoding(body: &[u8]) -> Result<()> {
    let mut r = wire::Reader::new(body);
    if r.cstr()? == "client_encoding" && !r.cstr()?.eq_ignore_ascii_case("UTF8") {
        return Err(ProxyError::Protocol(
            "masked sessions need client_encoding UTF8".into(),
        ));
    }
    Ok(())
}

/// A simple query that fails with `message` (SQLSTATE 42501): what a
/// refused client message becomes, so that the server answers it in order.
fn refusal_query(message: &str) -> Frame {
    let mut body = Vec::new();
    put_cstr(
        &mut body,
        &format!(
            "DO $dptext$BEGIN RAISE EXCEPTION '{}' USING ERRCODE = '42501'; END$dptext$",
            message.replace('\'', "''")
        ),
    );
    Frame::new(b'Q', body)
}

async fn relay<CR, CW, UR, UW>(
    mut cr: BufReader<CR>,
    mut cw: BufWriter<CW>,
    ur: UR,
    mut uw: UW,
    policy: Arc<Policy>,
    shared: Arc<Shared>,
) -> Result<()>
where
    CR: AsyncRead + Unpin + Send + 'static,
    CW: AsyncWrite + Unpin + Send + 'static,
    UR: AsyncRead + Unpin + Send + 'static,
    UW: AsyncWrite + Unpin + Send + 'static,
{
    let pending: Arc<Mutex<VecDeque<Pending>>> = Arc::default();
    let started: Arc<Mutex<VecDeque<std::time::Instant>>> = Arc::default();
    let max = shared.config.limits.max_message_bytes;
    let idle = shared.config.limits.idle_timeout_secs;
    let queue = pending.clone();
    let starts = started.clone();
    let push = move |p: Pending| {
        if matches!(p, Pending::Query | Pending::Sync) {
            inc(&METRICS.queries_total);
            starts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push_back(std::time::Instant::now());
        }
        queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push_back(p);
    };
    // Client -> server: relayed, with Describe injected before Execute.
    let to_server = async move {
        loop {
            let read = wire::read_frame(&mut cr, max);
            let read = if idle > 0 {
                match tokio::time::timeout(std::time::Duration::from_secs(idle), read).await {
                    Ok(r) => r,
                    Err(_) => {
                        let _ = uw.write_all(&Frame::new(b'X', Vec::new()).to_bytes()).await;
                        return Err(ProxyError::Protocol(format!(
                            "idle for {idle} s: session closed"
                        )));
                    }
                }
            } else {
                read.await
            };
            let f = match read {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    // Oversized or malformed: tell the server goodbye.
                    let _ = uw.write_all(&Frame::new(b'X', Vec::new()).to_bytes()).await;
                    return Err(e);
                }
            };
            match f.tag {
                b'D' => push(Pending::Describe { injected: false }),
                b'E' => {
                    let portal = wire::Reader::new(&f.body).cstr()?.to_string();
                    push(Pending::Describe { injected: true });
                    uw.write_all(&wire::describe_portal(&portal).to_bytes())
                        .await?;
                }
                b'S' => push(Pending::Sync),
                b'Q' => push(Pending::Query),
                b'F' => {
                    // Fast-path function calls return values without a row
                    // description: refused, answered in order by the server.
                    push(Pending::Query);
                    uw.write_all(
                        &refusal_query(
                            "dptext-proxy: fast-path function calls are refused in masked sessions",
                        )
                        .to_bytes(),
                    )
                    .await?;
                    continue;
                }
                _ => {}
            }
            uw.write_all(&f.to_bytes()).await?;
            if f.tag == b'X' {
                break;
            }
            if cr.buffer().is_empty() {
                uw.flush().await?;
            }
        }
        uw.flush().await?;
        Ok::<(), ProxyError>(())
    };
    // Server -> client: row descriptions read, rows rewritten.
    let to_client = async move {
        let mut ur = BufReader::new(ur);
        let mut current: Option<Arc<RowPlan>> = None;
        let mut refusing = false;
        let front = || {
            pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .front()
                .copied()
        };
        let pop = || {
            pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop_front()
        };
        loop {
            let Some(f) = wire::read_frame(&mut ur, usize::MAX >> 2).await? else {
                break;
            };
            let mut out: Option<Frame> = None;
            let mut refuse: Option<String> = None;
            match f.tag {
                b'Z' => {
                    if let Some(t) = started
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .pop_front()
                    {
                        METRICS.observe(t.elapsed());
                    }
                    while let Some(p) = pop() {
                        if matches!(p, Pending::Sync | Pending::Query) {
                            break;
                        }
                    }
                    refusing = false;
                    current = None;
                    out = Some(f);
                }
                // Session-level messages, also while a result is refused.
                b'S' => {
                    if let Err(e) = check_encoding(&f.body) {
                        write(
                            &mut cw,
                            &wire::error("FATAL", "0A000", &format!("dptext-proxy: {e}")),
                        )
                        .await?;
                        cw.flush().await?;
                        return Err(e);
                    }
                    // application_name can be set to any text by a query.
                    let mut r = wire::Reader::new(&f.body);
                    let name = r.cstr()?.to_string();
                    let value = r.cstr()?.to_string();
                    out = Some(if name == "application_name" && !value.is_empty() {
                        let clean = shared.pool.text(value, shared.default_spec.clone()).await?;
                        let mut body = Vec::new();
                        put_cstr(&mut body, &name);
                        put_cstr(&mut body, &clean);
                        Frame::new(b'S', body)
                    } else {
                        f
                    });
                }
                b'N' => out = Some(Frame::new(b'N', scrub(b'N', &f.body, &shared).await?)),
                b'A' => {
                    let mut r = wire::Reader::new(&f.body);
                    let pid = r.i32()?;
                    let channel = r.cstr()?.to_string();
                    let payload = r.cstr()?.to_string();
                    let clean = shared
                        .pool
                        .text(payload, shared.default_spec.clone())
                        .await?;
                    let mut body = pid.to_be_bytes().to_vec();
                    put_cstr(&mut body, &channel);
                    put_cstr(&mut body, &clean);
                    out = Some(Frame::new(b'A', body));
                }
                _ if refusing => {}
                b'T' | b'n' => {
                    let injected = match front() {
                        Some(Pending::Describe { injected }) => {
                            pop();
                            injected
                        }
                        _ => false,
                    };
                    if f.tag == b'T' {
                        match policy.plan(&wire::parse_row_description(&f.body)?) {
                            Ok(plan) => current = Some(Arc::new(plan)),
                            Err(why) => refuse = Some(why),
                        }
                    } else {
                        current = None;
                    }
                    if !injected && refuse.is_none() {
                        out = Some(f);
                    }
                }
                b'D' => match &current {
                    Some(plan) if plan.passes() => out = Some(f),
                    Some(plan) => {
                        // Rows already received go to the workers together;
                        // they come back, and are written, in order.
                        let mut queued = vec![shared.pool.submit(f.body, plan.clone()).await?];
                        while queued.len() < 256 && ur.buffer().first() == Some(&b'D') {
                            let Some(next) = wire::read_frame(&mut ur, usize::MAX >> 2).await?
                            else {
                                break;
                            };
                            queued.push(shared.pool.submit(next.body, plan.clone()).await?);
                        }
                        let per_row = plan
                            .actions
                            .iter()
                            .filter(|a| **a != crate::pool::Action::Pass)
                            .count() as u64;
                        for p in queued {
                            match p.wait().await {
                                Ok(body) if refuse.is_none() => {
                                    inc(&METRICS.rows_sanitized);
                                    METRICS
                                        .values_sanitized
                                        .fetch_add(per_row, std::sync::atomic::Ordering::Relaxed);
                                    write(&mut cw, &Frame::new(b'D', body)).await?;
                                }
                                Ok(_) => {}
                                Err(e) => {
                                    refuse.get_or_insert(format!(
                                        "a value could not be sanitized: {e}"
                                    ));
                                }
                            }
                        }
                    }
                    None => refuse = Some("a row arrived without a description".into()),
                },
                b'E' => {
                    inc(&METRICS.upstream_errors);
                    // In the extended protocol the server now skips to Sync.
                    if !matches!(front(), Some(Pending::Query) | None) {
                        let mut q = pending
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        while matches!(q.front(), Some(Pending::Describe { .. })) {
                            q.pop_front();
                        }
                    }
                    out = Some(Frame::new(b'E', scrub(b'E', &f.body, &shared).await?));
                }
                b'H' | b'W' => {
                    refuse = Some(
                        "COPY ... TO STDOUT is refused in masked sessions; select the rows instead"
                            .into(),
                    );
                }
                _ => out = Some(f),
            }
            if let Some(why) = refuse {
                tracing::info!(reason = %why, "result refused");
                inc(&METRICS.results_refused);
                write(
                    &mut cw,
                    &wire::error("ERROR", "42501", &format!("dptext-proxy: {why}")),
                )
                .await?;
                refusing = true;
                current = None;
            }
            if let Some(o) = out {
                write(&mut cw, &o).await?;
            }
            if ur.buffer().is_empty() {
                cw.flush().await?;
            }
        }
        cw.flush().await?;
        Ok::<(), ProxyError>(())
    };
    // Either side ending ends the session (and drops the other connection).
    tokio::select! {
        r = to_server => r,
        r = to_client => r,
    }
}
