//! Proxy mode's relay for masked users: every statement is analyzed before
//! it is forwarded, and protected columns are sanitized on the way back.
//!
//! This is the I/O loop: it reads the client's and the server's messages,
//! hands each to the protocol state machine ([`super::protocol`]), and
//! performs the steps it returns (forward, send, sanitize a batch of rows
//! on the sanitizer's pool, read the catalog again, end the session).
//! What is refused, recorded, relayed and sanitized, and in which order,
//! is the machine's; the idle limit is the database-mode relay's
//! ([`super::relay::read_client`]).
//!
//! A row of a result with protected columns is read field by field
//! ([`super::batch::read_row`]) and held to `limits.max_message_bytes`
//! as it is sent, sanitized, never as the server sent it, whose length
//! would tell the raw values'.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::analysis::ParseCache;
use crate::config::Limits;
use crate::error::{ProxyError, Result};
use crate::sanitize::Sanitizer;
use crate::wire::{self, Frame};

use super::batch;
use super::cancel::Interrupts;
use super::catalog::SessionCatalog;
use super::protocol::{rows, BackendTag, ClientStep, Machine, RowBatch, ServerStep, Settings};
use super::refresh::Refresh;
use super::relay;

/// Everything a proxy-mode session needs.
pub struct ProxyMode {
    /// The catalog and policy read at the session's start.
    pub catalog: Arc<SessionCatalog>,
    /// How to read them again.
    pub refresh: Refresh,
    /// Parse trees shared by every session.
    pub cache: ParseCache,
    /// The sanitizing pool.
    pub sanitizer: Arc<Sanitizer>,
    /// Rows sanitized together.
    pub batch_rows: usize,
    /// The engine's input limit (`engine.max_input_bytes`): the largest
    /// raw value the sanitizer takes, which bounds the raw part of a row
    /// ([`batch::protected_row_limit`]).
    pub max_input_bytes: usize,
    /// The client's cancel requests ([`super::cancel`]): one stops the
    /// proxy's own sanitizing of the result being relayed.
    pub interrupts: Option<Interrupts>,
}

/// Rows of a result without protected columns larger than this are
/// copied to the client as they are read ([`wire::copy_body`]); smaller
/// ones are read whole and written at once.
const STREAM_ROWS_OVER: usize = 256 << 10;

/// The length field of a message whose body is `len` bytes.
fn frame_length(len: usize) -> Result<[u8; 4]> {
    i32::try_from(len + 4)
        .map(i32::to_be_bytes)
        .map_err(|_| ProxyError::Protocol(format!("a message of {len} bytes")))
}

/// The next cancel request in `interrupts`; never, without any.
async fn interrupted(interrupts: &mut Option<Interrupts>) {
    if let Some(rx) = interrupts {
        if rx.changed().await.is_ok() {
            return;
        }
    }
    std::future::pending().await
}

/// The machine, between two messages (both directions run in one task:
/// the lock is never contended, and never held across an await).
fn lock(m: &Mutex<Machine>) -> MutexGuard<'_, Machine> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends the session for a result with protected columns that has a row
/// too large once sanitized, or that the server failed (a row it could
/// not build, any other error): the same FATAL 54000 naming the limit
/// whatever the cause (`e`); the error to return.
async fn fail_row<W: AsyncWrite + Unpin>(cw: &mut W, e: ProxyError) -> ProxyError {
    tracing::warn!(error = %e, "result row refused");
    relay::send_fatal(cw, &e).await;
    e
}

impl ProxyMode {
    /// Relays until either side ends. A client silent for
    /// `limits.idle_timeout_secs` while none of its statements awaits an
    /// answer, or a message over `limits.max_message_bytes` either way,
    /// ends the session with a FATAL error naming the limit, as in
    /// database mode (a server message's length is not named: see
    /// [`ProxyError::proxy_mode_server_message_too_large`]).
    pub async fn relay<CR, CW, UR, UW>(
        &self,
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
        let machine = Mutex::new(Machine::new(Settings {
            catalog: self.catalog.clone(),
            cache: self.cache.clone(),
            batch_rows: self.batch_rows,
            max_message_bytes: limits.max_message_bytes,
            max_input_bytes: self.max_input_bytes,
        }));
        let max = limits.max_message_bytes;
        let idle = limits.idle_timeout_secs;
        // Whether the session ends on a limit the client is told of, and
        // whether the client's stream is at a message boundary, so that it
        // can read it (nothing half written to it).
        let tell_client = AtomicBool::new(false);
        let client_at_boundary = AtomicBool::new(true);
        let to_server = async {
            loop {
                // A client whose statement still awaits its answers is
                // waiting, not idle.
                let read = wire::read_frame(&mut cr, max);
                let frame = match relay::read_client(read, idle, || lock(&machine).awaiting()).await
                {
                    Some(Ok(frame)) => frame,
                    // A length that cannot be followed or over the limit.
                    Some(Err(e @ ProxyError::Protocol(_))) => {
                        tell_client.store(true, Ordering::Relaxed);
                        return Err(ProxyError::client_message_too_large(&e));
                    }
                    Some(Err(e)) => return Err(e),
                    None => {
                        tell_client.store(true, Ordering::Relaxed);
                        return Err(ProxyError::idle(idle));
                    }
                };
                let Some(frame) = frame else {
                    return Ok::<(), ProxyError>(());
                };
                let mut steps = lock(&machine).on_client(frame);
                let mut wrote = false;
                while !steps.is_empty() {
                    let mut reload = false;
                    for step in steps {
                        match step {
                            ClientStep::ToServer(f) => {
                                super::write(&mut uw, &f).await?;
                                wrote = true;
                            }
                            ClientStep::ReloadCatalog => reload = true,
                            ClientStep::End => {
                                uw.flush().await?;
                                return Ok(());
                            }
                            ClientStep::Close(e) => return Err(e),
                        }
                    }
                    steps = if reload {
                        let loaded = self.reload().await;
                        lock(&machine).on_catalog(loaded)
                    } else {
                        Vec::new()
                    };
                }
                if wrote {
                    uw.flush().await?;
                }
            }
        };
        let mut interrupts = self.interrupts.clone();
        let to_client = async {
            loop {
                // A cancel is taken between two server messages, as it
                // comes: it stops the proxy's sanitizing of the result
                // being relayed, whether or not the server has more.
                let tag = tokio::select! {
                    biased;
                    () = interrupted(&mut interrupts) => {
                        let steps = lock(&machine).cancel();
                        client_at_boundary.store(false, Ordering::Relaxed);
                        self.perform(&machine, steps, &mut cw, max, &mut interrupts)
                            .await?;
                        client_at_boundary.store(true, Ordering::Relaxed);
                        continue;
                    }
                    tag = wire::read_tag(&mut ur) => tag?,
                };
                let Some(tag) = tag else {
                    return Ok::<(), ProxyError>(());
                };
                let len = wire::read_length(&mut ur, tag).await?;
                // A row with protected columns is judged as it would be
                // sent, never by its raw length.
                let plan = lock(&machine).row_read(BackendTag::of(tag));
                let f = match plan {
                    Some(p) => {
                        let protected = |i| p.protected.contains(&i);
                        match batch::read_row(&mut ur, len, protected, p.limit, p.max_value).await?
                        {
                            Some(body) => Frame::new(tag, body),
                            // Every ending of a protected result loses the
                            // batch it was in, whatever ended it: which rows
                            // came before the FATAL would tell which limit a
                            // raw value broke.
                            None => {
                                let e = ProxyError::protected_row_too_large(max);
                                return Err(fail_row(&mut cw, e).await);
                            }
                        }
                    }
                    None if len > max => {
                        let e = ProxyError::proxy_mode_server_message_too_large(max);
                        tracing::warn!(error = %e, "server message refused");
                        relay::send_fatal(&mut cw, &e).await;
                        return Err(e);
                    }
                    // A large row relayed as the server sent it (no
                    // protected column) is copied as it is read, never
                    // held whole.
                    None if tag == BackendTag::DataRow.byte()
                        && len > STREAM_ROWS_OVER
                        && lock(&machine).relays_rows_as_sent() =>
                    {
                        let width = ur.read_i16().await?;
                        lock(&machine).streamed_row(width)?;
                        client_at_boundary.store(false, Ordering::Relaxed);
                        let mut head = [tag, 0, 0, 0, 0];
                        head[1..].copy_from_slice(&frame_length(len)?);
                        cw.write_all(&head).await?;
                        cw.write_all(&width.to_be_bytes()).await?;
                        wire::copy_body(&mut ur, &mut cw, len - 2).await?;
                        client_at_boundary.store(true, Ordering::Relaxed);
                        continue;
                    }
                    None => wire::read_body(&mut ur, tag, len, max).await?,
                };
                let steps = lock(&machine).on_server(f);
                client_at_boundary.store(false, Ordering::Relaxed);
                self.perform(&machine, steps, &mut cw, max, &mut interrupts)
                    .await?;
                client_at_boundary.store(true, Ordering::Relaxed);
            }
        };
        let ending = tokio::select! {
            r = to_server => r,
            r = to_client => r,
        };
        // Idle, or a message over the limit: the client reads why it is
        // closed, as in database mode.
        let tell =
            tell_client.load(Ordering::Relaxed) && client_at_boundary.load(Ordering::Relaxed);
        if let (Err(e), true) = (&ending, tell) {
            relay::send_fatal(&mut cw, e).await;
        }
        ending
    }

    /// The catalog read again, or `None` when the read failed.
    async fn reload(&self) -> Option<SessionCatalog> {
        match self.refresh.load().await {
            Ok(c) => {
                tracing::info!("proxy mode's catalog read again");
                Some(c)
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading proxy mode's catalog again failed");
                None
            }
        }
    }

    /// Performs the steps of one server message (or of a cancel) in
    /// order. A cancel request while a batch is sanitized stops it: the
    /// machine says what goes instead ([`Machine::interrupted`]).
    async fn perform<W: AsyncWrite + Unpin>(
        &self,
        machine: &Mutex<Machine>,
        steps: Vec<ServerStep>,
        cw: &mut W,
        max: usize,
        interrupts: &mut Option<Interrupts>,
    ) -> Result<()> {
        let mut steps = steps.into_iter();
        while let Some(step) = steps.next() {
            match step {
                ServerStep::ToClient(f) => super::write(cw, &f).await?,
                ServerStep::FlushClient => cw.flush().await?,
                ServerStep::Sanitize(b) => {
                    if !self.sanitize(b, cw, max, interrupts).await? {
                        let rest = lock(machine).interrupted(steps.collect());
                        steps = rest.into_iter();
                    }
                }
                ServerStep::Fail(e) => return Err(fail_row(cw, e).await),
                ServerStep::Close(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sanitizes the protected fields of one batch of rows and writes
    /// them; `false`, nothing written, when a cancel request of the client
    /// came first. A row over its limit as sent, or a value the sanitizer
    /// cannot take, ends the session with the FATAL naming `max`, and none
    /// of the batch is sent: every ending of a protected result loses the
    /// batch it was in (after the batches before it), whatever ended it.
    async fn sanitize<W: AsyncWrite + Unpin>(
        &self,
        batch: RowBatch,
        cw: &mut W,
        max: usize,
        interrupts: &mut Option<Interrupts>,
    ) -> Result<bool> {
        let parsed = rows::parse(&batch.rows)?;
        let items = rows::inputs(&parsed, &batch.protected)?;
        // A value the sanitizer cannot take ends the session as a row over
        // the limit does (read_row already stops one over the input limit).
        // The workers skip the shares of a batch dropped on a cancel.
        let run = tokio::select! {
            biased;
            () = interrupted(interrupts) => return Ok(false),
            run = self.sanitizer.run(items) => run,
        };
        let out = match run {
            Ok(out) => out,
            Err(e) => {
                tracing::warn!(error = %e, "a protected value could not be sanitized");
                return Err(fail_row(cw, ProxyError::protected_row_too_large(max)).await);
            }
        };
        // The values the sanitizer took were its own copies: the raw rows
        // stay until the rows sent are built, one at a time.
        let Some(sent) = rows::rebuild(&parsed, &batch.protected, &out, batch.limit)? else {
            return Err(fail_row(cw, ProxyError::protected_row_too_large(max)).await);
        };
        for fields in &sent {
            super::write(cw, &rows::frame(fields)).await?;
        }
        Ok(true)
    }
}
