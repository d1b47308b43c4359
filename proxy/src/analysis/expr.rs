//! Expressions: every node of an expression is checked (functions,
//! operators, casts), and any column it reads must be unprotected; a
//! protected one is refused by the rule of the clause it appears in (or
//! of the aggregate or window function around it). Node types the
//! analyzer does not know are refused. Each expression's [`Origin`] is
//! worked out on the way: a catalog function takes only values of the
//! catalog.

use pg_query::protobuf::{AExprKind, SubLinkType, WindowDef};
use pg_query::{Node, NodeEnum};

use super::nodes::{
    construct, fields, names, node_name, opaque_row, protected, whole_row, Cx, Origin, Outputs,
};
use super::query::Walker;
use super::scope::{Resolved, Scope};
use super::{Refusal, Rule};

impl Cx {
    fn refusal(self, out: &super::OutputColumn) -> Refusal {
        if self.aggregate {
            protected(Rule::ProtectedInAggregate, out, "in an aggregate")
        } else if self.window {
            protected(Rule::ProtectedInWindow, out, "in a window function")
        } else {
            protected(self.clause.rule(), out, self.clause.how())
        }
    }
}

impl Walker<'_> {
    /// Checks every expression of `nodes`; the origin of a value computed
    /// from them all.
    pub fn exprs(&self, nodes: &[Node], scope: &Scope<'_>, cx: Cx) -> Result<Origin, Refusal> {
        let mut origin = Origin::Catalog;
        for n in nodes {
            origin = origin.and(self.expr(n, scope, cx)?);
        }
        Ok(origin)
    }

    fn opt(&self, node: &Option<Box<Node>>, scope: &Scope<'_>, cx: Cx) -> Result<Origin, Refusal> {
        match node {
            Some(n) => self.expr(n, scope, cx),
            None => Ok(Origin::Catalog),
        }
    }

    /// Checks an expression in `scope`; where its value comes from.
    pub fn expr(&self, node: &Node, scope: &Scope<'_>, cx: Cx) -> Result<Origin, Refusal> {
        let _depth = self.enter()?;
        let Some(n) = &node.node else {
            return Err(construct("an empty expression"));
        };
        match n {
            NodeEnum::ColumnRef(r) => match scope.resolve(&fields(&r.fields)?)? {
                Resolved::Column(c) if c.out.is_restricted() => Err(cx.refusal(&c.out)),
                Resolved::Column(c) => Ok(c.origin),
                Resolved::WholeRow(cols, _) if cols.iter().any(|c| c.out.is_restricted()) => {
                    Err(whole_row())
                }
                Resolved::WholeRow(_, Some(t)) => Err(opaque_row(&t)),
                Resolved::WholeRow(_, None) => Ok(Origin::Data),
            },
            NodeEnum::ParamRef(_) | NodeEnum::AConst(_) | NodeEnum::SqlvalueFunction(_) => {
                Ok(Origin::Catalog)
            }
            NodeEnum::TypeCast(c) => {
                match &c.type_name {
                    Some(t) => self.check_type(t)?,
                    None => return Err(construct("a cast without a type")),
                }
                self.opt(&c.arg, scope, cx)
            }
            NodeEnum::CollateClause(c) => self.opt(&c.arg, scope, cx),
            NodeEnum::FuncCall(f) => {
                if self.setting_read(f)?.is_some() {
                    // What SHOW of the same setting gives: no row data.
                    return Ok(Origin::Catalog);
                }
                let used = self.check_function(&f.funcname)?;
                let inner = Cx {
                    aggregate: cx.aggregate || used.aggregate || f.agg_star || f.agg_distinct,
                    window: cx.window || used.window || f.over.is_some(),
                    ..cx
                };
                let args = self.exprs(&f.args, scope, inner)?;
                if used.catalog {
                    catalog_arguments(&f.funcname, args)?;
                }
                // An aggregate or a window function computes over the
                // rows the query reads (`count(*)`, `row_number()`), not
                // over its arguments alone: never a value of the catalog.
                let over_rows = used.aggregate
                    || used.window
                    || f.agg_star
                    || f.agg_distinct
                    || f.over.is_some()
                    || f.agg_filter.is_some()
                    || !f.agg_order.is_empty();
                let mut origin = if over_rows { Origin::Data } else { args };
                for s in &f.agg_order {
                    let Some(NodeEnum::SortBy(s)) = &s.node else {
                        return Err(construct(
                            "an aggregate ORDER BY entry that is not a sort key",
                        ));
                    };
                    if !s.use_op.is_empty() {
                        self.check_operator(&s.use_op)?;
                    }
                    origin = origin.and(self.opt(&s.node, scope, inner)?);
                }
                origin = origin.and(self.opt(&f.agg_filter, scope, inner)?);
                if let Some(w) = &f.over {
                    origin = origin.and(self.window_def(w, scope, inner)?);
                }
                Ok(origin)
            }
            NodeEnum::NamedArgExpr(a) => self.opt(&a.arg, scope, cx),
            NodeEnum::AExpr(e) => {
                self.a_expr_operators(e)?;
                Ok(self
                    .opt(&e.lexpr, scope, cx)?
                    .and(self.opt(&e.rexpr, scope, cx)?))
            }
            NodeEnum::List(l) => self.exprs(&l.items, scope, cx),
            NodeEnum::BoolExpr(b) => self.exprs(&b.args, scope, cx),
            NodeEnum::NullTest(t) => self.opt(&t.arg, scope, cx),
            NodeEnum::BooleanTest(t) => self.opt(&t.arg, scope, cx),
            NodeEnum::SubLink(s) => self.sublink(s, scope, cx),
            NodeEnum::CaseExpr(c) => {
                if c.arg.is_some() {
                    self.check_operator_symbol(None, "=")?;
                }
                let mut origin = self.opt(&c.arg, scope, cx)?;
                for w in &c.args {
                    let Some(NodeEnum::CaseWhen(w)) = &w.node else {
                        return Err(construct("a CASE branch that is not WHEN"));
                    };
                    origin = origin.and(self.opt(&w.expr, scope, cx)?);
                    origin = origin.and(self.opt(&w.result, scope, cx)?);
                }
                Ok(origin.and(self.opt(&c.defresult, scope, cx)?))
            }
            NodeEnum::CoalesceExpr(c) => self.exprs(&c.args, scope, cx),
            NodeEnum::MinMaxExpr(m) => self.exprs(&m.args, scope, cx),
            NodeEnum::AArrayExpr(a) => self.exprs(&a.elements, scope, cx),
            NodeEnum::RowExpr(r) => self.exprs(&r.args, scope, cx),
            NodeEnum::GroupingFunc(g) => self.exprs(&g.args, scope, cx),
            NodeEnum::AIndirection(i) => {
                let mut origin = self.opt(&i.arg, scope, cx)?;
                let of_a_call = matches!(
                    i.arg.as_deref().and_then(|a| a.node.as_ref()),
                    Some(NodeEnum::FuncCall(_))
                );
                for (k, ind) in i.indirection.iter().enumerate() {
                    match &ind.node {
                        Some(NodeEnum::AIndices(x)) => {
                            origin = origin.and(self.opt(&x.lidx, scope, cx)?);
                            origin = origin.and(self.opt(&x.uidx, scope, cx)?);
                        }
                        Some(NodeEnum::String(s)) => {
                            self.field_selection(&s.sval, of_a_call && k == 0)?;
                        }
                        _ => return Err(construct("this kind of field selection")),
                    }
                }
                Ok(origin)
            }
            other => Err(construct(&format!("expression node {}", node_name(other)))),
        }
    }

    /// The operators an `A_Expr` runs.
    fn a_expr_operators(&self, e: &pg_query::protobuf::AExpr) -> Result<(), Refusal> {
        let kind = AExprKind::try_from(e.kind).unwrap_or(AExprKind::Undefined);
        match kind {
            AExprKind::AexprOp
            | AExprKind::AexprOpAny
            | AExprKind::AexprOpAll
            | AExprKind::AexprDistinct
            | AExprKind::AexprNotDistinct
            | AExprKind::AexprNullif
            | AExprKind::AexprIn
            | AExprKind::AexprLike
            | AExprKind::AexprIlike
            | AExprKind::AexprSimilar => self.check_operator(&e.name),
            AExprKind::AexprBetween
            | AExprKind::AexprNotBetween
            | AExprKind::AexprBetweenSym
            | AExprKind::AexprNotBetweenSym => {
                for op in ["<", "<=", ">", ">="] {
                    self.check_operator_symbol(None, op)?;
                }
                Ok(())
            }
            AExprKind::Undefined => Err(construct("this kind of operator expression")),
        }
    }

    fn sublink(
        &self,
        s: &pg_query::protobuf::SubLink,
        scope: &Scope<'_>,
        cx: Cx,
    ) -> Result<Origin, Refusal> {
        let kind = SubLinkType::try_from(s.sub_link_type).unwrap_or(SubLinkType::Undefined);
        let outputs = match kind {
            SubLinkType::ExistsSublink => Outputs::Bare,
            SubLinkType::ExprSublink
            | SubLinkType::ArraySublink
            | SubLinkType::AnySublink
            | SubLinkType::AllSublink
            | SubLinkType::RowcompareSublink => Outputs::Refuse(Rule::ProtectedInSubquery),
            _ => return Err(construct("this kind of subquery")),
        };
        if matches!(
            kind,
            SubLinkType::AnySublink | SubLinkType::AllSublink | SubLinkType::RowcompareSublink
        ) {
            if s.oper_name.is_empty() {
                self.check_operator_symbol(None, "=")?;
            } else {
                self.check_operator(&s.oper_name)?;
            }
        }
        self.opt(&s.testexpr, scope, cx)?;
        let Some(NodeEnum::SelectStmt(sel)) = s.subselect.as_ref().and_then(|n| n.node.as_ref())
        else {
            return Err(construct("a subquery that is not a SELECT"));
        };
        // What a subquery yields depends on the rows it reads, whatever
        // they are: never a value of the catalog alone.
        self.select(sel, Some(scope), outputs).map(|_| Origin::Data)
    }

    /// A window: partitioning, ordering and frame offsets.
    pub fn window_def(&self, w: &WindowDef, scope: &Scope<'_>, cx: Cx) -> Result<Origin, Refusal> {
        let cx = Cx { window: true, ..cx };
        let mut origin = self.exprs(&w.partition_clause, scope, cx)?;
        for s in &w.order_clause {
            let Some(NodeEnum::SortBy(s)) = &s.node else {
                return Err(construct("a window ORDER BY entry that is not a sort key"));
            };
            if !s.use_op.is_empty() {
                self.check_operator(&s.use_op)?;
            }
            origin = origin.and(self.opt(&s.node, scope, cx)?);
        }
        origin = origin.and(self.opt(&w.start_offset, scope, cx)?);
        Ok(origin.and(self.opt(&w.end_offset, scope, cx)?))
    }
}

/// A catalog function (`Policy::catalog_functions`) may only be given
/// values of the catalog: it reads definitions by the OIDs and names it
/// is given, and none of those may come from a table's rows.
pub(super) fn catalog_arguments(funcname: &[Node], args: Origin) -> Result<(), Refusal> {
    if args == Origin::Catalog {
        return Ok(());
    }
    let name = names(funcname).unwrap_or_default().join(".");
    Err(Refusal::new(
        Rule::CatalogFunctionArgument,
        format!(
            "function {name} reads the catalog and may only be given constants, parameters and \
             columns of catalog relations, not values read from a table or a subquery"
        ),
    ))
}
