//! The statement-kind allow-list: queries, cursors, prepared statements,
//! transaction control, `SHOW`, `SET` of allowed settings, `DISCARD`.
//! Every other statement is refused by its kind.

use pg_query::protobuf::{
    a_const, DiscardMode, RawStmt, TransactionStmtKind, VariableSetKind, VariableSetStmt,
};
use pg_query::{Node, NodeEnum};

use super::nodes::{construct, node_name, Clause, Outputs, Relations};
use super::query::Walker;
use super::scope::Scope;
use super::{
    Context, Effect, PathChange, Refusal, Rule, Session, StatementAnalysis, StatementKind,
};

/// `CURSOR_OPT_BINARY` of `DeclareCursorStmt.options`.
const CURSOR_OPT_BINARY: i32 = 0x0001;
/// `CURSOR_OPT_SCROLL` of `DeclareCursorStmt.options`: `SCROLL`.
const CURSOR_OPT_SCROLL: i32 = 0x0002;
/// `CURSOR_OPT_HOLD` of `DeclareCursorStmt.options`: `WITH HOLD`.
const CURSOR_OPT_HOLD: i32 = 0x0020;

/// Analyzes one statement against what `session` has prepared and
/// declared.
pub(super) fn analyze(
    raw: &RawStmt,
    ctx: &Context<'_>,
    session: &Session,
) -> Result<(StatementAnalysis, Relations), Refusal> {
    let w = Walker::new(ctx);
    let a = analyze_with(&w, raw, ctx, session)?;
    if w.conflict.get() {
        return Err(Refusal::new(
            Rule::QualificationFailed,
            "a relation name resolved two ways in one statement: it is not forwarded",
        ));
    }
    Ok((a, w.relations.into_inner()))
}

fn analyze_with(
    w: &Walker<'_>,
    raw: &RawStmt,
    ctx: &Context<'_>,
    session: &Session,
) -> Result<StatementAnalysis, Refusal> {
    let Some(node) = raw.stmt.as_ref().and_then(|s| s.node.as_ref()) else {
        return Err(construct("an empty statement node"));
    };
    let done = |kind, effect| {
        Ok(StatementAnalysis {
            kind,
            output: Vec::new(),
            effect,
            search_path: None,
        })
    };
    match node {
        NodeEnum::SelectStmt(s) => Ok(StatementAnalysis {
            kind: StatementKind::Select,
            output: top_select(w, s)?,
            effect: None,
            search_path: None,
        }),
        NodeEnum::DeclareCursorStmt(d) => {
            if d.options & CURSOR_OPT_BINARY != 0 {
                return Err(construct("a BINARY cursor"));
            }
            let output = inner_select(w, d.query.as_deref(), "DECLARE")?;
            if d.options & CURSOR_OPT_SCROLL != 0 {
                if let Some(c) = output.iter().find(|c| c.is_protected()) {
                    // To scroll back over a plan that cannot run backwards
                    // the server stores every row it reads (a Material
                    // node), raw values and padding in one allocation that
                    // fails past 1 GiB, for rows a FETCH never sends.
                    return Err(super::query::protected_buffered(
                        c,
                        "in a SCROLL cursor (the server may store its rows to scroll back)",
                    ));
                }
            }
            if d.options & CURSOR_OPT_HOLD != 0 {
                if let Some(c) = output.iter().find(|c| c.is_protected()) {
                    // At commit the server stores every row of a hold
                    // cursor, raw values detoasted, and fails on a row past
                    // 1 GiB: with a padding column that error would tell a
                    // raw length, and it comes before any row does.
                    return Err(super::query::protected_buffered(
                        c,
                        "in a WITH HOLD cursor (the server stores its rows at commit)",
                    ));
                }
            }
            done(
                StatementKind::DeclareCursor,
                Some(Effect::Declare {
                    name: d.portalname.clone(),
                    output,
                }),
            )
        }
        NodeEnum::FetchStmt(f) if f.ismove => Err(Refusal::new(
            Rule::ConstructNotAllowed,
            format!(
                "MOVE is not allowed in masked sessions: it runs cursor {}'s plan without \
                 sending a row, so what the server builds of the rows it skips never passes \
                 the proxy's checks (FETCH them instead)",
                f.portalname
            ),
        )),
        NodeEnum::FetchStmt(f)
            if f.direction != pg_query::protobuf::FetchDirection::FetchForward as i32
                || f.how_many < 0 =>
        {
            // ABSOLUTE and RELATIVE skip rows without sending them, as MOVE
            // does; BACKWARD needs them stored. Refused whatever the cursor
            // holds now: a statement parsed now may run after the name is
            // declared again over other columns.
            Err(Refusal::new(
                Rule::ConstructNotAllowed,
                "FETCH other than NEXT, FORWARD n or ALL is not allowed in masked sessions: it \
                 skips rows without sending them",
            ))
        }
        NodeEnum::FetchStmt(f) => match session.cursor(&f.portalname) {
            Some(output) => {
                stored_rows(w, "FETCH")?;
                Ok(StatementAnalysis {
                    kind: StatementKind::Fetch,
                    output: output.to_vec(),
                    effect: None,
                    search_path: None,
                })
            }
            None => Err(Refusal::new(
                Rule::CursorUnknown,
                format!(
                    "cursor {} was not declared in this session through the proxy",
                    f.portalname
                ),
            )),
        },
        NodeEnum::ClosePortalStmt(c) => {
            let name = (!c.portalname.is_empty()).then(|| c.portalname.clone());
            done(StatementKind::Close, Some(Effect::Close(name)))
        }
        NodeEnum::TransactionStmt(t) => {
            use TransactionStmtKind as K;
            match TransactionStmtKind::try_from(t.kind).unwrap_or(K::Undefined) {
                K::TransStmtBegin
                | K::TransStmtStart
                | K::TransStmtCommit
                | K::TransStmtRollback
                | K::TransStmtSavepoint
                | K::TransStmtRelease
                | K::TransStmtRollbackTo => done(StatementKind::Transaction, None),
                _ => Err(kind_refused(
                    "two-phase commit (PREPARE TRANSACTION, COMMIT PREPARED)",
                )),
            }
        }
        NodeEnum::VariableShowStmt(s) => {
            // Setting names are case-insensitive; SHOW TIME ZONE and
            // SHOW TRANSACTION ISOLATION LEVEL arrive as their settings.
            let name = s.name.to_ascii_lowercase();
            if is_dptext(&name) || !ctx.policy.shown_settings.contains(&name) {
                return Err(show_refused(&s.name));
            }
            Ok(StatementAnalysis {
                kind: StatementKind::Show,
                output: vec![super::OutputColumn::Plain],
                effect: None,
                search_path: None,
            })
        }
        NodeEnum::VariableSetStmt(s) => Ok(StatementAnalysis {
            search_path: check_set(s, ctx)?,
            ..done(StatementKind::Set, None)?
        }),
        NodeEnum::DiscardStmt(d) => {
            let all = d.target == DiscardMode::DiscardAll as i32;
            Ok(StatementAnalysis {
                // DISCARD ALL runs RESET ALL.
                search_path: all.then_some(PathChange::Reset),
                ..done(StatementKind::Discard, all.then_some(Effect::DiscardAll))?
            })
        }
        NodeEnum::DeallocateStmt(d) => {
            let name = (!d.isall && !d.name.is_empty()).then(|| d.name.clone());
            done(StatementKind::Deallocate, Some(Effect::Deallocate(name)))
        }
        NodeEnum::PrepareStmt(p) => {
            for t in &p.argtypes {
                match &t.node {
                    Some(NodeEnum::TypeName(t)) => w.check_type(t)?,
                    _ => return Err(construct("a PREPARE argument that is not a type")),
                }
            }
            let output = inner_select(w, p.query.as_deref(), "PREPARE")?;
            done(
                StatementKind::Prepare,
                Some(Effect::Prepare {
                    name: p.name.clone(),
                    output,
                }),
            )
        }
        NodeEnum::ExecuteStmt(e) => {
            let Some(output) = session.prepared(&e.name) else {
                return Err(Refusal::new(
                    Rule::PreparedUnknown,
                    format!(
                        "prepared statement {} was not prepared in this session through the proxy",
                        e.name
                    ),
                ));
            };
            let scope = Scope::new(None);
            for p in &e.params {
                w.expr(p, &scope, Clause::Values.cx())?;
            }
            stored_rows(w, "EXECUTE")?;
            Ok(StatementAnalysis {
                kind: StatementKind::Execute,
                output: output.to_vec(),
                effect: None,
                search_path: None,
            })
        }
        other => Err(kind_refused(&kind_name(other))),
    }
}

/// Refuses `what` (`EXECUTE`, `FETCH`), whose rows the server stores
/// before it sends any, while the session's `temp_file_limit` is set
/// (`Policy::spill_limit`): past `work_mem` the stored rows go to
/// temporary files, and past the limit the statement fails, at a size a
/// padding column tunes. Refused whatever `output` says: the statement or
/// cursor the name stands for now may be another by the time the server
/// runs this (a statement parsed now and bound later, or pipelined behind
/// a `DECLARE` of the same name). (The rows of a portal the extended
/// protocol's `Execute` reads, a cursor's included, are sent as they are
/// made.)
fn stored_rows(w: &Walker<'_>, what: &str) -> Result<(), Refusal> {
    match &w.ctx.policy.spill_limit {
        None => Ok(()),
        Some(limit) => Err(Refusal::new(
            Rule::ProtectedWithBuffering,
            format!(
                "SQL-level {what} is not allowed while the session's temp_file_limit is {limit}: \
                 the server stores its rows first, in temporary files past work_mem, and would \
                 fail past the limit at a size that protected values and a padding column decide \
                 (read a cursor with the extended protocol's Execute, or run the select itself)"
            ),
        )),
    }
}

/// A top-level select: its output plan.
fn top_select(
    w: &Walker<'_>,
    s: &pg_query::protobuf::SelectStmt,
) -> Result<Vec<super::OutputColumn>, Refusal> {
    let cols = w.select(s, None, Outputs::Top)?;
    w.nested()?;
    let out: Vec<super::OutputColumn> = cols.into_iter().map(|c| c.out).collect();
    once_each(&out)?;
    Ok(out)
}

/// Refuses an output that holds the same protected column twice. The
/// server builds each row whole, every copy of the raw value in it, and
/// fails one past 1 GiB; the proxy judges the row by its sanitized
/// copies, which a rule may make far shorter than the raw value (a
/// whole-value replacement). With enough copies (up to 1,664 columns)
/// and a padding column, the server's failure would come at a raw length
/// the proxy's own limit does not mirror. Once each, a row's raw part is
/// bounded by the engine's input limit per protected column.
fn once_each(out: &[super::OutputColumn]) -> Result<(), Refusal> {
    let mut seen: Vec<String> = Vec::new();
    for c in out.iter().filter(|c| c.is_protected()) {
        let name = c.protected_name();
        if seen.contains(&name) {
            return Err(Refusal::new(
                Rule::ProtectedRepeated,
                format!(
                    "column {name} is protected and may be output once per statement \
                     (the server builds every copy of its raw value into each row)"
                ),
            ));
        }
        seen.push(name);
    }
    Ok(())
}

/// The query of `DECLARE` or `PREPARE`: a select, analyzed as top level.
fn inner_select(
    w: &Walker<'_>,
    query: Option<&Node>,
    what: &str,
) -> Result<Vec<super::OutputColumn>, Refusal> {
    match query.and_then(|q| q.node.as_ref()) {
        Some(NodeEnum::SelectStmt(s)) => top_select(w, s),
        Some(other) => Err(kind_refused(&format!("{what} of {}", kind_name(other)))),
        None => Err(construct(&format!("{what} without a query"))),
    }
}

/// `SET`, `RESET`, `SET TRANSACTION`; what it does to the search path.
fn check_set(s: &VariableSetStmt, ctx: &Context<'_>) -> Result<Option<PathChange>, Refusal> {
    let kind = VariableSetKind::try_from(s.kind).unwrap_or(VariableSetKind::Undefined);
    match kind {
        VariableSetKind::VarResetAll => return Ok(Some(PathChange::Reset)),
        VariableSetKind::VarSetMulti => {
            return match s.name.as_str() {
                "TRANSACTION" | "SESSION CHARACTERISTICS" => Ok(None),
                other => Err(setting_refused(other)),
            };
        }
        VariableSetKind::Undefined => return Err(construct("this form of SET")),
        _ => {}
    }
    let name = s.name.to_ascii_lowercase();
    if name == "search_path" {
        return search_path(s, kind).map(Some);
    }
    if is_dptext(&name) || !ctx.policy.allowed_settings.contains(&name) {
        return Err(setting_refused(&name));
    }
    if name == "client_encoding" && kind == VariableSetKind::VarSetValue {
        let utf8 = matches!(s.args.as_slice(), [Node { node: Some(NodeEnum::AConst(c)) }]
            if matches!(&c.val, Some(a_const::Val::Sval(v))
                if matches!(v.sval.to_ascii_lowercase().replace(['-', '_'], "").as_str(), "utf8" | "unicode")));
        if !utf8 {
            return Err(Refusal::new(
                Rule::SettingNotAllowed,
                "client_encoding may only be set to UTF8: the proxy reads statements as UTF-8",
            ));
        }
    }
    Ok(None)
}

/// `SET search_path` for the session, to a list of names, or back to its
/// default. Not `SET LOCAL` (undone at the end of the transaction, which
/// the proxy would have to follow) nor `FROM CURRENT`.
fn search_path(s: &VariableSetStmt, kind: VariableSetKind) -> Result<PathChange, Refusal> {
    if s.is_local {
        return Err(Refusal::new(
            Rule::SettingNotAllowed,
            "SET LOCAL search_path is not allowed: set the path for the session (SET \
             search_path TO ...), outside a transaction block",
        ));
    }
    match kind {
        VariableSetKind::VarSetValue => {
            let names = s.args.iter().all(|a| {
                matches!(&a.node, Some(NodeEnum::AConst(c))
                    if matches!(&c.val, Some(a_const::Val::Sval(_))))
            });
            if names && !s.args.is_empty() {
                Ok(PathChange::Set)
            } else {
                Err(Refusal::new(
                    Rule::SettingNotAllowed,
                    "search_path may only be set to a list of schema names",
                ))
            }
        }
        VariableSetKind::VarSetDefault | VariableSetKind::VarReset => Ok(PathChange::Reset),
        _ => Err(construct("this form of SET search_path")),
    }
}

fn is_dptext(name: &str) -> bool {
    name.to_ascii_lowercase().starts_with("dptext.")
}

fn setting_refused(name: &str) -> Refusal {
    Refusal::new(
        Rule::SettingNotAllowed,
        format!("setting {name} may not be set or shown in a masked session"),
    )
}

fn show_refused(name: &str) -> Refusal {
    let what = if name.eq_ignore_ascii_case("all") {
        "SHOW ALL".to_owned()
    } else {
        format!("setting {name}")
    };
    Refusal::new(
        Rule::SettingNotAllowed,
        format!(
            "{what} may not be shown in a masked session: SHOW reads only the display, \
             transaction and server settings drivers ask for (a custom setting holds any text)"
        ),
    )
}

fn kind_refused(kind: &str) -> Refusal {
    Refusal::new(
        Rule::StatementKind,
        format!(
            "{kind} is not allowed in a masked session; only queries and session statements are"
        ),
    )
}

/// A statement kind in SQL words.
fn kind_name(n: &NodeEnum) -> String {
    let s = match n {
        NodeEnum::InsertStmt(_) => "INSERT",
        NodeEnum::UpdateStmt(_) => "UPDATE",
        NodeEnum::DeleteStmt(_) => "DELETE",
        NodeEnum::MergeStmt(_) => "MERGE",
        NodeEnum::CopyStmt(_) => "COPY",
        NodeEnum::DoStmt(_) => "DO",
        NodeEnum::CallStmt(_) => "CALL",
        NodeEnum::ExplainStmt(_) => "EXPLAIN",
        NodeEnum::ListenStmt(_) => "LISTEN",
        NodeEnum::NotifyStmt(_) => "NOTIFY",
        NodeEnum::UnlistenStmt(_) => "UNLISTEN",
        NodeEnum::VacuumStmt(_) => "VACUUM/ANALYZE",
        NodeEnum::CreateTableAsStmt(_) => "CREATE TABLE AS",
        NodeEnum::TruncateStmt(_) => "TRUNCATE",
        NodeEnum::LockStmt(_) => "LOCK",
        NodeEnum::LoadStmt(_) => "LOAD",
        NodeEnum::CheckPointStmt(_) => "CHECKPOINT",
        NodeEnum::RefreshMatViewStmt(_) => "REFRESH MATERIALIZED VIEW",
        NodeEnum::ClusterStmt(_) => "CLUSTER",
        NodeEnum::ReindexStmt(_) => "REINDEX",
        NodeEnum::GrantStmt(_) | NodeEnum::GrantRoleStmt(_) => "GRANT/REVOKE",
        NodeEnum::AlterSystemStmt(_) => "ALTER SYSTEM",
        NodeEnum::ConstraintsSetStmt(_) => "SET CONSTRAINTS",
        NodeEnum::SecLabelStmt(_) => "SECURITY LABEL",
        NodeEnum::CommentStmt(_) => "COMMENT",
        _ => {
            let name = node_name(n);
            return if name.starts_with("Create")
                || name.starts_with("Alter")
                || name.starts_with("Drop")
                || name.contains("Rename")
            {
                format!("DDL ({name})")
            } else {
                format!("statement {name}")
            };
        }
    };
    s.to_owned()
}
