//! What the state machine asks its I/O loop to do, in order: for a
//! client message ([`ClientStep`]) and for a server message
//! ([`ServerStep`]). Each direction's loop writes to one side only, so
//! each has its own kind of step.

use crate::error::ProxyError;
use crate::wire::Frame;

use super::columns::Protected;

/// What to do for a message of the client. The loop performs a message's
/// steps in order; one that ends the session ([`ClientStep::End`],
/// [`ClientStep::Close`]) is the last.
#[derive(Debug)]
pub enum ClientStep {
    /// Write the frame to the server.
    ToServer(Frame),
    /// Read the catalog again and hand it (or nothing, when the read
    /// failed) to [`super::Machine::on_catalog`], which goes on with the
    /// client message it holds.
    ReloadCatalog,
    /// End the session without an error (the client's Terminate went on).
    End,
    /// End the session with the error, sending nothing more.
    Close(ProxyError),
}

/// What to do for a message of the server. The loop performs a message's
/// steps in order; one that ends the session ([`ServerStep::Fail`],
/// [`ServerStep::Close`]) is the last.
#[derive(Debug)]
pub enum ServerStep {
    /// Write the frame to the client.
    ToClient(Frame),
    /// Flush what was written to the client: it waits at a
    /// ReadyForQuery.
    FlushClient,
    /// Sanitize the rows' protected values and write them to the client
    /// ([`super::rows`]); a value the sanitizer cannot take, or a row over
    /// the batch's limit once sanitized, ends the session as
    /// [`ServerStep::Fail`] does with
    /// [`ProxyError::protected_row_too_large`].
    Sanitize(RowBatch),
    /// Send the error to the client as a FATAL ErrorResponse, as far as
    /// the client reads it, and end the session with it.
    Fail(ProxyError),
    /// End the session with the error, sending nothing more.
    Close(ProxyError),
}

/// Rows of a result with protected columns, held to be sanitized
/// together ([`crate::session::batch`]).
#[derive(Debug)]
pub struct RowBatch {
    /// The DataRows as the server sent them.
    pub rows: Vec<Frame>,
    /// Their protected columns.
    pub protected: Protected,
    /// The limit each row is held to as sent
    /// ([`crate::session::batch::protected_row_limit`]).
    pub limit: usize,
}
