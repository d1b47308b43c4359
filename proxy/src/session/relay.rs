//! The relay: bytes both ways, unchanged, for masked and unmasked users
//! alike (a masked user's rows were masked by the database).
//!
//! Each direction is read in chunks and written on as it came; a
//! [`Scanner`] follows the message boundaries to enforce the client's
//! message-size limit and to time queries (first message to
//! ReadyForQuery) for the metrics.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::Limits;
use crate::error::{ProxyError, Result};
use crate::metrics::{inc, METRICS};
use crate::wire::{self, Scanner};

const CHUNK: usize = 64 << 10;

/// Relays until either side ends. An oversized client message, or a client
/// silent for `limits.idle_timeout_secs` while none of its queries runs,
/// ends the session with a FATAL error to the client (when the server's
/// stream is at a message boundary, so the error can be read).
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
            let n = if idle > 0 {
                loop {
                    // `read` is cancel-safe: a timeout loses no bytes.
                    match tokio::time::timeout(Duration::from_secs(idle), cr.read(&mut buf)).await {
                        Ok(r) => break r?,
                        // A client waiting for its query is not idle.
                        Err(_) if in_flight(&started) => continue,
                        Err(_) => return Err(Ending::Idle(idle)),
                    }
                }
            } else {
                cr.read(&mut buf).await?
            };
            if n == 0 {
                return Ok::<(), Ending>(());
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
                .map_err(Ending::TooLarge)?;
            uw.write_all(&buf[..n]).await?;
            uw.flush().await?;
        }
    };
    let to_client = async {
        let mut buf = vec![0u8; CHUNK];
        let mut scanner = Scanner::default();
        loop {
            let n = ur.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), ProxyError>(());
            }
            scanner.feed(&buf[..n], usize::MAX >> 2, |tag, _| match tag {
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
            })?;
            client_at_boundary.store(false, Ordering::Relaxed);
            cw.write_all(&buf[..n]).await?;
            cw.flush().await?;
            client_at_boundary.store(scanner.at_boundary(), Ordering::Relaxed);
        }
    };
    let ending = tokio::select! {
        r = to_server => match r {
            Ok(()) => return Ok(()),
            Err(e) => e,
        },
        r = to_client => return r,
    };
    let (code, message) = match ending {
        Ending::Idle(s) => (
            "57P05",
            format!("dptext-proxy: idle for {s} s (limits.idle_timeout_secs): session closed"),
        ),
        Ending::TooLarge(e) => (
            "08P01",
            format!("dptext-proxy: {e} (limits.max_message_bytes): session closed"),
        ),
        Ending::Io(e) => return Err(e.into()),
    };
    if client_at_boundary.load(Ordering::Relaxed) {
        let _ = cw
            .write_all(&wire::error("FATAL", code, &message).to_bytes())
            .await;
        let _ = cw.flush().await;
    }
    Err(ProxyError::Protocol(message))
}

/// Whether a query of the client is still running (a Query, Sync or
/// FunctionCall without its ReadyForQuery yet).
fn in_flight(started: &Mutex<VecDeque<Instant>>) -> bool {
    !started
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .is_empty()
}

/// Why the client's direction ended the session.
enum Ending {
    Idle(u64),
    TooLarge(ProxyError),
    Io(std::io::Error),
}

impl From<std::io::Error> for Ending {
    fn from(e: std::io::Error) -> Self {
        Ending::Io(e)
    }
}
