//! The client's messages: each is analyzed, recorded as an answer to
//! await, and forwarded, or refused. A `Query` is analyzed whole
//! ([`crate::analysis::analyze`]); a `Parse` alone, and `Bind` and
//! `Execute` are followed to the statement they run. A refused message is
//! not forwarded: the proxy forwards a `Sync` in its place, skips the rest
//! of the client's extended-protocol batch up to its own `Sync`, and,
//! when the server's `ReadyForQuery` for that `Sync` comes back, sends the
//! refusal just before it ([`super::backend`]). `FunctionCall` is
//! refused; COPY data and anything unknown end the session. A `Query` or
//! `Parse` refused because it names a relation the session's catalog does
//! not know is analyzed once more after the catalog is read again
//! ([`crate::session::refresh`]), when the session is idle.

use std::sync::Arc;
use std::time::Instant;

use crate::analysis::{self, PathChange, Refusal, Rule};
use crate::error::{ProxyError, Result};
use crate::session::catalog::SessionCatalog;
use crate::session::path;
use crate::session::refresh::{self, Refresh};
use crate::wire::{self, Frame, Target};

use super::expect::Expect;
use super::state::Machine;
use super::step::ClientStep;
use super::tags::FrontendTag;

impl Machine {
    /// One message of the client: what to send, and where.
    pub fn on_client(&mut self, mut f: Frame) -> Vec<ClientStep> {
        let tag = FrontendTag::of(f.tag);
        if self.client_skips_to_sync && tag != FrontendTag::Terminate {
            if tag == FrontendTag::Sync {
                self.client_skips_to_sync = false;
            }
            return Vec::new();
        }
        match self.check(tag, &mut f) {
            Err(e) => vec![ClientStep::Close(e)],
            Ok(None) => self.forward(tag, f),
            Ok(Some(r)) => self.refused_once(tag, f, r),
        }
    }

    /// The catalog read again after a [`ClientStep::ReloadCatalog`] (`None`
    /// when the read failed): the message held for it is analyzed once
    /// more against it, or refused as it was.
    pub fn on_catalog(&mut self, loaded: Option<SessionCatalog>) -> Vec<ClientStep> {
        let Some((mut f, tag, refusal)) = self.held.take() else {
            return Vec::new();
        };
        let Some(catalog) = loaded else {
            return self.refuse(tag, refusal);
        };
        self.catalog = Arc::new(catalog);
        match self.check(tag, &mut f) {
            Err(e) => vec![ClientStep::Close(e)],
            Ok(None) => self.forward(tag, f),
            Ok(Some(r)) => self.refuse(tag, r),
        }
    }

    /// A message that passed, to the server; an `Execute` after the
    /// proxy's own `Describe` of its portal, for the origins of its
    /// columns (its answer stays in the proxy).
    fn forward(&mut self, tag: FrontendTag, f: Frame) -> Vec<ClientStep> {
        let mut out = Vec::with_capacity(2);
        if tag == FrontendTag::Execute {
            match wire::parse_execute(&f.body) {
                Ok((portal, _)) => {
                    out.push(ClientStep::ToServer(wire::describe(Target::Portal, portal)))
                }
                Err(e) => return vec![ClientStep::Close(e)],
            }
        }
        out.push(ClientStep::ToServer(f));
        if tag == FrontendTag::Terminate {
            out.push(ClientStep::End);
        }
        out
    }

    /// A refused message: when the refusal is of a relation the catalog
    /// does not know, the message a `Query` or `Parse`, the session idle,
    /// and no read started within [`refresh::MIN_INTERVAL`], the message
    /// is held and the catalog read again first.
    fn refused_once(
        &mut self,
        tag: FrontendTag,
        f: Frame,
        mut refusal: Refusal,
    ) -> Vec<ClientStep> {
        if refusal.rule != Rule::RelationUnresolved
            || !matches!(tag, FrontendTag::Query | FrontendTag::Parse)
        {
            return self.refuse(tag, refusal);
        }
        if !self.idle() || !Refresh::due(self.last_reload) {
            refusal.message.push_str(&format!(
                "; a relation created during the session is found once the catalog is read \
                 again, which happens outside a transaction block, with nothing in flight, at \
                 most every {} s",
                refresh::MIN_INTERVAL.as_secs()
            ));
            return self.refuse(tag, refusal);
        }
        self.last_reload = Some(Instant::now());
        self.held = Some((f, tag, refusal));
        vec![ClientStep::ReloadCatalog]
    }

    /// A refused message: a `Sync` goes in its place, and the refusal
    /// waits for that Sync's ReadyForQuery. The rest of an
    /// extended-protocol batch is skipped up to the client's own `Sync`.
    fn refuse(&mut self, tag: FrontendTag, r: Refusal) -> Vec<ClientStep> {
        tracing::info!(rule = r.rule.code(), "statement refused in proxy mode");
        crate::metrics::inc(&crate::metrics::METRICS.masking_refused);
        self.client_skips_to_sync = !matches!(tag, FrontendTag::Query | FrontendTag::FunctionCall);
        // The proxy's Sync ends the server's batch.
        self.batch_open = false;
        self.expect(Expect::Ready(Some(r)));
        vec![ClientStep::ToServer(wire::sync())]
    }

    /// Checks one client message and records what its answers will be;
    /// `Some` when it is refused. A `Query` or `Parse` that passes is
    /// rewritten in place to carry the statement with its names qualified
    /// as the analysis resolved them.
    fn check(&mut self, tag: FrontendTag, f: &mut Frame) -> Result<Option<Refusal>> {
        let search_path = self.path.current();
        let catalog = self.catalog.clone();
        if tag.in_batch() {
            // (A refused one closes the batch again: the proxy sends a
            // Sync in its place.)
            self.batch_open = true;
        }
        let push = |m: &mut Machine, e: Expect| {
            m.expect(e);
            Ok(None)
        };
        match tag {
            FrontendTag::Query if self.batch_open => Ok(Some(Refusal::new(
                Rule::ConstructNotAllowed,
                "a simple Query inside an unfinished extended-protocol batch: the server runs it \
                 or discards it depending on the messages before it; send Sync first",
            ))),
            FrontendTag::Query => {
                let sql = wire::parse_query(&f.body)?.to_owned();
                let ctx = self.context(&catalog, &search_path);
                let a = match analysis::analyze(&sql, &ctx, &self.session) {
                    Ok(a) => a,
                    Err(r) => return Ok(Some(r)),
                };
                let idle = self.expect.is_empty() && !self.skip_to_sync;
                let change = match self.path.query(&a.statements, idle) {
                    Ok(c) => c,
                    Err(r) => return Ok(Some(r)),
                };
                if change == Some(PathChange::Set) {
                    *f = wire::query(&path::with_probe(&a.forward));
                } else if *a.forward != *sql {
                    *f = wire::query(&a.forward);
                }
                if a.statements.is_empty() {
                    // Nothing to run: the server's EmptyQueryResponse
                    // answers it, as PostgreSQL's would.
                    self.expect(Expect::EmptyQuery);
                }
                for st in a.statements {
                    self.expect(Expect::Statement {
                        runs_named: st.kind.runs_named(),
                        output: st.output,
                        effect: st.effect,
                        resets_path: change == Some(PathChange::Reset),
                    });
                }
                if change == Some(PathChange::Set) {
                    self.expect(Expect::PathProbe {
                        schemas: Vec::new(),
                    });
                }
                push(self, Expect::QueryReady)
            }
            FrontendTag::Parse => {
                let parse = wire::parse_parse(&f.body)?;
                for oid in parse.param_types() {
                    if let Some(r) = untrusted_parameter_type(&catalog, oid?) {
                        return Ok(Some(r));
                    }
                }
                let ctx = self.context(&catalog, &search_path);
                let (a, forward) =
                    match analysis::analyze_parse_forward(parse.sql, &ctx, &self.session) {
                        Ok(a) => a,
                        Err(r) => return Ok(Some(r)),
                    };
                let name = parse.name.to_owned();
                if let Err(r) = self.path.parse(&name, a.search_path) {
                    return Ok(Some(r));
                }
                if *forward != *parse.sql {
                    *f = wire::parse(&name, &forward, parse.rest);
                }
                if a.kind.runs_named() {
                    self.stored_statements.insert(name.clone());
                }
                push(
                    self,
                    Expect::Parse {
                        name,
                        runs_named: a.kind.runs_named(),
                        output: a.output,
                        effect: a.effect,
                    },
                )
            }
            FrontendTag::Bind => {
                let (portal, statement) = wire::parse_bind(&f.body)?;
                let (portal, statement) = (portal.to_owned(), statement.to_owned());
                if let Err(r) = self.path.bind(&statement) {
                    return Ok(Some(r));
                }
                if self.stored_statements.contains(&statement) {
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
                    self.stored_portals.insert(portal.clone());
                }
                push(self, Expect::Bind { portal, statement })
            }
            FrontendTag::Execute => {
                let (portal, max_rows) = wire::parse_execute(&f.body)?;
                if max_rows != 0 && self.stored_portals.contains(portal) {
                    return Ok(Some(Refusal::new(
                        Rule::ConstructNotAllowed,
                        "an Execute with a row limit of a portal bound from a FETCH or EXECUTE: \
                         the server stores all its rows first, and those not sent would escape \
                         the proxy's checks; execute it whole (a row limit of 0), or FETCH fewer \
                         rows",
                    )));
                }
                let portal = portal.to_owned();
                push(
                    self,
                    Expect::Execute {
                        portal,
                        described: false,
                    },
                )
            }
            FrontendTag::Describe => push(self, Expect::Describe),
            FrontendTag::Close => {
                let (target, name) = wire::parse_close(&f.body)?;
                let close = Expect::Close {
                    statement: target == Target::Statement,
                    name: name.to_owned(),
                };
                push(self, close)
            }
            FrontendTag::Sync => {
                self.batch_open = false;
                push(self, Expect::Ready(None))
            }
            FrontendTag::Flush => push(self, Expect::Flush),
            FrontendTag::Terminate => Ok(None),
            FrontendTag::FunctionCall => Ok(Some(Refusal::new(
                Rule::StatementKind,
                "the function-call protocol message is not allowed in proxy mode",
            ))),
            FrontendTag::Other(_) => Err(ProxyError::Protocol(format!(
                "proxy mode does not relay client message '{tag}'"
            ))),
        }
    }
}

/// A refusal when a `Parse` names a parameter type (`oid`) the session
/// does not trust (one whose closure, what it is built on or may run, a
/// role other than a superuser may change: a cast, a domain check, an
/// attribute's domain): the server would run that role's function on the
/// parameter, a function the analysis never saw. Unspecified types (OID
/// 0) are inferred by the server from the analysed statement.
fn untrusted_parameter_type(catalog: &SessionCatalog, oid: u32) -> Option<Refusal> {
    if oid == 0 || catalog.trusted_types.contains(&oid) {
        return None;
    }
    Some(Refusal::new(
        Rule::TypeNotAllowed,
        format!(
            "parameter type oid {oid} is not allowed: only types of pg_catalog, \
             information_schema and of superusers, built only of such types and \
             running only pg_catalog functions, may be named in a Parse"
        ),
    ))
}
