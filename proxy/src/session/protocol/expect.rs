//! What the server's next answers belong to: one [`Expect`] per client
//! message (or statement of a `Query`) that gets an answer, in order.

use crate::analysis::{Effect, OutputColumn, Refusal};

/// The answer a message forwarded to the server will get.
#[derive(Debug)]
pub enum Expect {
    /// A statement of a simple-protocol query: its result columns, what
    /// it changes in the session once completed, and whether it resets
    /// the search path.
    Statement {
        /// Its result columns, by the analysis.
        output: Vec<OutputColumn>,
        /// What it changes once completed.
        effect: Option<Effect>,
        /// Whether it resets the search path once completed.
        resets_path: bool,
        /// A `FETCH` or `EXECUTE`: it runs what a name stands for when the
        /// server runs it, which the analysis could only guess.
        runs_named: bool,
    },
    /// A simple-protocol Query that holds no statement (an empty string,
    /// only comments or semicolons, which psql sends for `;` and drivers
    /// as a ping): the server answers EmptyQueryResponse, runs nothing.
    EmptyQuery,
    /// The proxy's query of the search path after a `SET search_path`:
    /// its rows (one schema each) stay in the proxy.
    PathProbe {
        /// The schemas read so far.
        schemas: Vec<String>,
    },
    /// `Parse`: recorded on ParseComplete.
    Parse {
        /// The statement name.
        name: String,
        /// Its result columns, by the analysis.
        output: Vec<OutputColumn>,
        /// What executing it changes.
        effect: Option<Effect>,
        /// As `Statement::runs_named`.
        runs_named: bool,
    },
    /// `Bind`: recorded on BindComplete.
    Bind {
        /// The portal.
        portal: String,
        /// The statement it is bound from.
        statement: String,
    },
    /// The client's own `Describe`: relayed.
    Describe,
    /// `Execute`, after the proxy's own `Describe` of the portal (whose
    /// answer it keeps: `described` once it came).
    Execute {
        /// The portal.
        portal: String,
        /// Whether the proxy's Describe was answered.
        described: bool,
    },
    /// `Close` of a statement (`true`) or portal: applied on CloseComplete.
    Close {
        /// A statement (`true`) or a portal.
        statement: bool,
        /// Its name.
        name: String,
    },
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
    pub fn extended(&self) -> bool {
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
