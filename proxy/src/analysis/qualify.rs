//! Forwarding what was analysed: after a statement passes the analysis,
//! every name in it is qualified with the schema the analysis resolved it
//! to, and the tree is deparsed into the text the proxy forwards. An
//! object created upstream during the session (a table in an earlier
//! schema of the search path, an overload of a function or operator that
//! PostgreSQL's overload resolution would prefer) then cannot change what
//! the server runs.
//!
//! - relations: the schema the analysis found them in (recorded by the
//!   walker, by the name's position in the text); CTE names stay as they
//!   are;
//! - functions, operators and types: `pg_catalog`, the only schema the
//!   analysis lets them resolve to;
//! - constructs whose operator PostgreSQL looks up by an unqualified name
//!   that SQL cannot qualify are written in a form that can:
//!   `LIKE`/`ILIKE`/`SIMILAR TO` as `OPERATOR(pg_catalog.~~)`, `[NOT] IN
//!   (list)` as `OPERATOR(pg_catalog.=) ANY (ARRAY[...])` (`<>` and
//!   `ALL`), `IN (SELECT ...)` as `OPERATOR(pg_catalog.=) ANY (SELECT
//!   ...)`, `BETWEEN` as the comparisons PostgreSQL expands it to, a
//!   simple `CASE x WHEN v` as `CASE WHEN x OPERATOR(pg_catalog.=) v`,
//!   `IS [NOT] DISTINCT FROM` and `NULLIF` as the `CASE` expressions they
//!   mean.
//!
//! A select-list entry whose output column name the rewrite would change
//! (`NULLIF(a, b)` is named `nullif`, the `CASE` it becomes `case`) gets
//! the original name as an explicit alias.
//!
//! Not qualifiable in SQL: the `=` a `JOIN ... USING` or `NATURAL JOIN`
//! compares with (the analysis checks it, see docs/proxy.md).

use pg_query::protobuf::{
    a_const, AArrayExpr, AConst, AExpr, AExprKind, BoolExpr, BoolExprType, CaseExpr, CaseWhen,
    NullTest, NullTestType, SelectStmt, SubLinkType, TypeName,
};
use pg_query::{Node, NodeEnum};

use super::nodes::{construct, node_name, Relations};
use super::Refusal;

/// Rewrites one analysed statement in place; `true` when something
/// changed.
pub(super) fn statement(node: &mut Node, relations: &Relations) -> Result<bool, Refusal> {
    let mut q = Qualifier {
        relations,
        changed: false,
        applied: 0,
    };
    q.stmt(node)?;
    if q.applied != relations.len() {
        // A relation the analysis resolved was not met: the rewrite does
        // not cover the statement.
        return Err(refused(
            "a relation the analysis resolved was not qualified",
        ));
    }
    Ok(q.changed)
}

fn refused(why: &str) -> Refusal {
    Refusal::new(
        super::Rule::QualificationFailed,
        format!("the statement could not be forwarded with qualified names: {why}"),
    )
}

fn string(s: &str) -> Node {
    Node {
        node: Some(NodeEnum::String(pg_query::protobuf::String {
            sval: s.into(),
        })),
    }
}

fn node(n: NodeEnum) -> Node {
    Node { node: Some(n) }
}

/// `pg_catalog.op` applied to `l` and `r`.
fn op(symbol: &str, l: Node, r: Node) -> Node {
    node(NodeEnum::AExpr(Box::new(AExpr {
        kind: AExprKind::AexprOp as i32,
        name: vec![string("pg_catalog"), string(symbol)],
        lexpr: Some(Box::new(l)),
        rexpr: Some(Box::new(r)),
        location: -1,
        ..Default::default()
    })))
}

fn bool_expr(kind: BoolExprType, args: Vec<Node>) -> Node {
    node(NodeEnum::BoolExpr(Box::new(BoolExpr {
        boolop: kind as i32,
        args,
        location: -1,
        ..Default::default()
    })))
}

fn null_test(arg: Node, is_null: bool) -> Node {
    let t = if is_null {
        NullTestType::IsNull
    } else {
        NullTestType::IsNotNull
    };
    node(NodeEnum::NullTest(Box::new(NullTest {
        arg: Some(Box::new(arg)),
        nulltesttype: t as i32,
        location: -1,
        ..Default::default()
    })))
}

fn bool_const(b: bool) -> Node {
    node(NodeEnum::AConst(AConst {
        isnull: false,
        val: Some(a_const::Val::Boolval(pg_query::protobuf::Boolean {
            boolval: b,
        })),
        location: -1,
    }))
}

/// The first argument of `current_setting` as the server gets it:
/// `CASE WHEN pg_catalog.lower(x::text) = ANY (ARRAY[<the settings SHOW may
/// read>]) THEN x::text END`, so that a name bound at execution (which
/// the analysis cannot see) reads NULL unless SHOW could read it (the
/// `dptext.*` settings never: none is on the lists).
fn setting_guard(arg: &mut Node) {
    let x = std::mem::replace(arg, null_const());
    let as_text = |n: Node| {
        node(NodeEnum::TypeCast(Box::new(pg_query::protobuf::TypeCast {
            arg: Some(Box::new(n)),
            type_name: Some(TypeName {
                names: vec![string("pg_catalog"), string("text")],
                typemod: -1,
                location: -1,
                ..Default::default()
            }),
            location: -1,
        })))
    };
    let lower = node(NodeEnum::FuncCall(Box::new(pg_query::protobuf::FuncCall {
        funcname: vec![string("pg_catalog"), string("lower")],
        args: vec![as_text(x.clone())],
        funcformat: pg_query::protobuf::CoercionForm::CoerceExplicitCall as i32,
        location: -1,
        ..Default::default()
    })));
    let names: Vec<Node> = super::defaults::ALLOWED_SETTINGS
        .iter()
        .chain(super::defaults::SHOWN_SETTINGS)
        .map(|s| {
            node(NodeEnum::AConst(AConst {
                isnull: false,
                val: Some(a_const::Val::Sval(pg_query::protobuf::String {
                    sval: (*s).to_owned(),
                })),
                location: -1,
            }))
        })
        .collect();
    let any = node(NodeEnum::AExpr(Box::new(AExpr {
        kind: AExprKind::AexprOpAny as i32,
        name: vec![string("pg_catalog"), string("=")],
        lexpr: Some(Box::new(lower)),
        rexpr: Some(Box::new(node(NodeEnum::AArrayExpr(AArrayExpr {
            elements: names,
            location: -1,
            ..Default::default()
        })))),
        location: -1,
        ..Default::default()
    })));
    *arg = node(NodeEnum::CaseExpr(Box::new(CaseExpr {
        args: vec![node(NodeEnum::CaseWhen(Box::new(CaseWhen {
            expr: Some(Box::new(any)),
            result: Some(Box::new(as_text(x))),
            location: -1,
            ..Default::default()
        })))],
        location: -1,
        ..Default::default()
    })));
}

fn null_const() -> Node {
    node(NodeEnum::AConst(AConst {
        isnull: true,
        val: None,
        location: -1,
    }))
}

fn case(whens: Vec<(Node, Node)>, default: Node) -> Node {
    node(NodeEnum::CaseExpr(Box::new(CaseExpr {
        args: whens
            .into_iter()
            .map(|(e, r)| {
                node(NodeEnum::CaseWhen(Box::new(CaseWhen {
                    expr: Some(Box::new(e)),
                    result: Some(Box::new(r)),
                    location: -1,
                    ..Default::default()
                })))
            })
            .collect(),
        defresult: Some(Box::new(default)),
        location: -1,
        ..Default::default()
    })))
}

fn is_row(n: &Node) -> bool {
    matches!(n.node, Some(NodeEnum::RowExpr(_)))
}

/// The output column name PostgreSQL gives an expression
/// (FigureColnameInternal in parse_target.c), with its strength: 2 for a
/// name from the expression itself, 1 for a fallback (`case`, a cast's
/// type), 0 for none (`?column?`).
fn figure(n: &Node) -> (Option<String>, u8) {
    let last = |nodes: &[Node]| match nodes.last().and_then(|n| n.node.as_ref()) {
        Some(NodeEnum::String(s)) => Some(s.sval.clone()),
        _ => None,
    };
    match n.node.as_ref() {
        Some(NodeEnum::ColumnRef(r)) => match last(&r.fields) {
            Some(name) => (Some(name), 2),
            None => (None, 0),
        },
        Some(NodeEnum::AIndirection(i)) => match last(&i.indirection) {
            Some(name) => (Some(name), 2),
            None => i.arg.as_deref().map_or((None, 0), figure),
        },
        Some(NodeEnum::FuncCall(f)) => (last(&f.funcname), 2),
        Some(NodeEnum::AExpr(e)) if e.kind == AExprKind::AexprNullif as i32 => {
            (Some("nullif".into()), 2)
        }
        Some(NodeEnum::TypeCast(c)) => {
            let inner = c.arg.as_deref().map_or((None, 0), figure);
            if inner.1 <= 1 {
                if let Some(t) = &c.type_name {
                    return (last(&t.names), 1);
                }
            }
            inner
        }
        Some(NodeEnum::CollateClause(c)) => c.arg.as_deref().map_or((None, 0), figure),
        Some(NodeEnum::CaseExpr(_)) => (Some("case".into()), 1),
        Some(NodeEnum::AArrayExpr(_)) => (Some("array".into()), 2),
        Some(NodeEnum::RowExpr(_)) => (Some("row".into()), 2),
        Some(NodeEnum::CoalesceExpr(_)) => (Some("coalesce".into()), 2),
        Some(NodeEnum::GroupingFunc(_)) => (Some("grouping".into()), 2),
        _ => (None, 0),
    }
}

struct Qualifier<'r> {
    relations: &'r Relations,
    changed: bool,
    applied: usize,
}

impl Qualifier<'_> {
    fn names(&mut self, names: &mut Vec<Node>) {
        if names.len() == 1 {
            names.insert(0, string("pg_catalog"));
            self.changed = true;
        }
    }

    fn stmt(&mut self, n: &mut Node) -> Result<(), Refusal> {
        match n.node.as_mut() {
            Some(NodeEnum::SelectStmt(s)) => self.select(s),
            Some(NodeEnum::DeclareCursorStmt(d)) => self.opt(&mut d.query),
            Some(NodeEnum::PrepareStmt(p)) => {
                for t in &mut p.argtypes {
                    self.expr(t)?;
                }
                self.opt(&mut p.query)
            }
            Some(NodeEnum::ExecuteStmt(e)) => self.list(&mut e.params),
            // The other allowed statements name nothing to resolve.
            _ => Ok(()),
        }
    }

    fn opt(&mut self, n: &mut Option<Box<Node>>) -> Result<(), Refusal> {
        match n {
            Some(n) => self.expr(n),
            None => Ok(()),
        }
    }

    fn list(&mut self, nodes: &mut [Node]) -> Result<(), Refusal> {
        nodes.iter_mut().try_for_each(|n| self.expr(n))
    }

    fn select(&mut self, s: &mut SelectStmt) -> Result<(), Refusal> {
        if let Some(w) = &mut s.with_clause {
            self.list(&mut w.ctes)?;
        }
        if let Some(l) = &mut s.larg {
            self.select(l)?;
        }
        if let Some(r) = &mut s.rarg {
            self.select(r)?;
        }
        self.list(&mut s.values_lists)?;
        self.list(&mut s.from_clause)?;
        self.list(&mut s.target_list)?;
        self.opt(&mut s.where_clause)?;
        self.list(&mut s.group_clause)?;
        self.opt(&mut s.having_clause)?;
        self.list(&mut s.window_clause)?;
        self.list(&mut s.distinct_clause)?;
        self.list(&mut s.sort_clause)?;
        self.opt(&mut s.limit_count)?;
        self.opt(&mut s.limit_offset)
    }

    fn type_name(&mut self, t: &mut TypeName) {
        self.names(&mut t.names);
    }

    /// Every node kind the analysis accepts; anything else is refused,
    /// so that no name escapes qualification.
    fn expr(&mut self, n: &mut Node) -> Result<(), Refusal> {
        let Some(e) = n.node.as_mut() else {
            // `DISTINCT` without `ON` and similar placeholders.
            return Ok(());
        };
        match e {
            NodeEnum::ColumnRef(_)
            | NodeEnum::ParamRef(_)
            | NodeEnum::AConst(_)
            | NodeEnum::SqlvalueFunction(_)
            | NodeEnum::String(_)
            | NodeEnum::AStar(_) => Ok(()),
            NodeEnum::SelectStmt(s) => self.select(s),
            NodeEnum::CommonTableExpr(c) => self.opt(&mut c.ctequery),
            NodeEnum::RangeVar(r) => {
                if r.schemaname.is_empty() {
                    if let Some(schema) = self.relations.get(&r.location) {
                        r.schemaname = schema.clone();
                        self.applied += 1;
                        self.changed = true;
                    }
                }
                Ok(())
            }
            NodeEnum::RangeSubselect(s) => self.opt(&mut s.subquery),
            NodeEnum::RangeFunction(f) => self.list(&mut f.functions),
            NodeEnum::JoinExpr(j) => {
                self.opt(&mut j.larg)?;
                self.opt(&mut j.rarg)?;
                self.opt(&mut j.quals)
            }
            NodeEnum::ResTarget(t) => {
                let Some(val) = &mut t.val else {
                    return Ok(());
                };
                let before = figure(val);
                self.expr(val)?;
                if t.name.is_empty() && figure(val).0 != before.0 {
                    t.name = before.0.unwrap_or_else(|| "?column?".to_owned());
                }
                Ok(())
            }
            NodeEnum::TypeName(t) => {
                self.type_name(t);
                Ok(())
            }
            NodeEnum::TypeCast(c) => {
                if let Some(t) = &mut c.type_name {
                    self.type_name(t);
                }
                self.opt(&mut c.arg)
            }
            NodeEnum::CollateClause(c) => self.opt(&mut c.arg),
            NodeEnum::FuncCall(f) => {
                let named = f.funcname.last().and_then(|n| match &n.node {
                    Some(NodeEnum::String(s)) => Some(s.sval.as_str()),
                    _ => None,
                });
                if named == Some("current_setting") {
                    if let Some(first) = f.args.first_mut() {
                        setting_guard(first);
                        self.changed = true;
                    }
                }
                self.names(&mut f.funcname);
                self.list(&mut f.args)?;
                self.list(&mut f.agg_order)?;
                self.opt(&mut f.agg_filter)?;
                if let Some(w) = &mut f.over {
                    self.window(w)?;
                }
                Ok(())
            }
            NodeEnum::SortBy(s) => {
                if !s.use_op.is_empty() {
                    self.names(&mut s.use_op);
                }
                self.opt(&mut s.node)
            }
            NodeEnum::WindowDef(w) => self.window(w),
            NodeEnum::NamedArgExpr(a) => self.opt(&mut a.arg),
            NodeEnum::List(l) => self.list(&mut l.items),
            NodeEnum::BoolExpr(b) => {
                self.list(&mut b.args)?;
                // The grammar folds `(a AND b) AND c` into one AND of
                // three: so must a rewrite that put an AND first.
                while let Some(NodeEnum::BoolExpr(first)) =
                    b.args.first().and_then(|n| n.node.as_ref())
                {
                    if first.boolop != b.boolop || b.boolop == BoolExprType::NotExpr as i32 {
                        break;
                    }
                    let Some(NodeEnum::BoolExpr(first)) = b.args.remove(0).node else {
                        break;
                    };
                    b.args.splice(0..0, first.args);
                }
                Ok(())
            }
            NodeEnum::NullTest(t) => self.opt(&mut t.arg),
            NodeEnum::BooleanTest(t) => self.opt(&mut t.arg),
            NodeEnum::CoalesceExpr(c) => self.list(&mut c.args),
            NodeEnum::MinMaxExpr(m) => self.list(&mut m.args),
            NodeEnum::AArrayExpr(a) => self.list(&mut a.elements),
            NodeEnum::RowExpr(r) => self.list(&mut r.args),
            NodeEnum::GroupingFunc(g) => self.list(&mut g.args),
            NodeEnum::GroupingSet(g) => self.list(&mut g.content),
            NodeEnum::AIndices(i) => {
                self.opt(&mut i.lidx)?;
                self.opt(&mut i.uidx)
            }
            NodeEnum::AIndirection(i) => {
                self.opt(&mut i.arg)?;
                self.list(&mut i.indirection)
            }
            NodeEnum::SubLink(s) => {
                let kind = SubLinkType::try_from(s.sub_link_type).unwrap_or(SubLinkType::Undefined);
                if matches!(kind, SubLinkType::AnySublink | SubLinkType::AllSublink) {
                    if s.oper_name.is_empty() {
                        // `IN (SELECT ...)`: PostgreSQL looks up `=`.
                        s.oper_name = vec![string("=")];
                    }
                    self.names(&mut s.oper_name);
                } else if !s.oper_name.is_empty() {
                    return Err(refused("a subquery comparison of this kind"));
                }
                self.opt(&mut s.testexpr)?;
                self.opt(&mut s.subselect)
            }
            NodeEnum::CaseExpr(c) => {
                self.opt(&mut c.arg)?;
                for w in &mut c.args {
                    let Some(NodeEnum::CaseWhen(w)) = w.node.as_mut() else {
                        return Err(construct("a CASE branch that is not WHEN"));
                    };
                    self.opt(&mut w.expr)?;
                    self.opt(&mut w.result)?;
                }
                self.opt(&mut c.defresult)?;
                if let Some(arg) = c.arg.take() {
                    // CASE x WHEN v: PostgreSQL compares with `=`.
                    for w in &mut c.args {
                        if let Some(NodeEnum::CaseWhen(w)) = w.node.as_mut() {
                            let v = w.expr.take().map(|b| *b).unwrap_or_else(null_const);
                            w.expr = Some(Box::new(op("=", (*arg).clone(), v)));
                        }
                    }
                    self.changed = true;
                }
                Ok(())
            }
            NodeEnum::AExpr(_) => {
                let rewritten = self.a_expr(n)?;
                if let Some(r) = rewritten {
                    *n = r;
                }
                Ok(())
            }
            NodeEnum::CaseWhen(_) => Err(construct("a CASE branch outside CASE")),
            other => Err(refused(&format!(
                "node {} is not covered",
                node_name(other)
            ))),
        }
    }

    fn window(&mut self, w: &mut pg_query::protobuf::WindowDef) -> Result<(), Refusal> {
        self.list(&mut w.partition_clause)?;
        self.list(&mut w.order_clause)?;
        self.opt(&mut w.start_offset)?;
        self.opt(&mut w.end_offset)
    }

    /// An operator expression: qualified in place, or `Some` node that
    /// replaces it.
    fn a_expr(&mut self, n: &mut Node) -> Result<Option<Node>, Refusal> {
        let Some(NodeEnum::AExpr(e)) = n.node.as_mut() else {
            return Ok(None);
        };
        self.opt(&mut e.lexpr)?;
        self.opt(&mut e.rexpr)?;
        self.changed = true;
        let kind = AExprKind::try_from(e.kind).unwrap_or(AExprKind::Undefined);
        let symbol = match e.name.as_slice() {
            [Node {
                node: Some(NodeEnum::String(s)),
            }] => Some(s.sval.clone()),
            _ => None,
        };
        let take = |b: &mut Option<Box<Node>>| b.take().map(|b| *b);
        match kind {
            AExprKind::AexprOp | AExprKind::AexprOpAny | AExprKind::AexprOpAll => {
                self.names(&mut e.name);
                Ok(None)
            }
            AExprKind::AexprLike | AExprKind::AexprIlike | AExprKind::AexprSimilar => {
                // PostgreSQL transforms these as plain operators.
                e.kind = AExprKind::AexprOp as i32;
                self.names(&mut e.name);
                Ok(None)
            }
            AExprKind::AexprIn => {
                let (Some(sym), Some(l), Some(r)) =
                    (symbol, take(&mut e.lexpr), take(&mut e.rexpr))
                else {
                    return Err(refused("an IN list of this shape"));
                };
                let Some(NodeEnum::List(items)) = r.node else {
                    return Err(refused("an IN list of this shape"));
                };
                if is_row(&l) || items.items.iter().any(is_row) {
                    return Err(refused(
                        "a row compared with IN (list); compare the columns one by one",
                    ));
                }
                let kind = match sym.as_str() {
                    "=" => AExprKind::AexprOpAny,
                    "<>" => AExprKind::AexprOpAll,
                    _ => return Err(refused("an IN list of this shape")),
                };
                Ok(Some(node(NodeEnum::AExpr(Box::new(AExpr {
                    kind: kind as i32,
                    name: vec![string("pg_catalog"), string(&sym)],
                    lexpr: Some(Box::new(l)),
                    rexpr: Some(Box::new(node(NodeEnum::AArrayExpr(AArrayExpr {
                        elements: items.items,
                        location: -1,
                        ..Default::default()
                    })))),
                    location: e.location,
                    ..Default::default()
                })))))
            }
            AExprKind::AexprDistinct | AExprKind::AexprNotDistinct | AExprKind::AexprNullif => {
                let (Some(l), Some(r)) = (take(&mut e.lexpr), take(&mut e.rexpr)) else {
                    return Err(refused("an operator expression without two operands"));
                };
                if symbol.as_deref() != Some("=") || is_row(&l) || is_row(&r) {
                    return Err(refused(
                        "a row compared with IS DISTINCT FROM or NULLIF; compare the columns one by one",
                    ));
                }
                let eq = op("=", l.clone(), r.clone());
                Ok(Some(match kind {
                    AExprKind::AexprDistinct => case(
                        vec![
                            (null_test(l, true), null_test(r.clone(), false)),
                            (null_test(r, true), bool_const(true)),
                        ],
                        bool_expr(BoolExprType::NotExpr, vec![eq]),
                    ),
                    AExprKind::AexprNotDistinct => case(
                        vec![
                            (null_test(l, true), null_test(r.clone(), true)),
                            (null_test(r, true), bool_const(false)),
                        ],
                        eq,
                    ),
                    _ => case(vec![(eq, null_const())], l),
                }))
            }
            AExprKind::AexprBetween
            | AExprKind::AexprNotBetween
            | AExprKind::AexprBetweenSym
            | AExprKind::AexprNotBetweenSym => {
                let (Some(a), Some(r)) = (take(&mut e.lexpr), take(&mut e.rexpr)) else {
                    return Err(refused("a BETWEEN of this shape"));
                };
                let Some(NodeEnum::List(bounds)) = r.node else {
                    return Err(refused("a BETWEEN of this shape"));
                };
                let [lo, hi] = <[Node; 2]>::try_from(bounds.items)
                    .map_err(|_| refused("a BETWEEN of this shape"))?;
                use BoolExprType::{AndExpr as And, OrExpr as Or};
                // As transformAExprBetween expands them.
                let within = |lo: &Node, hi: &Node| {
                    bool_expr(
                        And,
                        vec![
                            op(">=", a.clone(), lo.clone()),
                            op("<=", a.clone(), hi.clone()),
                        ],
                    )
                };
                let outside = |lo: &Node, hi: &Node| {
                    bool_expr(
                        Or,
                        vec![
                            op("<", a.clone(), lo.clone()),
                            op(">", a.clone(), hi.clone()),
                        ],
                    )
                };
                Ok(Some(match kind {
                    AExprKind::AexprBetween => within(&lo, &hi),
                    AExprKind::AexprNotBetween => outside(&lo, &hi),
                    AExprKind::AexprBetweenSym => {
                        bool_expr(Or, vec![within(&lo, &hi), within(&hi, &lo)])
                    }
                    _ => bool_expr(And, vec![outside(&lo, &hi), outside(&hi, &lo)]),
                }))
            }
            AExprKind::Undefined => Err(construct("this kind of operator expression")),
        }
    }
}

/// Fields of the parse tree that hold positions in the text.
const POSITIONS: [&str; 3] = ["location", "list_start", "list_end"];

/// A node's debug text without positions: two trees that differ only
/// in where their nodes were in the text compare equal. Text inside
/// string literals (`"..."` in the debug text) is kept as it is.
pub(super) fn shape(n: &impl std::fmt::Debug) -> String {
    let text = format!("{n:?}");
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if b == b':' && bytes.get(i + 1) == Some(&b' ') {
            let field_start = text[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |j| j + 1);
            let field = &text[field_start..i];
            let tail = &text[i + 2..];
            let digits = tail
                .char_indices()
                .find(|(j, c)| !(c.is_ascii_digit() || (*j == 0 && *c == '-')))
                .map_or(tail.len(), |(j, _)| j);
            if digits > 0 && POSITIONS.iter().any(|p| field.ends_with(p)) {
                out.push_str(&text[copied..i]);
                out.push_str(": _");
                i += 2 + digits;
                copied = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}
