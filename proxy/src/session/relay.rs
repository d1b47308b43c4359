//! The relay: bytes both ways, unchanged, for masked and unmasked users
//! alike (a masked user's rows were masked by the database).
//!
//! Each direction is read in chunks and written on as it came; a
//! [`Scanner`] follows the message boundaries to enforce
//! `limits.max_message_bytes` both ways (by the declared length, before any
//! of the message is read, so memory stays at one chunk per direction) and
//! to time queries (first message to ReadyForQuery) for the metrics.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::Limits;
use crate::error::{ProxyError, Result};
use crate::metrics::{inc, METRICS};
use crate::wire::{self, Scanner};

const CHUNK: usize = 64 << 10;

/// Relays until either side ends. A message over
/// `limits.max_message_bytes` either way, or a client silent for
/// `limits.idle_timeout_secs` while none of its queries runs, ends the
/// session with a FATAL error to the client that names the limit (when the
/// client's stream is at a message boundary, so the error can be read: a
/// server message is cut before its header, so it always is).
pub async fn relay<CR, CW, UR, UW>(
    mut cr: CR,
    mut cw: CW,
    mut ur: UR,
    mut uw: UW,
    limits: &Limits,
) -> Result<()>
where
    CR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
    UR: AsyncRead + Unpin,
    UW: AsyncWrite + Unpin,
{
    // Both directions run in this task: the locks are never contended.
    let started: Mutex<VecDeque<Instant>> = Mutex::default();
    let client_at_boundary = AtomicBool::new(true);
    let max = limits.max_message_bytes;
    let idle = limits.idle_timeout_secs;
    let to_server = async {
        let mut buf = vec![0u8; CHUNK];
        let mut scanner = Scanner::default();
        loop {
            // A client waiting for its query is not idle.
            let n = match read_client(cr.read(&mut buf), idle, || in_flight(&started)).await {
                Some(n) => n?,
                None => return Err(ProxyError::idle(idle)),
            };
            if n == 0 {
                return Ok(());
            }
            scanner
                .feed(&buf[..n], max, |tag, _| {
                    if matches!(tag, b'Q' | b'S' | b'F') {
                        inc(&METRICS.queries_total);
                        started
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .push_back(Instant::now());
                    }
                })
                .map_err(|b| ProxyError::client_message_too_large(&b.into()))?;
            uw.write_all(&buf[..n]).await?;
            uw.flush().await?;
        }
    };
    let to_client = async {
        let mut buf = vec![0u8; CHUNK];
        let mut scanner = Scanner::default();
        // The start of a header is held back until the header is complete,
        // so that a refused message leaves the client at a boundary.
        let mut held = [0u8; 5];
        loop {
            let n = ur.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), ProxyError>(());
            }
            let before = scanner.partial_header().len();
            held[..before].copy_from_slice(scanner.partial_header());
            let fed = scanner.feed(&buf[..n], max, |tag, _| match tag {
                b'Z' => {
                    let t = started
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_front();
                    if let Some(t) = t {
                        METRICS.observe(t.elapsed());
                    }
                }
                b'E' => inc(&METRICS.upstream_errors),
                _ => {}
            });
            // How much of this chunk goes on (`None`: nothing, held bytes
            // included, as they start a header not yet complete or refused).
            let (upto, refused) = match fed {
                Ok(()) => (n.checked_sub(scanner.partial_header().len()), None),
                Err(b) => (b.header_at, Some(b)),
            };
            if let Some(end) = upto {
                client_at_boundary.store(false, Ordering::Relaxed);
                cw.write_all(&held[..before]).await?;
                cw.write_all(&buf[..end]).await?;
                cw.flush().await?;
            }
            if let Some(b) = refused {
                let e = ProxyError::server_message_too_large(b.tag, i64::from(b.len), max);
                tracing::warn!(error = %e, "server message refused");
                let _ = cw
                    .write_all(&wire::error("FATAL", e.sqlstate(), &e.to_string()).to_bytes())
                    .await;
                let _ = cw.shutdown().await;
                return Err(e);
            }
            client_at_boundary.store(!scanner.in_body(), Ordering::Relaxed);
        }
    };
    let ending = tokio::select! {
        r = to_server => match r {
            Ok(()) => return Ok(()),
            Err(e) => e,
        },
        r = to_client => return r,
    };
    if matches!(ending, ProxyError::Limit { .. }) && client_at_boundary.load(Ordering::Relaxed) {
        send_fatal(&mut cw, &ending).await;
    }
    Err(ending)
}

/// Awaits `read`, a read of the client, under `limits.idle_timeout_secs`
/// (`idle`, 0 for none), in both modes: `None` when the client was
/// silent that long while `waiting()` says none of its queries awaits an
/// answer (it is idle). While one does, the same read goes on after each
/// timeout, so no byte is lost.
pub(super) async fn read_client<F: Future>(
    read: F,
    idle: u64,
    waiting: impl Fn() -> bool,
) -> Option<F::Output> {
    if idle == 0 {
        return Some(read.await);
    }
    let mut read = std::pin::pin!(read);
    loop {
        match tokio::time::timeout(Duration::from_secs(idle), &mut read).await {
            Ok(r) => return Some(r),
            Err(_) if waiting() => continue,
            Err(_) => return None,
        }
    }
}

/// Sends `e` to the client as a FATAL ErrorResponse with its SQLSTATE,
/// when the relay ends on it; a client that does not read it is closed
/// all the same.
pub(super) async fn send_fatal<W: AsyncWrite + Unpin>(cw: &mut W, e: &ProxyError) {
    let _ = cw
        .write_all(&wire::error("FATAL", e.sqlstate(), &e.to_string()).to_bytes())
        .await;
    let _ = cw.flush().await;
}

/// Whether a query of the client is still running (a Query, Sync or
/// FunctionCall without its ReadyForQuery yet).
fn in_flight(started: &Mutex<VecDeque<Instant>>) -> bool {
    !started
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_empty()
}
