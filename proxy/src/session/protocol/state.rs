//! The state one proxy-mode session keeps between messages, both
//! directions together: what the server holds, what its next answers
//! belong to, and the result being relayed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::analysis::{self, Context, Effect, OutputColumn, ParseCache, Refusal};
use crate::session::batch::{self, Batch};
use crate::session::catalog::SessionCatalog;
use crate::session::path::SearchPath;

use super::columns::{Answering, Protected};
use super::expect::Expect;
use super::step::{RowBatch, ServerStep};
use super::tags::{BackendTag, FrontendTag};

/// What a session's state machine is given once.
pub struct Settings {
    /// The catalog and policy read at the session's start.
    pub catalog: Arc<SessionCatalog>,
    /// Parse trees shared by every session.
    pub cache: ParseCache,
    /// Rows sanitized together (`masking.batch_rows`).
    pub batch_rows: usize,
    /// `limits.max_message_bytes`.
    pub max_message_bytes: usize,
    /// The engine's input limit (`engine.max_input_bytes`): the largest
    /// raw value the sanitizer takes, which bounds the raw part of a row
    /// ([`batch::protected_row_limit`]).
    pub max_input_bytes: usize,
}

/// How to read the body of a DataRow of the result being relayed, when it
/// has protected columns ([`batch::read_row`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowRead {
    /// The protected columns' positions.
    pub protected: Vec<usize>,
    /// The limit the row is held to as sent.
    pub limit: usize,
    /// The largest protected value the sanitizer takes.
    pub max_value: usize,
}

/// Proxy mode's protocol state machine: it takes the client's and the
/// server's messages, one at a time, and says what to send where
/// ([`super::ClientStep`], [`super::ServerStep`]); it does no I/O. [`Machine::on_client`] is in
/// `super::frontend`, [`Machine::on_server`] in `super::backend`.
pub struct Machine {
    pub(super) settings: Settings,
    /// What the server's next answers belong to.
    pub(super) expect: VecDeque<Expect>,
    /// Prepared statements and portals as the server holds them.
    pub(super) session: analysis::Session,
    /// What executing each prepared statement changes (a statement that
    /// is itself a `DECLARE`, `PREPARE`, ...).
    pub(super) statement_effects: HashMap<String, Option<Effect>>,
    /// The same for portals.
    pub(super) portal_effects: HashMap<String, Option<Effect>>,
    /// Protocol-level statements that are a `FETCH` or an `EXECUTE`, and
    /// the portals bound from them: what they run is whatever the cursor
    /// or prepared statement they name is when the server runs them (it
    /// may have been declared again over other columns since the proxy
    /// analysed them), so the proxy takes them to output protected
    /// columns ([`Answering::Stored`]).
    pub(super) runs_named_statements: HashSet<String>,
    /// The same for portals.
    pub(super) runs_named_portals: HashSet<String>,
    /// Names of protocol-level statements the client has sent a `FETCH`
    /// or `EXECUTE` to be parsed as, and of portals it has bound from
    /// them, as the client's messages come (before the server confirms
    /// them, and never forgotten: a name once used so stays suspect). The
    /// server stores every row of such a portal the first time it runs,
    /// so one read in part (`Execute` with a row limit, a SQL `FETCH` of a
    /// named portal) would build padded rows it never sends: they bind
    /// only to the unnamed portal, which SQL cannot name, and are executed
    /// whole.
    pub(super) stored_statements: HashSet<String>,
    /// The same for portals.
    pub(super) stored_portals: HashSet<String>,
    /// The search path, as the server committed it.
    pub(super) path: SearchPath,
    /// The catalog statements are analyzed against: the session's
    /// start's, or the last one read since.
    pub(super) catalog: Arc<SessionCatalog>,
    /// Whether the last ReadyForQuery reported a transaction block.
    pub(super) in_block: bool,
    /// The server failed an extended-protocol message before the proxy had
    /// read the client's `Sync` after it: the server discards every
    /// message up to that `Sync`, so what the client sends until then
    /// expects no answer ([`Machine::expect`]). Without it, an `Execute`
    /// read after the error came expected an answer the server never sent,
    /// and the session ended at the next ReadyForQuery (seen under load).
    pub(super) skip_to_sync: bool,
    /// The client has sent extended-protocol messages since its last
    /// `Sync` (or since the proxy sent one for a refused message): a
    /// simple Query now is refused, because the server would run it or
    /// discard it depending on whether an earlier message failed, and an
    /// interrupt's error at a `Flush` before it could not be told from the
    /// Query's own (a review desynchronized the answers that way).
    pub(super) batch_open: bool,
    /// The client's messages after a refused extended-protocol message,
    /// up to its `Sync`, are dropped: the proxy sent a Sync of its own.
    pub(super) client_skips_to_sync: bool,
    /// A client message refused for a relation the catalog does not know,
    /// held while the catalog is read again ([`super::ClientStep::ReloadCatalog`]).
    pub(super) held: Option<(crate::wire::Frame, FrontendTag, Refusal)>,
    /// When the catalog was last asked to be read again.
    pub(super) last_reload: Option<Instant>,
    /// The protected columns of the result being relayed.
    pub(super) current: Protected,
    /// Its width, once described.
    pub(super) width: Option<usize>,
    /// Its rows held for the sanitizer.
    pub(super) rows: Batch,
    /// The client sent a cancel request while a message of its awaited
    /// an answer: a 57014 of the server until the next ReadyForQuery is
    /// the cancel's, not a raw value's ([`Machine::cancel`]).
    pub(super) cancel_requested: bool,
    /// The proxy ended the result being relayed itself, with 57014, on the
    /// client's cancel: up to the next ReadyForQuery the server's answers
    /// are followed but not relayed (but settings it reports), as the
    /// server's own error would have skipped them.
    pub(super) muted: bool,
}

impl Machine {
    /// A session's machine, before any message.
    pub fn new(settings: Settings) -> Self {
        let catalog = settings.catalog.clone();
        Machine {
            expect: VecDeque::new(),
            session: analysis::Session::default(),
            statement_effects: HashMap::new(),
            portal_effects: HashMap::new(),
            runs_named_statements: HashSet::new(),
            runs_named_portals: HashSet::new(),
            stored_statements: HashSet::new(),
            stored_portals: HashSet::new(),
            path: SearchPath::new(&catalog.search_path),
            catalog,
            in_block: false,
            skip_to_sync: false,
            batch_open: false,
            client_skips_to_sync: false,
            held: None,
            last_reload: None,
            current: Vec::new(),
            width: None,
            rows: Batch::new(settings.batch_rows),
            cancel_requested: false,
            muted: false,
            settings,
        }
    }

    /// Whether a message of the client still awaits an answer: a client
    /// silent then is waiting, not idle.
    pub fn awaiting(&self) -> bool {
        !self.expect.is_empty()
    }

    /// Nothing in flight and no transaction block: the session's next
    /// statement starts a snapshot of its own.
    pub fn idle(&self) -> bool {
        self.expect.is_empty() && !self.in_block
    }

    /// How to read the body of a message of `tag` from the server: `Some`
    /// for a DataRow of a result with protected columns (judged field by field, as it would be sent,
    /// never by its raw length).
    pub fn row_read(&self, tag: BackendTag) -> Option<RowRead> {
        if tag != BackendTag::DataRow || self.current.is_empty() {
            return None;
        }
        Some(RowRead {
            protected: self.current.iter().map(|(i, _)| *i).collect(),
            limit: self.row_limit(),
            max_value: self.settings.max_input_bytes,
        })
    }

    /// The limit a row of the result being relayed is held to as sent.
    pub(super) fn row_limit(&self) -> usize {
        batch::protected_row_limit(
            self.settings.max_message_bytes,
            self.current.len(),
            self.settings.max_input_bytes,
        )
    }

    /// Records the answer a message forwarded to the server will get,
    /// unless the server is discarding messages up to a `Sync`
    /// ([`Machine::skip_to_sync`]); the `ReadyForQuery` of that `Sync` (the
    /// client's, or the one the proxy sends for a refused message) ends
    /// the skip.
    pub(super) fn expect(&mut self, e: Expect) {
        if self.skip_to_sync {
            if !matches!(e, Expect::Ready(_)) {
                return;
            }
            self.skip_to_sync = false;
        }
        self.expect.push_back(e);
    }

    /// The rows held for the sanitizer, as a step.
    pub(super) fn take_rows(&mut self) -> ServerStep {
        ServerStep::Sanitize(RowBatch {
            rows: self.rows.take(),
            protected: self.current.clone(),
            limit: self.row_limit(),
        })
    }

    /// The result being relayed ended.
    pub(super) fn end_result(&mut self) {
        self.current.clear();
        self.width = None;
    }

    /// What an analysis reads now.
    pub(super) fn context<'a>(
        &'a self,
        catalog: &'a SessionCatalog,
        search_path: &'a [String],
    ) -> Context<'a> {
        Context {
            catalog: &catalog.catalog,
            policy: &catalog.policy,
            search_path,
            user: &catalog.user,
            cache: &self.settings.cache,
        }
    }

    /// What the statement or portal whose answer the server is sending is
    /// (known from the analysis, before any RowDescription).
    pub(super) fn answering(&self) -> Answering {
        // An error at a Flush is judged as one of the message after it.
        let output = match self.expect.iter().find(|e| !matches!(e, Expect::Flush)) {
            Some(Expect::Statement {
                runs_named: true, ..
            }) => return Answering::Stored,
            Some(Expect::Statement { output, .. }) => Some(output.as_slice()),
            Some(Expect::Execute { portal, .. }) if self.runs_named_portals.contains(portal) => {
                return Answering::Stored
            }
            Some(Expect::Execute { portal, .. }) => self.session.cursor(portal),
            _ => None,
        };
        if output.is_some_and(|o| o.iter().any(OutputColumn::is_protected)) {
            Answering::Streamed
        } else {
            Answering::Plain
        }
    }
}
