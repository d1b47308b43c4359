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
//! **Server to client.** Every answer is matched, in order, to the client
//! message it answers; an answer the proxy did not expect ends the
//! session. What the server holds is recorded only when it confirms it:
//! a prepared statement on ParseComplete, a portal on BindComplete, the
//! effect of a `DECLARE`, `PREPARE`, `CLOSE`, `DEALLOCATE` or `DISCARD`
//! (sent as a query or executed as a portal) on its CommandComplete, a
//! `Close` on CloseComplete; a failed message records nothing. Before
//! each `Execute` the proxy asks the server to describe the portal and
//! keeps that description to itself, so that every result, whichever
//! protocol asked for it, comes with the origins of its columns. Values
//! of protected columns (by the analysis, and by the origin a
//! RowDescription names) are sanitized in batches of up to `[masking]
//! batch_rows` rows ([`super::batch`]); such rows are held to
//! `limits.max_message_bytes` as they are sent, sanitized, never as the
//! server sent them, whose length would tell the raw values'. A result
//! whose column count differs from the analysis ends the session (the
//! catalog changed under it). Errors and
//! notices are scrubbed ([`super::scrub`]); notifications are dropped.
//! Statements are analyzed with the search path the server has committed
//! ([`super::path`]). A `Query` or `Parse` refused because it names a
//! relation the session's catalog does not know is analyzed once more
//! after the catalog is read again ([`super::refresh`]), when the session
//! is idle.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::analysis::{self, Context, Effect, OutputColumn, ParseCache, PathChange, Refusal, Rule};
use crate::config::Limits;
use crate::error::{ProxyError, Result};
use crate::sanitize::Sanitizer;
use crate::wire::{self, Frame, Reader};

use super::batch::{self, Batch};
use super::catalog::SessionCatalog;
use super::path::{self, SearchPath};
use super::refresh::Refresh;
use super::scrub::{self, scrub};

/// What the server's next answers belong to, one entry per client
/// message that gets an answer, in order.
#[derive(Debug)]
enum Expect {
    /// A statement of a simple-protocol query: its result columns, what
    /// it changes in the session once completed, and whether it resets
    /// the search path.
    Statement {
        output: Vec<OutputColumn>,
        effect: Option<Effect>,
        resets_path: bool,
        /// A `FETCH` or `EXECUTE`: it runs what a name stands for when the
        /// server runs it, which the analysis could only guess.
        runs_named: bool,
    },
    /// The proxy's query of the search path after a `SET search_path`:
    /// its rows (one schema each) stay in the proxy.
    PathProbe { schemas: Vec<String> },
    /// `Parse`: recorded on ParseComplete.
    Parse {
        name: String,
        output: Vec<OutputColumn>,
        effect: Option<Effect>,
        /// As `Statement::runs_named`.
        runs_named: bool,
    },
    /// `Bind`: recorded on BindComplete.
    Bind { portal: String, statement: String },
    /// The client's own `Describe`: relayed.
    Describe,
    /// `Execute`, after the proxy's own `Describe` of the portal (whose
    /// answer it keeps: `described` once it came).
    Execute { portal: String, described: bool },
    /// `Close` of a statement (`true`) or portal: applied on CloseComplete.
    Close { statement: bool, name: String },
    /// The `ReadyForQuery` of a Sync (the client's, or the one the proxy
    /// sends in place of a refused message); with a refusal to send just
    /// before it.
    Ready(Option<Refusal>),
    /// The `ReadyForQuery` of a simple-protocol Query.
    QueryReady,
    /// A `Flush`: no answer, but the server may fail at it (a
    /// `statement_timeout` or cancel waiting for the next message it
    /// reads), and then discards everything up to the next Sync; popped
    /// when an answer to a later message comes.
    Flush,
}

impl Expect {
    /// Whether it answers an extended-protocol message: after an error in
    /// one, the server discards every message up to the next Sync,
    /// Queries included.
    fn extended(&self) -> bool {
        matches!(
            self,
            Expect::Parse { .. }
                | Expect::Bind { .. }
                | Expect::Describe
                | Expect::Execute { .. }
                | Expect::Close { .. }
                | Expect::Flush
        )
    }
}

/// State both directions share (one task runs both: never contended).
struct Shared {
    expect: VecDeque<Expect>,
    /// Prepared statements and portals as the server holds them.
    session: analysis::Session,
    /// What executing each prepared statement changes (a statement that
    /// is itself a `DECLARE`, `PREPARE`, ...).
    statement_effects: std::collections::HashMap<String, Option<Effect>>,
    /// The same for portals.
    portal_effects: std::collections::HashMap<String, Option<Effect>>,
    /// Protocol-level statements that are a `FETCH` or an `EXECUTE`, and
    /// the portals bound from them: what they run is whatever the cursor
    /// or prepared statement they name is when the server runs them (it
    /// may have been declared again over other columns since the proxy
    /// analysed them), so the proxy takes them to output protected
    /// columns ([`answering`]).
    runs_named_statements: std::collections::HashSet<String>,
    /// The same for portals.
    runs_named_portals: std::collections::HashSet<String>,
    /// Names of protocol-level statements the client has sent a `FETCH`
    /// or `EXECUTE` to be parsed as, and of portals it has bound from
    /// them, as the client's messages come (before the server confirms
    /// them, and never forgotten: a name once used so stays suspect). The
    /// server stores every row of such a portal the first time it runs,
    /// so one read in part (`Execute` with a row limit, a SQL `FETCH` of a
    /// named portal) would build padded rows it never sends: they bind
    /// only to the unnamed portal, which SQL cannot name, and are executed
    /// whole ([`ProxyMode::client_message`]).
    stored_statements: std::collections::HashSet<String>,
    /// The same for portals.
    stored_portals: std::collections::HashSet<String>,
    /// The search path, as the server committed it.
    path: SearchPath,
    /// The catalog statements are analyzed against: the session's
    /// start's, or the last one read since.
    catalog: Arc<SessionCatalog>,
    /// Whether the last ReadyForQuery reported a transaction block.
    in_block: bool,
    /// The server failed an extended-protocol message before the proxy had
    /// read the client's `Sync` after it: the server discards every
    /// message up to that `Sync`, so what the client sends until then
    /// expects no answer ([`Shared::expect`]). Without it, an `Execute`
    /// read after the error came expected an answer the server never sent,
    /// and the session ended at the next ReadyForQuery (seen under load).
    skip_to_sync: bool,
    /// The client has sent extended-protocol messages since its last
    /// `Sync` (or since the proxy sent one for a refused message): a
    /// simple Query now is refused, because the server would run it or
    /// discard it depending on whether an earlier message failed, and an
    /// interrupt's error at a `Flush` before it could not be told from the
    /// Query's own (a review desynchronized the answers that way).
    batch_open: bool,
}

impl Shared {
    /// Records the answer a message forwarded to the server will get,
    /// unless the server is discarding messages up to a `Sync`
    /// ([`Shared::skip_to_sync`]); the `ReadyForQuery` of that `Sync` (the
    /// client's, or the one the proxy sends for a refused message) ends
    /// the skip.
    fn expect(&mut self, e: Expect) {
        if self.skip_to_sync {
            if !matches!(e, Expect::Ready(_)) {
                return;
            }
            self.skip_to_sync = false;
        }
        self.expect.push_back(e);
    }

    fn new(catalog: Arc<SessionCatalog>) -> Self {
        Shared {
            expect: VecDeque::new(),
            session: analysis::Session::default(),
            statement_effects: Default::default(),
            portal_effects: Default::default(),
            runs_named_statements: Default::default(),
            runs_named_portals: Default::default(),
            stored_statements: Default::default(),
            stored_portals: Default::default(),
            path: SearchPath::new(&catalog.search_path),
            catalog,
            in_block: false,
            skip_to_sync: false,
            batch_open: false,
        }
    }

    /// Nothing in flight and no transaction block: the session's next
    /// statement starts a snapshot of its own.
    fn idle(&self) -> bool {
        self.expect.is_empty() && !self.in_block
    }
}

fn unexpected(tag: u8) -> ProxyError {
    ProxyError::Protocol(format!(
        "the server sent '{}' where proxy mode expected another answer: session ended",
        char::from(tag)
    ))
}

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
}

/// A protected column of a result: its position and rule label.
type Protected = Vec<(usize, Arc<str>)>;

/// Which columns of a result are protected: by the analysis, and by the
/// origin (table OID, column number) its RowDescription names.
fn protected_columns(
    output: &[OutputColumn],
    origins: &[(u32, i16)],
    catalog: &SessionCatalog,
) -> Protected {
    let mut out = Vec::new();
    for (i, col) in output.iter().enumerate() {
        let by_analysis = match col {
            OutputColumn::Protected(p) => Some(p.rule.clone()),
            OutputColumn::Plain | OutputColumn::Opaque { .. } => None,
        };
        let by_origin = origins.get(i).and_then(|o| catalog.origins.get(o).cloned());
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

/// The bytes of `body` after its first `n` strings.
fn after_cstrs(body: &[u8], n: usize) -> Result<&[u8]> {
    let mut at = 0;
    for _ in 0..n {
        let end = body
            .get(at..)
            .and_then(|b| b.iter().position(|&c| c == 0))
            .ok_or_else(|| ProxyError::Protocol("a message string without its end".into()))?;
        at += end + 1;
    }
    Ok(body.get(at..).unwrap_or_default())
}

/// A `Query` forwarding `sql`.
fn query_body(sql: &str) -> Vec<u8> {
    let mut body = Vec::with_capacity(sql.len() + 1);
    wire::put_cstr(&mut body, sql);
    body
}

/// A `Parse` of statement `name` forwarding `sql`, with the parameter
/// types of the client's (`rest`).
fn parse_body(name: &str, sql: &str, rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(name.len() + sql.len() + rest.len() + 2);
    wire::put_cstr(&mut body, name);
    wire::put_cstr(&mut body, sql);
    body.extend_from_slice(rest);
    body
}

/// A description or row (`what`) whose width differs from the analysis
/// ends the session.
fn check_width(what: &str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        return Ok(());
    }
    Err(ProxyError::Protocol(format!(
        "a {what} of {got} columns where the analysis expected {expected}: the catalog changed; reconnect"
    )))
}

/// One schema of the search path probe's answer (a DataRow of one text
/// field).
fn probe_row(body: &[u8]) -> Result<String> {
    let fields = wire::parse_data_row(body)?;
    match fields.as_slice() {
        [Some(v)] => String::from_utf8(v.to_vec()).ok(),
        _ => None,
    }
    .ok_or_else(|| ProxyError::Protocol("the search path came back unreadable".into()))
}

/// A refusal when a `Parse` (`rest`: what follows its two strings)
/// names a parameter type the session does not trust (one whose closure,
/// what it is built on or may run, a role other than a superuser may
/// change: a cast, a domain check, an attribute's domain): the server
/// would run that role's function on the parameter, a function the
/// analysis never saw.
/// Unspecified types (OID 0) are inferred by the server from the
/// analysed statement.
fn untrusted_parameter_type(catalog: &SessionCatalog, rest: &[u8]) -> Result<Option<Refusal>> {
    let mut r = Reader::new(rest);
    let n = r.i16()?;
    for _ in 0..n {
        let oid = r.i32()? as u32;
        if oid != 0 && !catalog.trusted_types.contains(&oid) {
            return Ok(Some(Refusal::new(
                Rule::TypeNotAllowed,
                format!(
                    "parameter type oid {oid} is not allowed: only types of pg_catalog, \
                     information_schema and of superusers, built only of such types and \
                     running only pg_catalog functions, may be named in a Parse"
                ),
            )));
        }
    }
    Ok(None)
}

/// Ends the session for a result with protected columns that has a row
/// too large once sanitized, or that the server failed (a row it could
/// not build, any other error): the same FATAL 54000 naming the limit
/// whatever the cause; the error to return.
async fn fail_row<W: AsyncWrite + Unpin>(cw: &mut W, max: usize) -> ProxyError {
    let e = ProxyError::protected_row_too_large(max);
    tracing::warn!(error = %e, "result row refused");
    let _ = super::write(cw, &wire::error("FATAL", e.sqlstate(), &e.to_string())).await;
    let _ = cw.flush().await;
    e
}

/// What the server is answering, as far as raw protected values go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// Nothing that outputs a protected column.
    Plain,
    /// A statement or portal with protected output whose rows the server
    /// sends as it makes them (a select, a cursor's portal).
    Streamed,
    /// A `FETCH` or `EXECUTE` (or a portal bound from one): it runs what
    /// its name stands for at that moment, which may not be what the
    /// analysis saw, and the server stores all its rows before it sends
    /// the first. Taken to output protected columns.
    Stored,
}

/// What the statement or portal whose answer the server is sending is
/// (known from the analysis, before any RowDescription).
fn answering(s: &Shared) -> Answering {
    // An error at a Flush is judged as one of the message after it.
    let output = match s.expect.iter().find(|e| !matches!(e, Expect::Flush)) {
        Some(Expect::Statement {
            runs_named: true, ..
        }) => return Answering::Stored,
        Some(Expect::Statement { output, .. }) => Some(output.as_slice()),
        Some(Expect::Execute { portal, .. }) if s.runs_named_portals.contains(portal) => {
            return Answering::Stored
        }
        Some(Expect::Execute { portal, .. }) => s.session.cursor(portal),
        _ => None,
    };
    if output.is_some_and(|o| o.iter().any(OutputColumn::is_protected)) {
        Answering::Streamed
    } else {
        Answering::Plain
    }
}

/// Whether an ErrorResponse of a statement answered as `what` may be
/// relayed, the session kept: one of a class PostgreSQL raises before a
/// statement runs (an aborted or wrong transaction state, 25; an unknown
/// or taken statement or cursor name, 26 and 34; a client whose
/// transaction failed goes on sending into it), and, for a statement
/// whose rows are streamed, of class 42 too (analysis, privileges, a name
/// a `regclass` cast of a value does not find): there a row that fits is
/// sent, and judged, before any later row's error. Not for a stored
/// statement: it builds every row before it sends one, so a later row's
/// class-42 error would tell that an earlier, padded row fit. Any other
/// error ends the session.
fn relayed_error(what: Answering, body: &[u8]) -> bool {
    let code = server_sqlstate(body);
    let classes: &[&str] = match what {
        Answering::Plain => return true,
        Answering::Streamed => &["25", "26", "34", "42"],
        Answering::Stored => &["25", "26", "34"],
    };
    classes.iter().any(|c| code.starts_with(c))
}

/// The SQLSTATE of an ErrorResponse, for the proxy's own log.
fn server_sqlstate(body: &[u8]) -> String {
    wire::parse_fields(body)
        .ok()
        .and_then(|f| f.into_iter().find(|(c, _)| *c == b'C').map(|(_, v)| v))
        .unwrap_or_default()
}

fn refusal_frame(r: &Refusal) -> Frame {
    wire::error("ERROR", r.rule.sqlstate(), &r.to_string())
}

fn sync() -> Frame {
    Frame::new(b'S', Vec::new())
}

impl ProxyMode {
    fn context<'a>(
        &'a self,
        catalog: &'a SessionCatalog,
        search_path: &'a [String],
    ) -> Context<'a> {
        Context {
            catalog: &catalog.catalog,
            policy: &catalog.policy,
            search_path,
            user: &catalog.user,
            cache: &self.cache,
        }
    }

    /// `f`, refused by `refusal`, analyzed once more against the catalog
    /// read again, when the refusal is of a relation the catalog does not
    /// know, `f` a `Query` or `Parse`, the session idle, and no read
    /// started within [`super::refresh::MIN_INTERVAL`] (`last`). What the
    /// second analysis says, or `refusal` when it could not run.
    async fn retry_with_fresh_catalog(
        &self,
        f: &mut Frame,
        refusal: Refusal,
        shared: &Mutex<Shared>,
        last: &mut Option<Instant>,
    ) -> Result<Option<Refusal>> {
        if refusal.rule != Rule::RelationUnresolved || !matches!(f.tag, b'Q' | b'P') {
            return Ok(Some(refusal));
        }
        let idle = shared.lock().unwrap_or_else(PoisonError::into_inner).idle();
        if !idle || !Refresh::due(*last) {
            let mut r = refusal;
            r.message.push_str(&format!(
                "; a relation created during the session is found once the catalog is read \
                 again, which happens outside a transaction block, with nothing in flight, at \
                 most every {} s",
                super::refresh::MIN_INTERVAL.as_secs()
            ));
            return Ok(Some(r));
        }
        *last = Some(Instant::now());
        let catalog = match self.refresh.load().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "reading proxy mode's catalog again failed");
                return Ok(Some(refusal));
            }
        };
        tracing::info!("proxy mode's catalog read again");
        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.catalog = Arc::new(catalog);
        self.client_message(f, &mut s)
    }

    /// Relays until either side ends. A client silent for
    /// `limits.idle_timeout_secs` while none of its statements awaits an
    /// answer is closed with a FATAL error naming the limit, as in
    /// database mode.
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
        let shared = Mutex::new(Shared::new(self.catalog.clone()));
        let max = limits.max_message_bytes;
        let idle = limits.idle_timeout_secs;
        let went_idle = std::sync::atomic::AtomicBool::new(false);
        let to_server = async {
            let mut skipping = false;
            let mut last_read: Option<Instant> = None;
            loop {
                let read = wire::read_frame(&mut cr, max);
                let frame = if idle > 0 {
                    // The same read goes on after a timeout (no byte is
                    // lost): a client whose statement still awaits its
                    // answers is waiting, not idle.
                    let mut read = std::pin::pin!(read);
                    loop {
                        match tokio::time::timeout(Duration::from_secs(idle), &mut read).await {
                            Ok(r) => break r?,
                            Err(_)
                                if !shared
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner)
                                    .expect
                                    .is_empty() =>
                            {
                                continue
                            }
                            Err(_) => {
                                went_idle.store(true, std::sync::atomic::Ordering::Relaxed);
                                return Err(ProxyError::idle(idle));
                            }
                        }
                    }
                } else {
                    read.await?
                };
                let Some(f) = frame else {
                    return Ok::<(), ProxyError>(());
                };
                if skipping && f.tag != b'X' {
                    if f.tag == b'S' {
                        skipping = false;
                    }
                    continue;
                }
                let mut f = f;
                let refused = {
                    let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    self.client_message(&mut f, &mut s)?
                };
                let refused = match refused {
                    Some(r) => {
                        self.retry_with_fresh_catalog(&mut f, r, &shared, &mut last_read)
                            .await?
                    }
                    None => None,
                };
                match refused {
                    None => {
                        if f.tag == b'E' {
                            // The portal's description, for the origins of
                            // its columns; its answer stays in the proxy.
                            let portal = cstr_at(&f.body, 0)?;
                            let mut body = vec![b'P'];
                            wire::put_cstr(&mut body, &portal);
                            super::write(&mut uw, &Frame::new(b'D', body)).await?;
                        }
                        super::write(&mut uw, &f).await?;
                    }
                    Some(r) => {
                        tracing::info!(rule = r.rule.code(), "statement refused in proxy mode");
                        crate::metrics::inc(&crate::metrics::METRICS.masking_refused);
                        skipping = !matches!(f.tag, b'Q' | b'F');
                        {
                            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            // The proxy's Sync ends the server's batch.
                            s.batch_open = false;
                            s.expect(Expect::Ready(Some(r)));
                        }
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
            let mut rows = Batch::new(self.batch_rows);
            let mut current: Protected = Vec::new();
            let mut width: Option<usize> = None;
            loop {
                let Some((tag, len)) = wire::read_header(&mut ur).await? else {
                    return Ok::<(), ProxyError>(());
                };
                // A row with protected columns is judged as it would be
                // sent, never by its raw length.
                let f = if tag == b'D' && !current.is_empty() {
                    let protected = |i| current.iter().any(|(p, _)| *p == i);
                    let limit =
                        batch::protected_row_limit(max, current.len(), self.max_input_bytes);
                    match batch::read_row(&mut ur, len, protected, limit, self.max_input_bytes)
                        .await?
                    {
                        Some(body) => Frame::new(tag, body),
                        // Every ending of a protected result loses the
                        // batch it was in, whatever ended it: which rows
                        // came before the FATAL would tell which limit a
                        // raw value broke.
                        None => return Err(fail_row(&mut cw, max).await),
                    }
                } else {
                    wire::read_body(&mut ur, tag, len, max).await?
                };
                // (An error is judged first: one that ends the session
                // loses the held batch, below.)
                if f.tag != b'D' && f.tag != b'E' && !rows.is_empty() {
                    self.flush(rows.take(), &current, &mut cw, max).await?;
                }
                // What to do with the message: relay it, keep it, or end.
                let mut relay = true;
                if !matches!(f.tag, b'D' | b'E' | b'N' | b'A' | b'S') {
                    // The server answers a later message: it is past every
                    // Flush before it. (A row never comes first.)
                    let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    while matches!(s.expect.front(), Some(Expect::Flush)) {
                        s.expect.pop_front();
                    }
                }
                match f.tag {
                    b'T' | b'n' => {
                        let origins = if f.tag == b'T' {
                            row_origins(&f.body)?
                        } else {
                            Vec::new()
                        };
                        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        let s = &mut *s;
                        match s.expect.front_mut() {
                            Some(Expect::Statement { output, .. }) if f.tag == b'T' => {
                                check_width("result", output.len(), origins.len())?;
                                current = protected_columns(output, &origins, &s.catalog);
                                width = Some(output.len());
                            }
                            Some(Expect::Describe) => {
                                s.expect.pop_front();
                            }
                            Some(Expect::PathProbe { .. }) if f.tag == b'T' => relay = false,
                            Some(Expect::Execute { portal, described }) if !*described => {
                                let output = s.session.cursor(portal).ok_or_else(|| {
                                    ProxyError::Protocol(format!(
                                        "an Execute of portal \"{portal}\" the proxy has not seen bound: session ended"
                                    ))
                                })?;
                                if f.tag == b'T' {
                                    check_width("result", output.len(), origins.len())?;
                                }
                                current = protected_columns(output, &origins, &s.catalog);
                                width = Some(origins.len());
                                *described = true;
                                relay = false;
                            }
                            _ => return Err(unexpected(f.tag)),
                        }
                    }
                    b't' => {
                        let s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        if !matches!(s.expect.front(), Some(Expect::Describe)) {
                            return Err(unexpected(f.tag));
                        }
                    }
                    b'D' => {
                        {
                            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            if let Some(Expect::PathProbe { schemas }) = s.expect.front_mut() {
                                schemas.push(probe_row(&f.body)?);
                                continue;
                            }
                            let ok = match s.expect.front() {
                                Some(Expect::Statement { .. }) => width.is_some(),
                                Some(Expect::Execute { described, .. }) => *described,
                                _ => false,
                            };
                            if !ok {
                                return Err(unexpected(f.tag));
                            }
                        }
                        let n = Reader::new(&f.body).i16()?;
                        check_width(
                            "row",
                            width.unwrap_or(0),
                            usize::try_from(n).unwrap_or(usize::MAX),
                        )?;
                        if current.is_empty() {
                            super::write(&mut cw, &f).await?;
                        } else {
                            rows.push(f);
                            if rows.full() {
                                self.flush(rows.take(), &current, &mut cw, max).await?;
                            }
                        }
                        continue;
                    }
                    b'C' | b'I' | b's' => {
                        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        let s = &mut *s;
                        match s.expect.pop_front() {
                            Some(Expect::Statement {
                                effect,
                                resets_path,
                                ..
                            }) if f.tag != b's' => {
                                if let (b'C', Some(e)) = (f.tag, effect) {
                                    s.session.apply(&e);
                                }
                                if f.tag == b'C' && resets_path {
                                    s.path.reset_done();
                                }
                            }
                            Some(Expect::PathProbe { schemas }) if f.tag == b'C' => {
                                s.path.probed(schemas);
                                relay = false;
                            }
                            Some(Expect::Execute { portal, .. }) => {
                                if f.tag == b'C' {
                                    if let Some(Some(e)) = s.portal_effects.get(&portal).cloned() {
                                        s.session.apply(&e);
                                    }
                                }
                            }
                            _ => return Err(unexpected(f.tag)),
                        }
                        current.clear();
                        width = None;
                    }
                    b'1' => {
                        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        let s = &mut *s;
                        match s.expect.pop_front() {
                            Some(Expect::Parse {
                                name,
                                output,
                                effect,
                                runs_named,
                            }) => {
                                s.session.record_statement(&name, output);
                                if runs_named {
                                    s.runs_named_statements.insert(name.clone());
                                } else {
                                    s.runs_named_statements.remove(&name);
                                }
                                s.statement_effects.insert(name, effect);
                            }
                            _ => return Err(unexpected(f.tag)),
                        }
                    }
                    b'2' => {
                        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        let s = &mut *s;
                        match s.expect.pop_front() {
                            Some(Expect::Bind { portal, statement }) => {
                                let output = s
                                    .session
                                    .prepared(&statement)
                                    .map(<[OutputColumn]>::to_vec)
                                    .ok_or_else(|| {
                                        ProxyError::Protocol(format!(
                                            "a Bind of statement \"{statement}\" the proxy has not seen parsed: session ended"
                                        ))
                                    })?;
                                s.session.record_portal(&portal, output);
                                if s.runs_named_statements.contains(&statement) {
                                    s.runs_named_portals.insert(portal.clone());
                                } else {
                                    s.runs_named_portals.remove(&portal);
                                }
                                let effect = s.statement_effects.get(&statement).cloned().flatten();
                                s.portal_effects.insert(portal, effect);
                            }
                            _ => return Err(unexpected(f.tag)),
                        }
                    }
                    b'3' => {
                        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                        let s = &mut *s;
                        match s.expect.pop_front() {
                            Some(Expect::Close { statement, name }) => {
                                if statement {
                                    s.session.apply(&Effect::Deallocate(Some(name.clone())));
                                    s.statement_effects.remove(&name);
                                } else {
                                    s.session.apply(&Effect::Close(Some(name.clone())));
                                    s.portal_effects.remove(&name);
                                }
                            }
                            _ => return Err(unexpected(f.tag)),
                        }
                    }
                    b'E' | b'N' => {
                        let what = {
                            let s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            match answering(&s) {
                                // Rows with protected columns already came.
                                Answering::Plain if !current.is_empty() => Answering::Streamed,
                                a => a,
                            }
                        };
                        let protected = what != Answering::Plain;
                        if f.tag == b'N' && (protected || scrub::below_notice(&f.body)) {
                            // Nothing the server says while it reads raw
                            // values (a temporary file logged once a
                            // stored result spills, say), and no LOG or
                            // DEBUG message, which can be about anything.
                            continue;
                        }
                        if f.tag == b'E' && !relayed_error(what, &f.body) {
                            // Any error of a statement with protected
                            // output columns, before its first row (the
                            // server stores the rows of `EXECUTE` and
                            // `FETCH` before it describes them) or after:
                            // whether the server or the proxy found a row
                            // too large would tell its raw length, and
                            // which error the server met while it held
                            // raw values might tell more.
                            tracing::warn!(
                                sqlstate = %server_sqlstate(&f.body),
                                "the server failed a result with protected columns"
                            );
                            return Err(fail_row(&mut cw, max).await);
                        }
                        if f.tag == b'E' && !rows.is_empty() {
                            // A relayed error: the rows before it go first.
                            self.flush(rows.take(), &current, &mut cw, max).await?;
                        }
                        if f.tag == b'E'
                            && shared
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .expect
                                .is_empty()
                        {
                            // An error answering nothing the proxy sent:
                            // every message the server can fail at is
                            // recorded, so it cannot be placed; the server
                            // may be skipping to a Sync the proxy does not
                            // know of. A FATAL ends the session anyway.
                            if scrub::ends_session(&f.body) {
                                super::write(&mut cw, &scrub(f.tag, &f.body)?).await?;
                                cw.flush().await?;
                            }
                            return Err(ProxyError::Protocol(
                                "the server sent an error the proxy cannot place: session ended"
                                    .into(),
                            ));
                        }
                        if f.tag == b'E' {
                            // The server skips the rest: of a Query, its other
                            // statements; of an extended-protocol message,
                            // everything up to the next Sync, pipelined
                            // Queries included. Nothing of it is recorded.
                            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            let to_sync = s.expect.front().is_some_and(Expect::extended);
                            while s.expect.front().is_some_and(|e| match e {
                                Expect::Ready(_) => false,
                                Expect::QueryReady => to_sync,
                                _ => true,
                            }) {
                                s.expect.pop_front();
                            }
                            // The client's Sync not read yet: what comes
                            // before it is discarded by the server too.
                            s.skip_to_sync = to_sync && s.expect.is_empty();
                            s.path.error();
                            current.clear();
                            width = None;
                        }
                        relay = false;
                        super::write(&mut cw, &scrub(f.tag, &f.body)?).await?;
                    }
                    b'Z' => {
                        let refusal = {
                            let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                            let refusal = match s.expect.pop_front() {
                                Some(Expect::Ready(r)) => r,
                                Some(Expect::QueryReady) => None,
                                _ => return Err(unexpected(f.tag)),
                            };
                            s.path.ready(f.body.first().copied())?;
                            s.in_block = f.body.first() != Some(&b'I');
                            refusal
                        };
                        if let Some(r) = refusal {
                            super::write(&mut cw, &refusal_frame(&r)).await?;
                        }
                        current.clear();
                        width = None;
                    }
                    // Settings the server reports.
                    b'S' => {}
                    // Notifications: LISTEN is refused; drop anything else.
                    b'A' => relay = false,
                    other => {
                        return Err(ProxyError::Protocol(format!(
                            "proxy mode does not relay server message '{}'",
                            char::from(other)
                        )))
                    }
                }
                if relay {
                    super::write(&mut cw, &f).await?;
                }
                if f.tag == b'Z' {
                    cw.flush().await?;
                }
            }
        };
        let ending = tokio::select! {
            r = to_server => r,
            r = to_client => r,
        };
        if let (Err(e), true) = (
            &ending,
            went_idle.load(std::sync::atomic::Ordering::Relaxed),
        ) {
            // Idle: the client waits for nothing, so it is at a message
            // boundary and can read why it is closed.
            let _ =
                super::write(&mut cw, &wire::error("FATAL", e.sqlstate(), &e.to_string())).await;
            let _ = cw.flush().await;
        }
        ending
    }

    /// Checks one client message and records what its answers will be;
    /// `Some` when it is refused (the caller forwards a Sync instead). A
    /// `Query` or `Parse` that passes is rewritten in place to carry the
    /// statement with its names qualified as the analysis resolved them.
    fn client_message(&self, f: &mut Frame, s: &mut Shared) -> Result<Option<Refusal>> {
        let search_path = s.path.current();
        let catalog = s.catalog.clone();
        let ctx = self.context(&catalog, &search_path);
        let push = |s: &mut Shared, e: Expect| {
            s.expect(e);
            Ok(None)
        };
        if matches!(f.tag, b'P' | b'B' | b'E' | b'D' | b'C' | b'H') {
            // (A refused one closes the batch again: the proxy sends a
            // Sync in its place.)
            s.batch_open = true;
        }
        match f.tag {
            b'Q' if s.batch_open => Ok(Some(Refusal::new(
                Rule::ConstructNotAllowed,
                "a simple Query inside an unfinished extended-protocol batch: the server runs it \
                 or discards it depending on the messages before it; send Sync first",
            ))),
            b'Q' => {
                let sql = cstr_at(&f.body, 0)?;
                let a = match analysis::analyze(&sql, &ctx, &s.session) {
                    Ok(a) => a,
                    Err(r) => return Ok(Some(r)),
                };
                let idle = s.expect.is_empty() && !s.skip_to_sync;
                let change = match s.path.query(&a.statements, idle) {
                    Ok(c) => c,
                    Err(r) => return Ok(Some(r)),
                };
                if change == Some(PathChange::Set) {
                    f.body = query_body(&path::with_probe(&a.forward));
                } else if *a.forward != *sql {
                    f.body = query_body(&a.forward);
                }
                for st in a.statements {
                    s.expect(Expect::Statement {
                        runs_named: st.kind.runs_named(),
                        output: st.output,
                        effect: st.effect,
                        resets_path: change == Some(PathChange::Reset),
                    });
                }
                if change == Some(PathChange::Set) {
                    s.expect(Expect::PathProbe {
                        schemas: Vec::new(),
                    });
                }
                push(s, Expect::QueryReady)
            }
            b'P' => {
                let name = cstr_at(&f.body, 0)?;
                let sql = cstr_at(&f.body, 1)?;
                if let Some(r) = untrusted_parameter_type(&catalog, after_cstrs(&f.body, 2)?)? {
                    return Ok(Some(r));
                }
                match analysis::analyze_parse_forward(&sql, &ctx, &s.session) {
                    Ok((a, forward)) => {
                        if let Err(r) = s.path.parse(&name, a.search_path) {
                            return Ok(Some(r));
                        }
                        if *forward != *sql {
                            let rest = after_cstrs(&f.body, 2)?.to_vec();
                            f.body = parse_body(&name, &forward, &rest);
                        }
                        if a.kind.runs_named() {
                            s.stored_statements.insert(name.clone());
                        }
                        push(
                            s,
                            Expect::Parse {
                                name,
                                runs_named: a.kind.runs_named(),
                                output: a.output,
                                effect: a.effect,
                            },
                        )
                    }
                    Err(r) => Ok(Some(r)),
                }
            }
            b'B' => {
                let portal = cstr_at(&f.body, 0)?;
                let statement = cstr_at(&f.body, 1)?;
                if let Err(r) = s.path.bind(&statement) {
                    return Ok(Some(r));
                }
                if s.stored_statements.contains(&statement) {
                    if !portal.is_empty() {
                        return Ok(Some(Refusal::new(
                            Rule::ConstructNotAllowed,
                            format!(
                                "statement \"{statement}\" is a FETCH or EXECUTE, whose rows the \
                                 server stores whole before it sends one: it binds only to the \
                                 unnamed portal (a named one, \"{portal}\", could be read in part \
                                 with SQL FETCH, leaving rows built but never sent)"
                            ),
                        )));
                    }
                    s.stored_portals.insert(portal.clone());
                }
                push(s, Expect::Bind { portal, statement })
            }
            b'E' => {
                let portal = cstr_at(&f.body, 0)?;
                let max_rows = Reader::new(after_cstrs(&f.body, 1)?).i32()?;
                if max_rows != 0 && s.stored_portals.contains(&portal) {
                    return Ok(Some(Refusal::new(
                        Rule::ConstructNotAllowed,
                        "an Execute with a row limit of a portal bound from a FETCH or EXECUTE: \
                         the server stores all its rows first, and those not sent would escape \
                         the proxy's checks; execute it whole (a row limit of 0), or FETCH fewer \
                         rows",
                    )));
                }
                push(
                    s,
                    Expect::Execute {
                        portal,
                        described: false,
                    },
                )
            }
            b'D' => push(s, Expect::Describe),
            b'C' => {
                let kind = f.body.first().copied().unwrap_or(0);
                let name = cstr_at(f.body.get(1..).unwrap_or_default(), 0)?;
                match kind {
                    b'S' | b'P' => push(
                        s,
                        Expect::Close {
                            statement: kind == b'S',
                            name,
                        },
                    ),
                    _ => Err(ProxyError::Protocol("a Close of neither S nor P".into())),
                }
            }
            b'S' => {
                s.batch_open = false;
                push(s, Expect::Ready(None))
            }
            b'H' => push(s, Expect::Flush),
            b'X' => Ok(None),
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

    /// Sanitizes the protected fields of `rows` (one batch) and writes
    /// them. A row over its limit as sent, or a value the sanitizer cannot
    /// take, ends the session with the FATAL naming `max`, and none of the
    /// batch is sent: every ending of a protected result loses the batch
    /// it was in (after the batches before it), whatever ended it.
    async fn flush<W: AsyncWrite + Unpin>(
        &self,
        rows: Vec<Frame>,
        protected: &Protected,
        cw: &mut W,
        max: usize,
    ) -> Result<()> {
        // Each row parsed once; `protected` is in column order, so the
        // outputs come back in the order the fields are met below.
        let parsed = rows
            .iter()
            .map(|row| wire::parse_data_row(&row.body))
            .collect::<Result<Vec<_>>>()?;
        let mut items = Vec::new();
        for fields in &parsed {
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
        // A value the sanitizer cannot take ends the session as a row over
        // the limit does (read_row already stops one over the input limit).
        let mut out = match self.sanitizer.run(items).await {
            Ok(out) => out.into_iter(),
            Err(e) => {
                tracing::warn!(error = %e, "a protected value could not be sanitized");
                return Err(fail_row(cw, max).await);
            }
        };
        let mut frames = Vec::with_capacity(parsed.len());
        for fields in &parsed {
            // This row's sanitized values, in the order they are met.
            let mut replaced = Vec::new();
            for (i, field) in fields.iter().enumerate() {
                if field.is_some() && protected.iter().any(|(p, _)| *p == i) {
                    replaced.push(out.next().ok_or_else(|| {
                        ProxyError::Protocol("the sanitizer returned too few values".into())
                    })?);
                }
            }
            let mut replaced_iter = replaced.iter();
            let sent: Vec<Option<&[u8]>> = fields
                .iter()
                .enumerate()
                .map(|(i, field)| match field {
                    Some(_) if protected.iter().any(|(p, _)| *p == i) => {
                        replaced_iter.next().map(|v| v.as_bytes())
                    }
                    other => *other,
                })
                .collect();
            // Judged before it is built: no copy of a row that goes; and
            // the whole batch before any of it is sent, so that a row over
            // the limit loses its batch as every other ending does.
            let limit = batch::protected_row_limit(max, protected.len(), self.max_input_bytes);
            if batch::check_sent(wire::data_row_len(&sent), limit).is_err() {
                return Err(fail_row(cw, max).await);
            }
            frames.push(Frame::new(b'D', wire::data_row(&sent)));
        }
        for f in &frames {
            super::write(cw, f).await?;
        }
        Ok(())
    }
}
