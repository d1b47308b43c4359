//! Proxy mode's relay for masked users: every statement is analyzed before
//! it is forwarded, and protected columns are sanitized on the way back.
//!
//! **Client to server.** Message by message. A `Query` is analyzed whole
//! ([`crate::analysis::analyze`]); a `Parse` alone, and `Bind` and
//! `Execute` are followed to the statement they run. A refused message is
//! not forwarded: the proxy forwards a `Sync` in its place, skips the rest
//! of the client's extended-protocol batch up to its own `Sync`, and,
//! when the server's `ReadyForQuery` for that `Sync` comes back, sends the
//! refusal just before it; so the client reads the answers to what it
//! sent before the refused message, then the refusal, then
//! ReadyForQuery, in that order. (A refused statement does not abort an
//! open transaction, as a failed one would.) `FunctionCall` is refused;
//! COPY data and anything unknown end the session.
//!
//! **Server to client.** Each result is matched to the statement or
//! `Execute` it answers, in order. Values of protected columns (by the
//! analysis, and by the origin a RowDescription names) are sanitized in
//! batches of up to `[masking] batch_rows` rows. A row or description
//! whose column count differs from the analysis ends the session (the
//! catalog changed under it). Errors and notices are scrubbed
//! ([`super::scrub`]); notifications are dropped.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::analysis::{self, Context, Effect, OutputColumn, ParseCache, Refusal, Rule};
use crate::config::Limits;
use crate::error::{ProxyError, Result};
use crate::sanitize::Sanitizer;
use crate::wire::{self, Frame, Reader};

use super::catalog::SessionCatalog;
use super::scrub::scrub;

/// What the server's next answers belong to.
#[derive(Debug)]
enum Expect {
    /// A statement of a simple-protocol query: its result columns, and
    /// what it changes in the session once completed.
    Statement {
        output: Vec<OutputColumn>,
        effect: Option<Effect>,
    },
    /// An `Execute` of a portal with these result columns.
    Execute { output: Vec<OutputColumn> },
    /// A `ReadyForQuery`; with a refusal to send just before it.
    Ready(Option<Refusal>),
}

/// State both directions share (one task runs both: never contended).
#[derive(Default)]
struct Shared {
    expect: VecDeque<Expect>,
    session: analysis::Session,
}

/// Everything a proxy-mode session needs.
pub struct ProxyMode {
    /// The catalog and policy read at the session's start.
    pub catalog: SessionCatalog,
    /// Parse trees shared by every session.
    pub cache: ParseCache,
    /// The sanitizing pool.
    pub sanitizer: Arc<Sanitizer>,
    /// Rows sanitized together.
    pub batch_rows: usize,
}

/// A protected column of a result: its position and rule label.
type Protected = Vec<(usize, Arc<str>)>;

/// Which columns of a result are protected: by the analysis, and by the
/// RowDescription's origin (table OID, column number) when there is one.
fn protected_columns(
    output: &[OutputColumn],
    description: Option<&[(u32, i16)]>,
    catalog: &SessionCatalog,
) -> Protected {
    let mut out = Vec::new();
    for (i, col) in output.iter().enumerate() {
        let by_analysis = match col {
            OutputColumn::Protected(p) => Some(p.rule.clone()),
            OutputColumn::Plain => None,
        };
        let by_origin = description
            .and_then(|d| d.get(i))
            .and_then(|o| catalog.origins.get(o).cloned());
        if let Some(rule) = by_analysis.or(by_origin) {
            out.push((i, Arc::from(rule.as_str())));
        }
    }
    out
}

/// The (table OID, column number) of each field of a RowDescription.
fn row_origins(body: &[u8]) -> Result<Vec<(u32, i16)>> {
    let mut r = Reader::new(body);
    let n = r.i16()?;
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    for _ in 0..n {
        r.cstr()?;
        let table = r.i32()? as u32;
        let attnum = r.i16()?;
        r.bytes(4 + 2 + 4 + 2)?;
        out.push((table, attnum));
    }
    Ok(out)
}

fn cstr_at(body: &[u8], skip: usize) -> Result<String> {
    let mut r = Reader::new(body);
    for _ in 0..skip {
        r.cstr()?;
    }
    Ok(r.cstr()?.to_owned())
}

fn refusal_frame(r: &Refusal) -> Frame {
    wire::error("ERROR", r.rule.sqlstate(), &r.to_string())
}

fn sync() -> Frame {
    Frame::new(b'S', Vec::new())
}

impl ProxyMode {
    fn context<'a>(&'a self) -> Context<'a> {
        Context {
            catalog: &self.catalog.catalog,
            policy: &self.catalog.policy,
            search_path: &self.catalog.search_path,
            user: &self.catalog.user,
            cache: &self.cache,
        }
    }

    /// Relays until either side ends.
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
        let shared = Mutex::new(Shared::default());
        let max = limits.max_message_bytes;
        let to_server = async {
            let mut skipping = false;
            loop {
                let Some(f) = wire::read_frame(&mut cr, max).await? else {
                    return Ok::<(), ProxyError>(());
                };
                if skipping && f.tag != b'X' {
                    if f.tag == b'S' {
                        skipping = false;
                    }
                    continue;
                }
                let refused = {
                    let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    self.client_message(&f, &mut s)?
                };
                match refused {
                    None => super::write(&mut uw, &f).await?,
                    Some(r) => {
                        tracing::info!(rule = r.rule.code(), "statement refused in proxy mode");
                        crate::metrics::inc(&crate::metrics::METRICS.masking_refused);
                        skipping = !matches!(f.tag, b'Q' | b'F');
                        shared
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .expect
                            .push_back(Expect::Ready(Some(r)));
                        super::write(&mut uw, &sync()).await?;
                    }
                }
                uw.flush().await?;
                if f.tag == b'X' {
                    return Ok(());
                }
            }
        };
        let to_client = async {
            let mut rows: Vec<Frame> = Vec::new();
            let mut current: Protected = Vec::new();
            let mut width: Option<usize> = None;
            loop {
                let Some(f) = wire::read_frame(&mut ur, max).await? else {
                    return Ok::<(), ProxyError>(());
                };
                if f.tag != b'D' && !rows.is_empty() {
                    self.flush(&mut rows, &current, &mut cw).await?;
                }
                match f.tag {
                    b'T' => {
                        let origins = row_origins(&f.body)?;
                        {
                            let s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            if let Some(Expect::Statement { output, .. }) = s.expect.front() {
                                if output.len() != origins.len() {
                                    return Err(ProxyError::Protocol(format!(
                                        "a result of {} columns where the analysis expected {}: the catalog changed; reconnect",
                                        origins.len(),
                                        output.len()
                                    )));
                                }
                                current = protected_columns(output, Some(&origins), &self.catalog);
                                width = Some(output.len());
                            }
                        }
                        super::write(&mut cw, &f).await?;
                    }
                    b'D' => {
                        if rows.is_empty() {
                            let s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            match s.expect.front() {
                                Some(Expect::Statement { output, .. }) => {
                                    if width.is_none() {
                                        current = protected_columns(output, None, &self.catalog);
                                        width = Some(output.len());
                                    }
                                }
                                Some(Expect::Execute { output }) => {
                                    current = protected_columns(output, None, &self.catalog);
                                    width = Some(output.len());
                                }
                                _ => {
                                    return Err(ProxyError::Protocol(
                                        "a row the proxy cannot match to a statement".into(),
                                    ))
                                }
                            }
                        }
                        let n = Reader::new(&f.body).i16()?;
                        if Some(usize::try_from(n).unwrap_or(usize::MAX)) != width {
                            return Err(ProxyError::Protocol(format!(
                                "a row of {n} columns where the analysis expected {}: the catalog changed; reconnect",
                                width.unwrap_or(0)
                            )));
                        }
                        if current.is_empty() {
                            super::write(&mut cw, &f).await?;
                        } else {
                            rows.push(f);
                            if rows.len() >= self.batch_rows {
                                self.flush(&mut rows, &current, &mut cw).await?;
                            }
                        }
                    }
                    b'C' | b'I' | b's' => {
                        {
                            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            if matches!(
                                s.expect.front(),
                                Some(Expect::Statement { .. } | Expect::Execute { .. })
                            ) {
                                if let Some(Expect::Statement {
                                    effect: Some(e), ..
                                }) = s.expect.pop_front()
                                {
                                    if f.tag == b'C' {
                                        s.session.apply(&e);
                                    }
                                }
                            }
                        }
                        current.clear();
                        width = None;
                        super::write(&mut cw, &f).await?;
                    }
                    b'E' | b'N' => {
                        if f.tag == b'E' {
                            // The server skips the rest of the batch.
                            {
                                let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                                while matches!(
                                    s.expect.front(),
                                    Some(Expect::Statement { .. } | Expect::Execute { .. })
                                ) {
                                    s.expect.pop_front();
                                }
                            }
                            current.clear();
                            width = None;
                        }
                        super::write(&mut cw, &scrub(f.tag, &f.body)?).await?;
                    }
                    b'Z' => {
                        let refusal = {
                            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            loop {
                                match s.expect.pop_front() {
                                    Some(Expect::Ready(r)) => break r,
                                    Some(_) => continue,
                                    None => break None,
                                }
                            }
                        };
                        if let Some(r) = refusal {
                            super::write(&mut cw, &refusal_frame(&r)).await?;
                        }
                        current.clear();
                        width = None;
                        super::write(&mut cw, &f).await?;
                        cw.flush().await?;
                    }
                    // Parse, Bind and Close complete; parameter
                    // descriptions; NoData; settings the server reports.
                    b'1' | b'2' | b'3' | b't' | b'n' | b'S' => super::write(&mut cw, &f).await?,
                    // Notifications: LISTEN is refused; drop anything else.
                    b'A' => {}
                    other => {
                        return Err(ProxyError::Protocol(format!(
                            "proxy mode does not relay server message '{}'",
                            char::from(other)
                        )))
                    }
                }
            }
        };
        tokio::select! {
            r = to_server => r,
            r = to_client => r,
        }
    }

    /// Checks one client message and records what its answers will be;
    /// `Some` when it is refused (the caller forwards a Sync instead).
    fn client_message(&self, f: &Frame, s: &mut Shared) -> Result<Option<Refusal>> {
        let ctx = self.context();
        match f.tag {
            b'Q' => {
                let sql = cstr_at(&f.body, 0)?;
                match analysis::analyze(&sql, &ctx, &s.session) {
                    Ok(a) => {
                        for st in a.statements {
                            s.expect.push_back(Expect::Statement {
                                output: st.output,
                                effect: st.effect,
                            });
                        }
                        s.expect.push_back(Expect::Ready(None));
                        Ok(None)
                    }
                    Err(r) => Ok(Some(r)),
                }
            }
            b'P' => {
                let name = cstr_at(&f.body, 0)?;
                let sql = cstr_at(&f.body, 1)?;
                match analysis::analyze_parse(&sql, &ctx, &s.session) {
                    Ok(a) => {
                        s.session.record_statement(&name, a.output);
                        Ok(None)
                    }
                    Err(r) => Ok(Some(r)),
                }
            }
            b'B' => {
                let portal = cstr_at(&f.body, 0)?;
                let statement = cstr_at(&f.body, 1)?;
                match s.session.prepared(&statement).map(<[OutputColumn]>::to_vec) {
                    Some(output) => {
                        s.session.record_portal(&portal, output);
                        Ok(None)
                    }
                    None => Ok(Some(Refusal::new(
                        Rule::StatementKind,
                        "Bind of a statement the proxy did not see parsed",
                    ))),
                }
            }
            b'E' => {
                let portal = cstr_at(&f.body, 0)?;
                match s.session.cursor(&portal).map(<[OutputColumn]>::to_vec) {
                    Some(output) => {
                        s.expect.push_back(Expect::Execute { output });
                        Ok(None)
                    }
                    None => Ok(Some(Refusal::new(
                        Rule::StatementKind,
                        "Execute of a portal the proxy did not see bound",
                    ))),
                }
            }
            b'S' => {
                s.expect.push_back(Expect::Ready(None));
                Ok(None)
            }
            b'D' | b'C' | b'H' | b'X' => Ok(None),
            b'F' => Ok(Some(Refusal::new(
                Rule::StatementKind,
                "the function-call protocol message is not allowed in proxy mode",
            ))),
            other => Err(ProxyError::Protocol(format!(
                "proxy mode does not relay client message '{}'",
                char::from(other)
            ))),
        }
    }

    /// Sanitizes the protected fields of `rows` (one batch) and writes them.
    async fn flush<W: AsyncWrite + Unpin>(
        &self,
        rows: &mut Vec<Frame>,
        protected: &Protected,
        cw: &mut W,
    ) -> Result<()> {
        let mut items = Vec::new();
        for row in rows.iter() {
            let fields = wire::parse_data_row(&row.body)?;
            for (i, rule) in protected {
                if let Some(Some(v)) = fields.get(*i) {
                    let text = std::str::from_utf8(v).map_err(|_| {
                        ProxyError::Protocol(
                            "a protected value is not UTF-8 text: proxy mode needs client_encoding UTF8"
                                .into(),
                        )
                    })?;
                    items.push((rule.clone(), text.to_owned()));
                }
            }
        }
        let mut out = self.sanitizer.run(items).await?.into_iter();
        for row in rows.drain(..) {
            let fields = wire::parse_data_row(&row.body)?;
            let mut body = Vec::with_capacity(row.body.len());
            body.extend_from_slice(&(fields.len() as i16).to_be_bytes());
            for (i, field) in fields.iter().enumerate() {
                let replaced;
                let value: Option<&[u8]> = match field {
                    Some(_) if protected.iter().any(|(p, _)| *p == i) => {
                        replaced = out.next().ok_or_else(|| {
                            ProxyError::Protocol("the sanitizer returned too few values".into())
                        })?;
                        Some(replaced.as_bytes())
                    }
                    other => *other,
                };
                match value {
                    None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(v) => {
                        body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                        body.extend_from_slice(v);
                    }
                }
            }
            super::write(cw, &Frame::new(b'D', body)).await?;
        }
        Ok(())
    }
}
