//! The client's cancel requests, as far as the proxy's own work goes.
//!
//! A CancelRequest reaches the server (which stops its statement, 57014)
//! and the session ([`crate::session::cancel`]). The server may have sent
//! its whole result already, while the proxy still sanitizes it batch by
//! batch: then only the proxy can stop. It ends the result being relayed
//! with the error PostgreSQL sends for a cancel, drops the rows it holds,
//! and follows the server's answers up to the next ReadyForQuery without
//! relaying them (what the server's own error would have skipped), so
//! that the client reads a cancelled statement and the session goes on.
//!
//! Nothing the client sees depends on raw values more than before: the
//! proxy's 57014 comes when the client asked, whatever the server sends;
//! any other server error of a protected result still ends the session
//! ([`super::columns::relayed_error`]); a 57014 of the server after a
//! cancel is relayed in the proxy's words, never the server's (which
//! would tell a statement timeout from the cancel).

use crate::wire::{self, Frame};

use super::state::Machine;
use super::step::ServerStep;
use super::tags::BackendTag;

/// The SQLSTATE of a cancelled statement.
pub const QUERY_CANCELED: &str = "57014";

/// The ErrorResponse PostgreSQL sends for a statement the client
/// cancelled.
pub fn cancel_error() -> Frame {
    wire::error(
        "ERROR",
        QUERY_CANCELED,
        "canceling statement due to user request",
    )
}

impl Machine {
    /// The client sent a cancel request (between two server messages).
    /// Nothing in flight: nothing to cancel, as in PostgreSQL. A result
    /// with protected columns being relayed: it ends here, with 57014
    /// (the rows held are dropped), and what the server sends up to the
    /// next ReadyForQuery is followed, not relayed. Otherwise the server's
    /// own answer to the cancel comes.
    pub fn cancel(&mut self) -> Vec<ServerStep> {
        if !self.awaiting() || self.muted {
            return Vec::new();
        }
        self.cancel_requested = true;
        if self.current.is_empty() {
            return Vec::new();
        }
        self.mute(Vec::new())
    }

    /// The client's cancel request came while the proxy sanitized a batch
    /// of rows: the batch is dropped, the result ends with 57014, and
    /// `rest`, the steps of the same server message after that batch, go
    /// as they would while muted.
    pub fn interrupted(&mut self, rest: Vec<ServerStep>) -> Vec<ServerStep> {
        self.cancel_requested = true;
        self.mute(rest)
    }

    fn mute(&mut self, rest: Vec<ServerStep>) -> Vec<ServerStep> {
        tracing::debug!("result cancelled by the client: sanitizing stopped");
        drop(self.rows.take());
        self.muted = true;
        let mut out = vec![
            ServerStep::ToClient(cancel_error()),
            ServerStep::FlushClient,
        ];
        out.extend(muted_steps(rest));
        if out.iter().any(is_ready) {
            self.muted = false;
        }
        out
    }
}

/// What goes on of a server message's steps while the client's cancelled
/// result is muted: ReadyForQuery, the settings the server reports (its
/// session's, whatever the statement), flushes, and the session's end.
pub(super) fn muted_steps(steps: Vec<ServerStep>) -> impl Iterator<Item = ServerStep> {
    steps.into_iter().filter(|s| match s {
        ServerStep::ToClient(f) => matches!(
            BackendTag::of(f.tag),
            BackendTag::ReadyForQuery | BackendTag::ParameterStatus
        ),
        ServerStep::Sanitize(_) => false,
        ServerStep::FlushClient | ServerStep::Fail(_) | ServerStep::Close(_) => true,
    })
}

fn is_ready(s: &ServerStep) -> bool {
    matches!(s, ServerStep::ToClient(f) if BackendTag::of(f.tag) == BackendTag::ReadyForQuery)
}
