//! The server's messages: every answer is matched, in order, to the
//! client message it answers ([`super::expect`]); an answer the proxy did
//! not expect ends the session. What the server holds is recorded only
//! when it confirms it: a prepared statement on ParseComplete, a portal
//! on BindComplete, the effect of a `DECLARE`, `PREPARE`, `CLOSE`,
//! `DEALLOCATE` or `DISCARD` (sent as a query or executed as a portal) on
//! its CommandComplete, a `Close` on CloseComplete; a failed message
//! records nothing. The answer to the proxy's own `Describe` before each
//! `Execute` stays in the proxy: it gives the origins of the result's
//! columns, so that every result, whichever protocol asked for it, comes
//! with them. Values of protected columns (by the analysis, and by the
//! origin a RowDescription names) are sanitized in batches of up to
//! `[masking] batch_rows` rows ([`ServerStep::Sanitize`]). A result whose
//! column count differs from the analysis ends the session (the catalog
//! changed under it). Errors and notices are scrubbed
//! ([`crate::session::scrub`]); notifications are dropped.

use crate::analysis::{Effect, OutputColumn, Refusal};
use crate::error::{ProxyError, Result};
use crate::session::scrub::{self, scrub};
use crate::wire::{self, Frame};

use super::cancel::{cancel_error, muted_steps, QUERY_CANCELED};
use super::columns::{
    check_width, probe_row, protected_columns, relayed_error, server_sqlstate, Answering,
};
use super::expect::Expect;
use super::state::Machine;
use super::step::ServerStep;
use super::tags::BackendTag;

impl Machine {
    /// One message of the server, its body read as [`Machine::row_read`]
    /// said: what to send to the client. An answer out of place, or one
    /// that cannot be read, ends the session after what came before it
    /// ([`ServerStep::Close`]).
    pub fn on_server(&mut self, f: Frame) -> Vec<ServerStep> {
        let muted = self.muted;
        let mut out = Vec::new();
        if let Err(e) = self.server(f, &mut out) {
            out.push(ServerStep::Close(e));
        }
        if muted {
            return muted_steps(out).collect();
        }
        out
    }

    fn server(&mut self, f: Frame, out: &mut Vec<ServerStep>) -> Result<()> {
        let tag = BackendTag::of(f.tag);
        // (An error is judged first: one that ends the session loses the
        // held batch, below.)
        if !matches!(tag, BackendTag::DataRow | BackendTag::ErrorResponse) && !self.rows.is_empty()
        {
            out.push(self.take_rows());
        }
        if tag.answers_a_message() {
            // The server answers a later message: it is past every Flush
            // before it. (A row never comes first.)
            while matches!(self.expect.front(), Some(Expect::Flush)) {
                self.expect.pop_front();
            }
        }
        // What to do with the message: relay it, keep it, or end.
        let mut relay = true;
        match tag {
            BackendTag::RowDescription | BackendTag::NoData => {
                relay = self.description(tag, &f)?;
            }
            BackendTag::ParameterDescription => {
                if !matches!(self.expect.front(), Some(Expect::Describe)) {
                    return Err(unexpected(tag));
                }
            }
            BackendTag::DataRow => return self.row(f, out),
            BackendTag::CommandComplete
            | BackendTag::EmptyQueryResponse
            | BackendTag::PortalSuspended => {
                relay = self.completed(tag)?;
            }
            BackendTag::ParseComplete => match self.expect.pop_front() {
                Some(Expect::Parse {
                    name,
                    output,
                    effect,
                    runs_named,
                }) => {
                    self.session.record_statement(&name, output);
                    if runs_named {
                        self.runs_named_statements.insert(name.clone());
                    } else {
                        self.runs_named_statements.remove(&name);
                    }
                    self.statement_effects.insert(name, effect);
                }
                _ => return Err(unexpected(tag)),
            },
            BackendTag::BindComplete => match self.expect.pop_front() {
                Some(Expect::Bind { portal, statement }) => {
                    let output = self
                        .session
                        .prepared(&statement)
                        .map(<[OutputColumn]>::to_vec)
                        .ok_or_else(|| {
                            ProxyError::Protocol(format!(
                                "a Bind of statement \"{statement}\" the proxy has not seen parsed: session ended"
                            ))
                        })?;
                    self.session.record_portal(&portal, output);
                    if self.runs_named_statements.contains(&statement) {
                        self.runs_named_portals.insert(portal.clone());
                    } else {
                        self.runs_named_portals.remove(&portal);
                    }
                    let effect = self.statement_effects.get(&statement).cloned().flatten();
                    self.portal_effects.insert(portal, effect);
                }
                _ => return Err(unexpected(tag)),
            },
            BackendTag::CloseComplete => match self.expect.pop_front() {
                Some(Expect::Close { statement, name }) => {
                    if statement {
                        self.session.apply(&Effect::Deallocate(Some(name.clone())));
                        self.statement_effects.remove(&name);
                    } else {
                        self.session.apply(&Effect::Close(Some(name.clone())));
                        self.portal_effects.remove(&name);
                    }
                }
                _ => return Err(unexpected(tag)),
            },
            BackendTag::ErrorResponse | BackendTag::NoticeResponse => {
                return self.error_or_notice(tag, &f, out);
            }
            BackendTag::ReadyForQuery => {
                let refusal = match self.expect.pop_front() {
                    Some(Expect::Ready(r)) => r,
                    Some(Expect::QueryReady) => None,
                    _ => return Err(unexpected(tag)),
                };
                let status = wire::ready_status(&f.body);
                self.path.ready(status)?;
                self.in_block = status != Some(wire::READY_IDLE);
                if let Some(r) = refusal {
                    out.push(ServerStep::ToClient(refusal_frame(&r)));
                }
                self.end_result();
                // A cancel is of what is in flight, and a muted result
                // ends here: the client reads this ReadyForQuery.
                self.cancel_requested = false;
                self.muted = false;
            }
            // Settings the server reports.
            BackendTag::ParameterStatus => {}
            // Notifications: LISTEN is refused; drop anything else.
            BackendTag::NotificationResponse => relay = false,
            BackendTag::Other(_) => {
                return Err(ProxyError::Protocol(format!(
                    "proxy mode does not relay server message '{tag}'"
                )))
            }
        }
        if relay {
            out.push(ServerStep::ToClient(f));
        }
        if tag == BackendTag::ReadyForQuery {
            out.push(ServerStep::FlushClient);
        }
        Ok(())
    }

    /// A RowDescription or NoData: the columns of the result to come (of
    /// a statement, of the proxy's own Describe before an Execute, kept),
    /// or of the client's Describe (relayed). Whether it is relayed.
    fn description(&mut self, tag: BackendTag, f: &Frame) -> Result<bool> {
        let columns = tag == BackendTag::RowDescription;
        let origins = if columns {
            wire::parse_row_origins(&f.body)?
        } else {
            Vec::new()
        };
        match self.expect.front_mut() {
            Some(Expect::Statement { output, .. }) if columns => {
                check_width("result", output.len(), origins.len())?;
                self.current = protected_columns(output, &origins, &self.catalog);
                self.width = Some(output.len());
            }
            Some(Expect::Describe) => {
                self.expect.pop_front();
            }
            Some(Expect::PathProbe { .. }) if columns => return Ok(false),
            Some(Expect::Execute { portal, described }) if !*described => {
                let output = self.session.cursor(portal).ok_or_else(|| {
                    ProxyError::Protocol(format!(
                        "an Execute of portal \"{portal}\" the proxy has not seen bound: session ended"
                    ))
                })?;
                if columns {
                    check_width("result", output.len(), origins.len())?;
                }
                self.current = protected_columns(output, &origins, &self.catalog);
                self.width = Some(origins.len());
                *described = true;
                return Ok(false);
            }
            _ => return Err(unexpected(tag)),
        }
        Ok(true)
    }

    /// Whether the next DataRow, if it comes now, is relayed as the server
    /// sent it: a result without protected columns, not cancelled, no
    /// rows held, not the search path probe's. Its body may then be
    /// copied to the client as it is read, never held whole
    /// ([`Machine::streamed_row`]): memory stays at a chunk, whatever the
    /// size of an unprotected value.
    pub fn relays_rows_as_sent(&self) -> bool {
        !self.muted && self.current.is_empty() && self.rows.is_empty() && self.row_expected()
    }

    /// A DataRow of `width` columns, which [`Machine::relays_rows_as_sent`]
    /// allowed, copied to the client as it was read: checked as any row
    /// is; an error ends the session.
    pub fn streamed_row(&mut self, width: i16) -> Result<()> {
        if !self.row_expected() {
            return Err(unexpected(BackendTag::DataRow));
        }
        self.check_row_width(width)
    }

    /// Whether a DataRow may come now (a described statement's or
    /// portal's result).
    fn row_expected(&self) -> bool {
        match self.expect.front() {
            Some(Expect::Statement { .. }) => self.width.is_some(),
            Some(Expect::Execute { described, .. }) => *described,
            _ => false,
        }
    }

    /// A row of `n` columns where the description said how many.
    fn check_row_width(&self, n: i16) -> Result<()> {
        check_width(
            "row",
            self.width.unwrap_or(0),
            usize::try_from(n).unwrap_or(usize::MAX),
        )
    }

    /// A DataRow: kept (the search path probe's), relayed, or held for
    /// the sanitizer.
    fn row(&mut self, f: Frame, out: &mut Vec<ServerStep>) -> Result<()> {
        if let Some(Expect::PathProbe { schemas }) = self.expect.front_mut() {
            schemas.push(probe_row(&f.body)?);
            return Ok(());
        }
        if !self.row_expected() {
            return Err(unexpected(BackendTag::DataRow));
        }
        self.check_row_width(wire::data_row_width(&f.body)?)?;
        if self.muted {
            // A result the client cancelled: followed, never sanitized.
        } else if self.current.is_empty() {
            out.push(ServerStep::ToClient(f));
        } else {
            self.rows.push(f);
            if self.rows.full() {
                out.push(self.take_rows());
            }
        }
        Ok(())
    }

    /// A CommandComplete, EmptyQueryResponse or PortalSuspended: the end
    /// of a statement's or portal's result, and its effect applied.
    /// Whether it is relayed.
    fn completed(&mut self, tag: BackendTag) -> Result<bool> {
        let complete = tag == BackendTag::CommandComplete;
        let mut relay = true;
        match self.expect.pop_front() {
            Some(Expect::Statement {
                effect,
                resets_path,
                ..
            }) if tag != BackendTag::PortalSuspended => {
                if let (true, Some(e)) = (complete, effect) {
                    self.session.apply(&e);
                }
                if complete && resets_path {
                    self.path.reset_done();
                }
            }
            Some(Expect::EmptyQuery) if tag == BackendTag::EmptyQueryResponse => {}
            Some(Expect::PathProbe { schemas }) if complete => {
                self.path.probed(schemas);
                relay = false;
            }
            Some(Expect::Execute { portal, .. }) => {
                if complete {
                    if let Some(Some(e)) = self.portal_effects.get(&portal).cloned() {
                        self.session.apply(&e);
                    }
                }
            }
            _ => return Err(unexpected(tag)),
        }
        self.end_result();
        Ok(relay)
    }

    /// An ErrorResponse or NoticeResponse, scrubbed. Inside a result with
    /// protected columns, notices are dropped and most errors end the
    /// session ([`relayed_error`]). After an error the server skips the
    /// rest: of a Query, its other statements; of an extended-protocol
    /// message, everything up to the next Sync, pipelined Queries
    /// included. Nothing of it is recorded.
    fn error_or_notice(
        &mut self,
        tag: BackendTag,
        f: &Frame,
        out: &mut Vec<ServerStep>,
    ) -> Result<()> {
        let error = tag == BackendTag::ErrorResponse;
        let what = match self.answering() {
            // Rows with protected columns already came.
            Answering::Plain if !self.current.is_empty() => Answering::Streamed,
            a => a,
        };
        let protected = what != Answering::Plain;
        if !error && (protected || scrub::below_notice(&f.body)) {
            // Nothing the server says while it reads raw values (a
            // temporary file logged once a stored result spills, say),
            // and no LOG or DEBUG message, which can be about anything.
            return Ok(());
        }
        // The server's answer to the client's cancel request: the
        // client's doing, not a raw value's (relayed in the proxy's words
        // when the result has protected columns).
        let cancelled =
            error && self.cancel_requested && server_sqlstate(&f.body) == QUERY_CANCELED;
        if error && !cancelled && !relayed_error(what, &f.body) {
            // Any error of a statement with protected output columns,
            // before its first row (the server stores the rows of
            // `EXECUTE` and `FETCH` before it describes them) or after:
            // whether the server or the proxy found a row too large would
            // tell its raw length, and which error the server met while it
            // held raw values might tell more.
            tracing::warn!(
                sqlstate = %server_sqlstate(&f.body),
                "the server failed a result with protected columns"
            );
            out.push(ServerStep::Fail(ProxyError::protected_row_too_large(
                self.settings.max_message_bytes,
            )));
            return Ok(());
        }
        if cancelled {
            // The rows held are not sanitized: the client asked to stop.
            drop(self.rows.take());
        } else if error && !self.rows.is_empty() {
            // A relayed error: the rows before it go first.
            out.push(self.take_rows());
        }
        if error && self.expect.is_empty() {
            // An error answering nothing the proxy sent: every message the
            // server can fail at is recorded, so it cannot be placed; the
            // server may be skipping to a Sync the proxy does not know of.
            // A FATAL ends the session anyway.
            if scrub::ends_session(&f.body) {
                out.push(ServerStep::ToClient(scrub(f.tag, &f.body)?));
                out.push(ServerStep::FlushClient);
            }
            return Err(ProxyError::Protocol(
                "the server sent an error the proxy cannot place: session ended".into(),
            ));
        }
        if error {
            let to_sync = self.expect.front().is_some_and(Expect::extended);
            while self.expect.front().is_some_and(|e| match e {
                Expect::Ready(_) => false,
                Expect::QueryReady => to_sync,
                _ => true,
            }) {
                self.expect.pop_front();
            }
            // The client's Sync not read yet: what comes before it is
            // discarded by the server too.
            self.skip_to_sync = to_sync && self.expect.is_empty();
            self.path.error();
            self.end_result();
        }
        let sent = if cancelled && protected {
            cancel_error()
        } else {
            scrub(f.tag, &f.body)?
        };
        out.push(ServerStep::ToClient(sent));
        Ok(())
    }
}

/// An answer the proxy did not expect: the session ends.
fn unexpected(tag: BackendTag) -> ProxyError {
    ProxyError::Protocol(format!(
        "the server sent '{tag}' where proxy mode expected another answer: session ended"
    ))
}

/// The ErrorResponse of a refusal.
fn refusal_frame(r: &Refusal) -> Frame {
    wire::error("ERROR", r.rule.sqlstate(), &r.to_string())
}
