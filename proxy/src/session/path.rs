//! Proxy mode's view of the session's `search_path`: statements are
//! analyzed with the path the server searches, so the proxy follows every
//! change of it, and only once the server has committed it.
//!
//! `SET search_path TO ...` must be sent alone in a simple query, outside
//! a transaction block, with nothing else in flight. The proxy appends
//! its own query of the path as the server resolved it
//! (`current_schemas(false)`, which leaves out schemas that do not exist or
//! that the role may not use, and replaces `$user`), keeps its answer to
//! itself, and takes the new path when the ReadyForQuery after it says
//! the session is idle, that is, the implicit transaction committed. An
//! error before that rolls the change back on the server and here. A
//! reset to the default (`RESET search_path`, `SET search_path TO
//! DEFAULT`, `RESET ALL`, `DISCARD ALL`) goes back to the path the session
//! started with: anywhere while the path is that default (it changes
//! nothing), under the same rules as `SET` once it is not, and then never
//! through the extended protocol. A change the server reports inside a
//! transaction block ends the session: a later `ROLLBACK` could undo it,
//! which the proxy does not follow.

use std::collections::HashSet;
use std::sync::Arc;

use crate::analysis::{PathChange, Refusal, Rule, StatementAnalysis};
use crate::error::{ProxyError, Result};

/// The query the proxy appends to a `SET search_path`: one row per
/// schema the server now searches, in order; the one the session's path
/// was first read with.
use super::queries::SCHEMAS_SQL as PROBE_SQL;

/// The search path of one session, as the server has committed it.
#[derive(Debug)]
pub struct SearchPath {
    /// The path the session started with: what a reset returns to.
    start: Arc<[String]>,
    /// The path names resolve with.
    current: Arc<[String]>,
    /// A change the server made, waiting for the ReadyForQuery that says
    /// it was committed.
    pending: Option<Arc<[String]>>,
    /// A change is in flight, until its ReadyForQuery.
    changing: bool,
    /// The transaction status of the last ReadyForQuery.
    status: u8,
    /// Prepared statements that reset the path: bound only while the
    /// path is the default.
    resetting: HashSet<String>,
}

impl SearchPath {
    /// A session that started with `start` and is idle.
    pub fn new(start: &[String]) -> Self {
        SearchPath {
            start: start.into(),
            current: start.into(),
            pending: None,
            changing: false,
            status: b'I',
            resetting: HashSet::new(),
        }
    }

    /// The path to resolve names with.
    pub fn current(&self) -> Arc<[String]> {
        self.current.clone()
    }

    /// Whether a reset would change the path: it is not the default, or
    /// a change is in flight.
    fn reset_changes_it(&self) -> bool {
        self.changing || self.current != self.start
    }

    /// The change to the path that a simple query's `statements` make,
    /// when the proxy must follow one; `idle` when nothing the session
    /// sent earlier is still unanswered. A change must be the query's
    /// only statement, sent idle and outside a transaction block, so that
    /// the ReadyForQuery after it tells whether it was committed. When
    /// one is allowed it counts as in flight from now.
    pub fn query(
        &mut self,
        statements: &[StatementAnalysis],
        idle: bool,
    ) -> std::result::Result<Option<PathChange>, Refusal> {
        let change = statements.iter().find_map(|st| match st.search_path {
            Some(PathChange::Reset) if !self.reset_changes_it() => None,
            other => other,
        });
        if change.is_none() {
            return Ok(None);
        }
        if statements.len() != 1 {
            return Err(refused(
                "a statement that changes the search path (SET search_path, or RESET ALL or \
                 DISCARD ALL after one) must be the only statement of its query",
            ));
        }
        if self.status != b'I' || !idle {
            return Err(refused(
                "the search path may only be changed outside a transaction block, once the \
                 answers to earlier statements have come",
            ));
        }
        self.changing = true;
        Ok(change)
    }

    /// A `Parse` of statement `name` that makes `change`: a `SET` is
    /// refused, a reset only while it would change nothing (and
    /// remembered, for [`SearchPath::bind`]).
    pub fn parse(
        &mut self,
        name: &str,
        change: Option<PathChange>,
    ) -> std::result::Result<(), Refusal> {
        match change {
            Some(PathChange::Set) => Err(refused(
                "SET search_path may only be sent as a simple query, not through Parse",
            )),
            Some(PathChange::Reset) if self.reset_changes_it() => Err(reset_refused()),
            Some(PathChange::Reset) => {
                self.resetting.insert(name.to_owned());
                Ok(())
            }
            None => {
                self.resetting.remove(name);
                Ok(())
            }
        }
    }

    /// A `Bind` of prepared statement `statement`: refused when it resets
    /// the path and that would change it.
    pub fn bind(&self, statement: &str) -> std::result::Result<(), Refusal> {
        if self.resetting.contains(statement) && self.reset_changes_it() {
            return Err(reset_refused());
        }
        Ok(())
    }

    /// The server completed a reset of the path.
    pub fn reset_done(&mut self) {
        self.pending = Some(self.start.clone());
    }

    /// The server answered the probe after a `SET search_path`.
    pub fn probed(&mut self, schemas: Vec<String>) {
        self.pending = Some(schemas.into());
    }

    /// The server reported an error: it rolled back the implicit
    /// transaction, and any change in it.
    pub fn error(&mut self) {
        self.pending = None;
    }

    /// A ReadyForQuery with transaction status `status`: a change the
    /// server made is taken when the session is idle (committed); inside
    /// a transaction block the session ends.
    pub fn ready(&mut self, status: Option<u8>) -> Result<()> {
        self.status = status
            .ok_or_else(|| ProxyError::Protocol("a ReadyForQuery without its status".into()))?;
        let pending = self.pending.take();
        if !std::mem::take(&mut self.changing) {
            return Ok(());
        }
        match (pending, self.status) {
            (Some(path), b'I') => {
                tracing::debug!(search_path = %path.join(", "), "search path changed");
                self.current = path;
                Ok(())
            }
            (Some(_), _) => Err(ProxyError::Protocol(
                "the search path changed inside a transaction block, which the proxy cannot \
                 follow: session ended"
                    .into(),
            )),
            (None, _) => Ok(()),
        }
    }
}

/// The text to forward for a `SET search_path` whose analysed text is
/// `forward`: it, then the probe, in one implicit transaction. A newline
/// ends a trailing `--` comment of the client's.
pub fn with_probe(forward: &str) -> String {
    format!("{forward}\n;{PROBE_SQL}")
}

fn refused(why: &str) -> Refusal {
    Refusal::new(
        Rule::SettingNotAllowed,
        format!("setting search_path: {why}"),
    )
}

fn reset_refused() -> Refusal {
    refused(
        "once the search path was changed, RESET ALL, DISCARD ALL and RESET search_path may \
         only be sent as a simple query, alone and outside a transaction block",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::StatementKind;

    fn statement(search_path: Option<PathChange>) -> StatementAnalysis {
        StatementAnalysis {
            kind: StatementKind::Set,
            output: Vec::new(),
            effect: None,
            search_path,
        }
    }

    fn path(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_set_is_taken_once_committed() {
        let mut p = SearchPath::new(&path(&["public"]));
        let set = [statement(Some(PathChange::Set))];
        assert_eq!(p.query(&set, true), Ok(Some(PathChange::Set)));
        p.probed(path(&["other", "public"]));
        assert_eq!(&*p.current(), path(&["public"]).as_slice());
        p.ready(Some(b'I')).expect("idle");
        assert_eq!(&*p.current(), path(&["other", "public"]).as_slice());
        // A reset now changes it, so it follows the same rules.
        let reset = [statement(Some(PathChange::Reset))];
        assert!(p.query(&reset, false).is_err());
        assert_eq!(p.query(&reset, true), Ok(Some(PathChange::Reset)));
        p.reset_done();
        p.ready(Some(b'I')).expect("idle");
        assert_eq!(&*p.current(), path(&["public"]).as_slice());
    }

    #[test]
    fn an_error_or_a_transaction_block_keeps_the_old_path() {
        let mut p = SearchPath::new(&path(&["public"]));
        let set = [statement(Some(PathChange::Set))];
        p.query(&set, true).expect("allowed");
        p.error();
        p.ready(Some(b'I')).expect("idle");
        assert_eq!(&*p.current(), path(&["public"]).as_slice());
        // Inside a block: refused; reported by the server anyway, fatal.
        p.ready(Some(b'T')).expect("no change");
        assert!(p.query(&set, true).is_err());
        p.changing = true;
        p.probed(path(&["other"]));
        assert!(p.ready(Some(b'T')).is_err());
    }

    #[test]
    fn a_change_must_be_alone_and_resets_are_free_while_they_change_nothing() {
        let mut p = SearchPath::new(&path(&["public"]));
        let two = [statement(Some(PathChange::Set)), statement(None)];
        assert!(p.query(&two, true).is_err());
        let reset_and_more = [statement(Some(PathChange::Reset)), statement(None)];
        assert_eq!(p.query(&reset_and_more, false), Ok(None));
        assert_eq!(p.parse("s", Some(PathChange::Reset)), Ok(()));
        assert!(p.parse("t", Some(PathChange::Set)).is_err());
        assert_eq!(p.bind("s"), Ok(()));
        p.query(&[statement(Some(PathChange::Set))], true)
            .expect("allowed");
        // In flight: a prepared reset may not run.
        assert!(p.bind("s").is_err());
        assert!(p.parse("u", Some(PathChange::Reset)).is_err());
    }
}
