//! One client session, by phase:
//!
//! 1. start-up ([`negotiate`], [`serve`]): at most one GSSENCRequest
//!    (declined) and one SSLRequest, TLS, the StartupMessage, or a cancel
//!    request ([`cancel`]);
//! 2. SCRAM-SHA-256 of the client user ([`auth`]); steps 1 and 2 hold a
//!    pending slot and share one deadline ([`crate::admission`]), and a
//!    session slot is taken after them;
//! 3. the upstream: a connection as the user's own upstream login with the
//!    client's start-up parameters ([`startup`]: an allow-list for masked
//!    users), and, for a masked user, the masking check over a control
//!    connection ([`crate::masking`]); a failed check refuses the session;
//! 4. the relay ([`relay`]): bytes both ways, unchanged; or, for a masked
//!    user in proxy mode, the catalog read over the session's connection
//!    ([`catalog`], with the partitions and inheritance children of
//!    `hierarchy`, the row-level security policies of `row_security`, the
//!    indexes of `indexes` and the owners of `owners`; its SQL in
//!    `queries`, run with the path pinned to `pg_catalog` by `pinned`)
//!    and the analyzing, sanitizing relay ([`filter`]: an I/O loop around
//!    the protocol state machine of [`protocol`], its rows held and
//!    limited by `batch`), with
//!    errors and notices scrubbed ([`scrub`]) and the search path
//!    followed ([`path`]), and the catalog read again when a statement
//!    names a relation created since ([`refresh`]).

pub mod auth;
mod batch;
pub mod cancel;
pub mod catalog;
pub mod filter;
mod generated;
mod hierarchy;
mod indexes;
mod owners;
pub mod path;
mod pinned;
mod protocol;
mod queries;
pub mod refresh;
pub mod relay;
mod row_security;
pub mod scrub;
pub mod startup;
mod types;

use std::sync::Arc;

use pgwire::tokio::tokio_rustls;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};

use crate::admission::PendingSlot;
use crate::config::Config;
use crate::error::{ProxyError, Result};
use crate::metrics::{inc, METRICS};
use crate::upstream::{self, Login};
/// The frame writer every phase of a session uses (in `wire`, which the
/// upstream connection shares).
pub(crate) use crate::wire::write;
use crate::wire::{self, Frame};
use auth::Accounts;
use cancel::Cancels;

/// Everything sessions started under one configuration share.
pub struct Shared {
    /// The configuration.
    pub config: Config,
    /// Client users, their salts and salted passwords.
    pub accounts: Accounts,
    /// TLS, when configured.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Proxy mode's parse cache, rules and sanitizer (`None` in database
    /// mode).
    pub proxy_mode: Option<ProxyModeShared>,
}

/// What proxy-mode sessions share.
pub struct ProxyModeShared {
    /// Parse trees by statement text.
    pub cache: crate::analysis::ParseCache,
    /// The configuration's rules, checked.
    pub rules: Vec<crate::mode::ColumnRule>,
    /// The sanitizing pool.
    pub sanitizer: Arc<crate::sanitize::Sanitizer>,
}

impl Shared {
    /// Prepares users and TLS; SCRAM salts derive from the config's `key`,
    /// else from `fallback_secret` (the process's own).
    pub fn new(config: Config, fallback_secret: &[u8]) -> Result<Self> {
        let secret = config
            .key
            .as_ref()
            .map_or(fallback_secret, |k| k.expose().as_bytes());
        let accounts = Accounts::new(&config.users, secret);
        let tls = config.tls.as_ref().map(crate::tls::acceptor).transpose()?;
        let proxy_mode = match (&config.masking.mode, &config.key) {
            (crate::mode::Mode::Proxy, Some(key)) => {
                let rules = crate::mode::column_rules(&config.rules)?;
                let sanitizer = crate::sanitize::Sanitizer::start(
                    &config.masking,
                    &rules,
                    key.expose().as_bytes(),
                )?;
                Some(ProxyModeShared {
                    cache: crate::analysis::ParseCache::default(),
                    rules,
                    sanitizer,
                })
            }
            (crate::mode::Mode::Proxy, None) => {
                return Err(ProxyError::Config(
                    "[masking] mode = \"proxy\" needs the proxy's key".into(),
                ))
            }
            (crate::mode::Mode::Database, _) => None,
        };
        Ok(Shared {
            config,
            accounts,
            tls,
            proxy_mode,
        })
    }
}

/// How long the proxy waits to hand a client its error before closing.
const FAIL_WRITE: std::time::Duration = std::time::Duration::from_secs(1);

/// Sends `e` as a FATAL ErrorResponse with its SQLSTATE; a client that does
/// not read it within [`FAIL_WRITE`] is closed without it.
async fn fail<W: AsyncWrite + Unpin>(w: &mut W, e: &ProxyError) -> Result<()> {
    let send = async {
        write(w, &wire::error("FATAL", e.sqlstate(), &e.to_string())).await?;
        w.flush().await?;
        Ok::<(), ProxyError>(())
    };
    tokio::time::timeout(FAIL_WRITE, send)
        .await
        .map_err(|_| ProxyError::Protocol("the client does not read its error".into()))?
}

/// Serves one TCP client to its end: TLS when the client asks for it and
/// `[tls]` is configured (refused when `tls.required` and it does not ask;
/// a plain cancel request is still served). `slot` bounds its start-up.
pub async fn accept(
    tcp: tokio::net::TcpStream,
    shared: Arc<Shared>,
    cancels: Arc<Cancels>,
    slot: PendingSlot,
) -> Result<()> {
    inc(&METRICS.sessions_total);
    METRICS
        .sessions_active
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let r = negotiate(tcp, shared, cancels, slot).await;
    METRICS
        .sessions_active
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    r
}

/// The first packets on the bare TCP connection: a GSSENCRequest is
/// declined, an SSLRequest answered (once: [`serve`] refuses another).
async fn negotiate(
    mut tcp: tokio::net::TcpStream,
    shared: Arc<Shared>,
    cancels: Arc<Cancels>,
    mut slot: PendingSlot,
) -> Result<()> {
    let mut first = Vec::new();
    for attempt in 0..2 {
        first = match slot.run(wire::read_startup(&mut tcp)).await {
            Ok(b) => b,
            Err(e) => {
                let _ = fail(&mut tcp, &e).await;
                return Err(e);
            }
        };
        // libpq asks for GSS encryption before TLS, each at most once.
        if attempt == 0 && wire::Reader::new(&first).i32()? == wire::GSSENC_REQUEST {
            tcp.write_all(b"N").await?;
            continue;
        }
        break;
    }
    let code = wire::Reader::new(&first).i32()?;
    if code == wire::SSL_REQUEST {
        if let Some(acceptor) = &shared.tls {
            tcp.write_all(b"S").await?;
            let tls = slot.run(async { Ok(acceptor.accept(tcp).await?) }).await?;
            return serve(tls, shared, cancels, None, slot).await;
        }
        tcp.write_all(b"N").await?;
        return serve(tcp, shared, cancels, None, slot).await;
    }
    if shared.config.tls.as_ref().is_some_and(|t| t.required) && code != wire::CANCEL_REQUEST {
        let e = ProxyError::Protocol("this proxy requires TLS (sslmode=require)".into());
        let mut w = BufWriter::new(tcp);
        let _ = fail(&mut w, &e).await;
        return Err(e);
    }
    serve(tcp, shared, cancels, Some(first), slot).await
}

/// Sends a client's cancel request on to the server, when it names a live
/// session with its secret; anything else is ignored, as PostgreSQL does.
async fn cancel_request(body: &[u8], cancels: &Cancels) -> Result<()> {
    let (pid, secret) = wire::parse_cancel_request(body)?;
    match cancels.cancel(pid, secret) {
        Some((upstream, server_pid, server_key)) => {
            tracing::debug!(pid, "cancel request relayed");
            upstream::cancel(&upstream, server_pid, server_key).await
        }
        None => {
            tracing::info!(pid, "cancel request for no session; ignored");
            Ok(())
        }
    }
}

/// Serves one client connection to its end; `first` is a start-up packet
/// already read. `slot` bounds the start-up and authentication, and is
/// exchanged for a session slot after them.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    client: S,
    shared: Arc<Shared>,
    cancels: Arc<Cancels>,
    first: Option<Vec<u8>>,
    mut slot: PendingSlot,
) -> Result<()> {
    let (cr, cw) = tokio::io::split(client);
    let mut cr = BufReader::new(cr);
    let mut cw = BufWriter::new(cw);
    let refuse = |e: ProxyError| {
        inc(&METRICS.sessions_failed);
        e
    };
    // Start-up: TLS and GSS encryption were settled by [`negotiate`].
    let body = match first {
        Some(b) => b,
        None => match slot.run(wire::read_startup(&mut cr)).await {
            Ok(b) => b,
            Err(e) => {
                let _ = fail(&mut cw, &e).await;
                return Err(e);
            }
        },
    };
    let params = match wire::Reader::new(&body).i32()? {
        wire::CANCEL_REQUEST => return cancel_request(&body, &cancels).await,
        v if v >> 16 == 3 => wire::parse_startup_params(&body[4..])?,
        v => {
            let e = if matches!(v, wire::SSL_REQUEST | wire::GSSENC_REQUEST) {
                ProxyError::Protocol(
                    "one SSLRequest and one GSSENCRequest per connection, before the \
                     StartupMessage"
                        .into(),
                )
            } else {
                ProxyError::Protocol(format!("unsupported protocol version {v:#x}"))
            };
            let _ = fail(&mut cw, &e).await;
            return Err(refuse(e));
        }
    };
    let name = params
        .iter()
        .find(|(k, _)| k == "user")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let authenticated = slot
        .run(auth::authenticate(
            &mut cr,
            &mut cw,
            &shared.accounts,
            &name,
        ))
        .await
        .and_then(|account| Ok((account, slot.admit()?)));
    let (account, _session_slot) = match authenticated {
        Ok(a) => a,
        Err(e) => {
            let _ = fail(&mut cw, &e).await;
            return Err(refuse(e));
        }
    };
    let started = async {
        let user = &account.user;
        let cfg = &shared.config.upstream;
        startup::check_database(&params, &cfg.dbname)?;
        let mut params = startup::upstream_params(&params, user.masked)?;
        let login = Login::of(user);
        if let (true, Some(pm)) = (user.masked, &shared.proxy_mode) {
            // Proxy mode: the upstream needs no extension; the session's
            // own connection reads the catalog before any client message.
            startup::proxy_mode_params(&mut params);
            let mut up = upstream::connect(cfg, &login, &params).await?;
            // Values that are not UTF-8 (a SQL_ASCII database) could not be
            // sanitized, and ending the session on one would tell which.
            match up.parameter("server_encoding") {
                Some(enc) if startup::is_utf8(&enc) => {}
                enc => {
                    return Err(ProxyError::MaskingUnavailable(format!(
                        "proxy mode needs a UTF8 database; the upstream's server_encoding is {}",
                        enc.as_deref().unwrap_or("not reported")
                    )))
                }
            }
            let declared = catalog::Declared {
                rules: &pm.rules,
                sanitized: &shared.config.sanitized,
                trusted_owners: &shared.config.masking.trusted_owners,
            };
            let catalog = catalog::load(&mut up, declared).await?;
            catalog::prepare_rules(&pm.sanitizer, &catalog).await?;
            // What the relay needs to read the catalog again.
            let refresh = refresh::Refresh {
                cfg: cfg.clone(),
                login: login.clone(),
                params: params.clone(),
                rules: pm.rules.clone(),
                sanitized: shared.config.sanitized.clone(),
                trusted_owners: shared.config.masking.trusted_owners.clone(),
                sanitizer: pm.sanitizer.clone(),
            };
            return Ok((user, up, Some((catalog, refresh))));
        }
        if user.masked {
            // The check runs over its own connection, beside the session's.
            let (up, check) = tokio::join!(
                upstream::connect(cfg, &login, &params),
                crate::masking::check(cfg, &login, &user.name)
            );
            let report = match check {
                Ok(r) => r,
                Err(e) => {
                    inc(&METRICS.masking_refused);
                    return Err(e);
                }
            };
            if report.superuser {
                tracing::warn!(user = %user.name, upstream = %login.user, "masked user's upstream role is a superuser: it can remove its own label");
            }
            Ok((user, up?, None))
        } else {
            Ok((user, upstream::connect(cfg, &login, &params).await?, None))
        }
    };
    let (user, up, proxy_catalog) = match started.await {
        Ok(s) => s,
        Err(e) => {
            let _ = fail(&mut cw, &e).await;
            return Err(refuse(e));
        }
    };
    let registration = up
        .key_data
        .map(|(pid, key)| cancels.register(&shared.config.upstream, pid, key));
    write(&mut cw, &wire::auth(0, &[])).await?;
    for f in &up.parameters {
        write(&mut cw, f).await?;
    }
    if let Some(r) = &registration {
        write(&mut cw, &wire::backend_key_data(r.pid, r.secret)).await?;
    }
    write(&mut cw, &Frame::new(b'Z', vec![b'I'])).await?;
    cw.flush().await?;
    tracing::info!(user = %user.name, upstream = %user.upstream_user, masked = user.masked, proxy_mode = proxy_catalog.is_some(), "session started");
    let (ur, uw) = tokio::io::split(up.stream);
    let r = match (proxy_catalog, &shared.proxy_mode) {
        (Some(catalog), Some(pm)) => {
            let (catalog, refresh) = catalog;
            let mode = filter::ProxyMode {
                catalog: Arc::new(catalog),
                refresh,
                cache: pm.cache.clone(),
                sanitizer: pm.sanitizer.clone(),
                batch_rows: shared.config.masking.batch_rows,
                max_input_bytes: shared.config.masking.engine.max_input_bytes,
                interrupts: registration.as_ref().map(cancel::Registration::interrupts),
            };
            mode.relay(cr, cw.into_inner(), ur, uw, &shared.config.limits)
                .await
        }
        _ => relay::relay(cr, cw.into_inner(), ur, uw, &shared.config.limits).await,
    };
    drop(registration);
    r
}
