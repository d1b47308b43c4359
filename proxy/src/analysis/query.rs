//! Select trees: `WITH`, set operations, `VALUES`, the select list and
//! the clauses around it, and which output columns carry protected
//! values.
//!
//! A protected column may be output bare by the statement's top-level
//! select list, and only when the server holds none of its rows, or sorts
//! them in the only order there is: a select over one table, without
//! grouping, `DISTINCT`, window functions, subqueries or `WITH`, and
//! without `ORDER BY` unless by a unique key ([`unbuffered`],
//! [`super::order`]). Anywhere else
//! (a derived table, a CTE, a subquery, a sort) the server would sort, hash
//! or store raw values, and how much memory they take would decide what it
//! returns: a sort that spills to disk reorders ties, a row it cannot
//! build fails, a hash that outgrows memory splits into batches.

use std::cell::Cell;

use pg_query::protobuf::{
    CommonTableExpr, ResTarget, SelectStmt, SetOperation, SortBy, WithClause,
};
use pg_query::{Node, NodeEnum};

use super::nodes::Field;
use super::nodes::{
    construct, fields, names, protected, whole_row, Clause, Origin, Outputs, Relations,
};
use super::scope::{Col, Cte, NsItem, Resolved, Scope};
use super::{Context, OutputColumn, Refusal, Rule};

/// Deepest nesting of selects and expressions the analyzer follows.
const MAX_DEPTH: usize = 200;

/// One analysis: the context, the effective search path, the depth.
pub(super) struct Walker<'a> {
    /// What the analysis reads.
    pub ctx: &'a Context<'a>,
    /// Schemas searched for unqualified names, `pg_catalog` included.
    pub path: Vec<String>,
    depth: Cell<usize>,
    /// Relations resolved through the catalog, by the position of their
    /// name in the text: the schema the forwarded text names them with.
    pub relations: std::cell::RefCell<Relations>,
    /// Set when one position resolved to two schemas.
    pub conflict: Cell<bool>,
    /// The first protected column a derived table, CTE or `EXISTS`
    /// subquery output: the server would hold its raw values (a CTE, a
    /// sort, a hash of the query around it). Refuses the statement once
    /// the rest is analysed, so that a clause that uses the column is
    /// refused by its own rule first ([`Walker::nested`]).
    nested: std::cell::RefCell<Option<Refusal>>,
}

/// Leaves one level of nesting when dropped.
pub(super) struct Depth<'w>(&'w Cell<usize>);

impl Drop for Depth<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

impl<'a> Walker<'a> {
    /// A walker for `ctx`.
    pub fn new(ctx: &'a Context<'a>) -> Self {
        Walker {
            ctx,
            path: super::catalog::effective_path(ctx.search_path, ctx.user),
            depth: Cell::new(0),
            relations: Default::default(),
            conflict: Cell::new(false),
            nested: Default::default(),
        }
    }

    /// Enters one level of nesting; refuses past [`MAX_DEPTH`].
    pub fn enter(&self) -> Result<Depth<'_>, Refusal> {
        let d = self.depth.get() + 1;
        if d > MAX_DEPTH {
            return Err(Refusal::new(
                Rule::TooComplex,
                "the statement nests deeper than the analyzer follows",
            ));
        }
        self.depth.set(d);
        Ok(Depth(&self.depth))
    }

    /// Analyzes a select under `parent`; returns its output columns.
    pub fn select(
        &self,
        stmt: &SelectStmt,
        parent: Option<&Scope<'_>>,
        outputs: Outputs,
    ) -> Result<Vec<Col>, Refusal> {
        let _depth = self.enter()?;
        if stmt.into_clause.is_some() {
            return Err(Refusal::new(
                Rule::StatementKind,
                "SELECT INTO creates a table and is not allowed",
            ));
        }
        if !stmt.locking_clause.is_empty() {
            return Err(Refusal::new(
                Rule::RowLocking,
                "SELECT ... FOR UPDATE/SHARE locks rows and is not allowed",
            ));
        }
        let mut level = Scope::new(parent);
        if let Some(with) = &stmt.with_clause {
            level.ctes = self.with_clause(with, parent)?;
        }
        let cols = if stmt.op != SetOperation::SetopNone as i32 && stmt.op != 0 {
            self.set_operation(stmt, &level)?
        } else if !stmt.values_lists.is_empty() {
            self.values(stmt, &level)?
        } else {
            return self.simple_select(stmt, level, outputs);
        };
        // ORDER BY and LIMIT of a set operation or VALUES see its output.
        let outer = Scope {
            parent: Some(&level),
            items: vec![NsItem {
                name: None,
                schema: None,
                rel_visible: false,
                cols_visible: true,
                cols: cols.clone(),
                system_columns: false,
                row_type: None,
                unique_keys: Vec::new(),
            }],
            ctes: Vec::new(),
        };
        self.tail(stmt, &cols, &outer)?;
        Ok(cols)
    }

    /// The CTEs of a `WITH` list. In a plain `WITH` each CTE sees the
    /// ones before it. In `WITH RECURSIVE` PostgreSQL makes every CTE of
    /// the list visible to every other, in any order; the analyzer reads
    /// them in order, so a CTE that refers to one defined later in the
    /// list (or to itself outside the recursive term of its `UNION`) is
    /// refused rather than resolved to a table of that name.
    fn with_clause(
        &self,
        with: &WithClause,
        parent: Option<&Scope<'_>>,
    ) -> Result<Vec<Cte>, Refusal> {
        let mut list = Vec::with_capacity(with.ctes.len());
        for node in &with.ctes {
            let Some(NodeEnum::CommonTableExpr(cte)) = &node.node else {
                return Err(construct("a WITH item that is not a CTE"));
            };
            if list
                .iter()
                .any(|c: &&CommonTableExpr| c.ctename == cte.ctename)
            {
                return Err(construct(&format!(
                    "a WITH list naming {} twice",
                    cte.ctename
                )));
            }
            list.push(cte);
        }
        let mut ctes: Vec<Cte> = Vec::new();
        for (i, cte) in list.iter().enumerate() {
            if cte.search_clause.is_some() || cte.cycle_clause.is_some() {
                return Err(construct("SEARCH and CYCLE clauses of recursive CTEs"));
            }
            let Some(NodeEnum::SelectStmt(query)) =
                cte.ctequery.as_ref().and_then(|q| q.node.as_ref())
            else {
                return Err(Refusal::new(
                    Rule::StatementKind,
                    format!(
                        "CTE {} is not a SELECT (data-modifying WITH is not allowed)",
                        cte.ctename
                    ),
                ));
            };
            let aliases = names(&cte.aliascolnames)
                .ok_or_else(|| construct("CTE column names that are not names"))?;
            let mut visible = Scope::new(parent);
            visible.ctes = ctes.clone();
            if with.recursive {
                // This CTE and the later ones: PostgreSQL sees them here.
                visible
                    .ctes
                    .extend(list[i..].iter().map(|c| Cte::pending(&c.ctename)));
            }
            let is_setop = query.op != SetOperation::SetopNone as i32 && query.op != 0;
            if with.recursive && is_setop {
                // The recursive term reads the CTE itself: give it the
                // columns of the non-recursive term, which a set
                // operation leaves unprotected (or refuses). The
                // non-recursive term may not read it.
                if let Some(first) = &query.larg {
                    let first_cols = self.select(
                        first,
                        Some(&visible),
                        Outputs::Refuse(Rule::ProtectedInSetOperation),
                    )?;
                    visible.ctes.retain(|c| c.name != cte.ctename);
                    visible.ctes.push(Cte {
                        name: cte.ctename.clone(),
                        cols: rename(first_cols, &aliases),
                        pending: false,
                    });
                }
            }
            let cols = self.select(query, Some(&visible), Outputs::Bare)?;
            ctes.push(Cte {
                name: cte.ctename.clone(),
                cols: rename(cols, &aliases),
                pending: false,
            });
        }
        Ok(ctes)
    }

    fn set_operation(&self, stmt: &SelectStmt, level: &Scope<'_>) -> Result<Vec<Col>, Refusal> {
        let (Some(l), Some(r)) = (&stmt.larg, &stmt.rarg) else {
            return Err(construct("a set operation without two branches"));
        };
        let rule = Outputs::Refuse(Rule::ProtectedInSetOperation);
        let left = self.select(l, Some(level), rule)?;
        let right = self.select(r, Some(level), rule)?;
        // The left branch names the columns, as certainly as it does; a
        // column is of the catalog when it is on both sides.
        Ok(left
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let other = right.get(i).map_or(Origin::Data, |r| r.origin);
                Col {
                    out: OutputColumn::Plain,
                    origin: c.origin.and(other),
                    ..c
                }
            })
            .collect())
    }

    fn values(&self, stmt: &SelectStmt, level: &Scope<'_>) -> Result<Vec<Col>, Refusal> {
        let mut origins: Vec<Origin> = Vec::new();
        for row in &stmt.values_lists {
            let Some(NodeEnum::List(list)) = &row.node else {
                return Err(construct("a VALUES row that is not a list"));
            };
            if origins.len() < list.items.len() {
                origins.resize(list.items.len(), Origin::Catalog);
            }
            for (e, origin) in list.items.iter().zip(origins.iter_mut()) {
                *origin = origin.and(self.expr(e, level, Clause::Values.cx())?);
            }
        }
        Ok(origins
            .into_iter()
            .enumerate()
            .map(|(i, origin)| Col::plain(format!("column{}", i + 1)).of(origin))
            .collect())
    }

    fn simple_select(
        &self,
        stmt: &SelectStmt,
        mut level: Scope<'_>,
        outputs: Outputs,
    ) -> Result<Vec<Col>, Refusal> {
        level.items = self.range_clause(&stmt.from_clause, &level)?;
        let mut cols = Vec::with_capacity(stmt.target_list.len());
        for t in &stmt.target_list {
            let Some(NodeEnum::ResTarget(t)) = &t.node else {
                return Err(construct("a select-list entry that is not a target"));
            };
            self.target(t, &level, &mut cols)?;
        }
        match outputs {
            Outputs::Refuse(rule) => {
                if let Some(c) = cols.iter().find(|c| c.out.is_restricted()) {
                    return Err(protected(
                        rule,
                        &c.out,
                        "as the output of a subquery or set operation",
                    ));
                }
            }
            Outputs::Bare => {
                if let Some(c) = cols
                    .iter()
                    .find(|c| matches!(c.out, OutputColumn::Protected(_)))
                {
                    self.nested.borrow_mut().get_or_insert_with(|| {
                        protected_buffered(&c.out, "from a derived table, CTE or subquery")
                    });
                }
            }
            Outputs::Top => {}
        }
        if let Some(w) = &stmt.where_clause {
            self.expr(w, &level, Clause::Where.cx())?;
        }
        for g in &stmt.group_clause {
            self.group_item(g, &cols, &level)?;
        }
        if let Some(h) = &stmt.having_clause {
            self.expr(h, &level, Clause::Having.cx())?;
        }
        for w in &stmt.window_clause {
            let Some(NodeEnum::WindowDef(w)) = &w.node else {
                return Err(construct("a WINDOW entry that is not a window"));
            };
            self.window_def(w, &level, Clause::Window.cx())?;
        }
        match stmt.distinct_clause.as_slice() {
            [] => {}
            [only] if only.node.is_none() => {
                if let Some(c) = cols.iter().find(|c| c.out.is_restricted()) {
                    return Err(protected(
                        Rule::ProtectedInDistinct,
                        &c.out,
                        "under DISTINCT",
                    ));
                }
            }
            on => {
                for e in on {
                    self.sort_key(e, &cols, &level, Clause::Distinct)?;
                }
            }
        }
        self.tail(stmt, &cols, &level)?;
        // Last, so that a protected column used in a clause is refused by
        // that clause's own rule.
        if outputs == Outputs::Top {
            if let Some(c) = cols
                .iter()
                .find(|c| matches!(c.out, OutputColumn::Protected(_)))
            {
                unbuffered(
                    stmt,
                    &c.out,
                    level.items.first(),
                    self.ctx.policy.spill_limit.as_deref(),
                )?;
            }
        }
        Ok(cols)
    }

    /// Refuses the statement when a derived table, CTE or subquery of it
    /// output a protected column; called once the top-level select is
    /// analysed.
    pub fn nested(&self) -> Result<(), Refusal> {
        match self.nested.borrow_mut().take() {
            Some(r) => Err(r),
            None => Ok(()),
        }
    }

    /// ORDER BY, LIMIT and OFFSET.
    fn tail(&self, stmt: &SelectStmt, cols: &[Col], scope: &Scope<'_>) -> Result<(), Refusal> {
        for s in &stmt.sort_clause {
            let Some(NodeEnum::SortBy(s)) = &s.node else {
                return Err(construct("an ORDER BY entry that is not a sort key"));
            };
            self.sort_by(s, cols, scope, Clause::OrderBy)?;
        }
        for l in [&stmt.limit_count, &stmt.limit_offset]
            .into_iter()
            .flatten()
        {
            self.expr(l, scope, Clause::Limit.cx())?;
        }
        Ok(())
    }

    /// One sort key of ORDER BY (or of a window or an aggregate).
    pub fn sort_by(
        &self,
        s: &SortBy,
        cols: &[Col],
        scope: &Scope<'_>,
        clause: Clause,
    ) -> Result<(), Refusal> {
        if !s.use_op.is_empty() {
            self.check_operator(&s.use_op)?;
        }
        match &s.node {
            Some(n) => self.sort_key(n, cols, scope, clause),
            None => Err(construct("an empty sort key")),
        }
    }

    fn group_item(&self, g: &Node, cols: &[Col], scope: &Scope<'_>) -> Result<(), Refusal> {
        if let Some(NodeEnum::GroupingSet(set)) = &g.node {
            for item in &set.content {
                self.group_item(item, cols, scope)?;
            }
            return Ok(());
        }
        if let Some(NodeEnum::RowExpr(row)) = &g.node {
            for item in &row.args {
                self.group_item(item, cols, scope)?;
            }
            return Ok(());
        }
        self.sort_key(g, cols, scope, Clause::GroupBy)
    }

    /// A key of ORDER BY, GROUP BY or DISTINCT ON: an integer names an
    /// output column; a bare name names an output column (ORDER BY and
    /// DISTINCT ON prefer it, GROUP BY prefers an input column); anything
    /// else is an expression over the input.
    fn sort_key(
        &self,
        n: &Node,
        cols: &[Col],
        scope: &Scope<'_>,
        clause: Clause,
    ) -> Result<(), Refusal> {
        let rule = clause.rule();
        if let Some(NodeEnum::AConst(c)) = &n.node {
            if let Some(pg_query::protobuf::a_const::Val::Ival(i)) = &c.val {
                let pos = usize::try_from(i.ival).ok().and_then(|p| p.checked_sub(1));
                if let Some(col) = pos.and_then(|p| cols.get(p)) {
                    if col.out.is_restricted() {
                        return Err(protected(rule, &col.out, "through its output position"));
                    }
                }
            }
            return Ok(());
        }
        if let Some(NodeEnum::ColumnRef(r)) = &n.node {
            if let [name] = names(&r.fields).unwrap_or_default().as_slice() {
                // Only certain output names: an uncertain one is plain, so
                // the server binding the key to it leaks nothing.
                let outputs: Vec<&Col> = cols
                    .iter()
                    .filter(|c| c.certain && c.name == *name)
                    .collect();
                // GROUP BY looks at this level's input columns first, and
                // at outer ones only after the output names.
                let use_output = match clause {
                    Clause::GroupBy => !scope.is_local_column(name) && !outputs.is_empty(),
                    _ => !outputs.is_empty(),
                };
                if use_output {
                    if let Some(c) = outputs.iter().find(|c| c.out.is_restricted()) {
                        return Err(protected(rule, &c.out, "through its output name"));
                    }
                    return Ok(());
                }
                // `ORDER BY count` of `SELECT count(*)`: a name no input
                // column has can only be an output column whose name is a
                // guess, which is plain (or the server refuses it).
                return match self.expr(n, scope, clause.cx()) {
                    Err(r)
                        if r.rule == Rule::ColumnUnresolved && cols.iter().any(|c| !c.certain) =>
                    {
                        Ok(())
                    }
                    other => other.map(|_| ()),
                };
            }
        }
        self.expr(n, scope, clause.cx()).map(|_| ())
    }

    /// One select-list entry: `*`, `t.*`, a bare column, or an expression.
    fn target(&self, t: &ResTarget, scope: &Scope<'_>, cols: &mut Vec<Col>) -> Result<(), Refusal> {
        let Some(val) = &t.val else {
            return Err(construct("a select-list entry without a value"));
        };
        if let Some(NodeEnum::ColumnRef(r)) = &val.node {
            let fields = fields(&r.fields)?;
            if let [Field::Star] = fields.as_slice() {
                cols.extend(scope.star()?);
                return Ok(());
            }
            match scope.resolve(&fields)? {
                Resolved::WholeRow(item, _) if matches!(fields.last(), Some(Field::Star)) => {
                    cols.extend(item);
                }
                Resolved::WholeRow(item, row_type) => {
                    if item.iter().any(|c| c.out.is_restricted()) {
                        return Err(whole_row());
                    }
                    let mut col = output_col(t);
                    if let Some(type_name) = row_type {
                        // Output bare: relayed, but opaque to whatever
                        // reads this select's output.
                        col.out = OutputColumn::Opaque {
                            column: super::scope::show(&fields),
                            type_name,
                        };
                    }
                    cols.push(col);
                }
                Resolved::Column(c) => cols.push(Col {
                    out: c.out,
                    origin: c.origin,
                    ..output_col(t)
                }),
            }
            return Ok(());
        }
        let origin = self.expr(val, scope, Clause::Target.cx())?;
        cols.push(output_col(t).of(origin));
        Ok(())
    }
}

/// A plain output column named as PostgreSQL names it. The name is
/// certain for an alias and for a column reference (its last field);
/// for any other expression it is a guess at FigureColname (which looks
/// into casts, subqueries, field selections and more), so uncertain.
fn output_col(t: &ResTarget) -> Col {
    if !t.name.is_empty() {
        return Col::plain(t.name.clone());
    }
    let Some(val) = &t.val else {
        return Col::uncertain("?column?");
    };
    match (&val.node, figure_name(val)) {
        (Some(NodeEnum::ColumnRef(_)), Some(name)) => Col::plain(name),
        (_, name) => Col::uncertain(name.unwrap_or_else(|| "?column?".to_owned())),
    }
}

pub(super) fn figure_name(n: &Node) -> Option<String> {
    let last = |nodes: &[Node]| names(nodes).and_then(|v| v.last().map(|s| (*s).to_owned()));
    match n.node.as_ref()? {
        NodeEnum::ColumnRef(r) => last(&r.fields),
        NodeEnum::FuncCall(f) => last(&f.funcname),
        NodeEnum::TypeCast(c) => c
            .arg
            .as_ref()
            .and_then(|a| figure_name(a))
            .or_else(|| c.type_name.as_ref().and_then(|t| last(&t.names))),
        NodeEnum::CollateClause(c) => c.arg.as_ref().and_then(|a| figure_name(a)),
        NodeEnum::AIndirection(i) => {
            last(&i.indirection).or_else(|| i.arg.as_ref().and_then(|a| figure_name(a)))
        }
        NodeEnum::CaseExpr(_) => Some("case".to_owned()),
        NodeEnum::CoalesceExpr(_) => Some("coalesce".to_owned()),
        NodeEnum::AArrayExpr(_) => Some("array".to_owned()),
        NodeEnum::RowExpr(_) => Some("row".to_owned()),
        _ => None,
    }
}

/// Renames the first columns to `aliases` (`AS t(a, b)`, CTE names):
/// their names become certain.
pub(super) fn rename(mut cols: Vec<Col>, aliases: &[&str]) -> Vec<Col> {
    for (c, a) in cols.iter_mut().zip(aliases) {
        c.name = (*a).to_owned();
        c.certain = true;
    }
    cols
}

/// Refuses a select that outputs protected column `out` unless the server
/// streams its rows from one table as it reads them, holding none, or
/// sorts them in the only order there is: a sort with ties (`ORDER BY`
/// other than a table's unique key, `DISTINCT`, grouping, a merge join),
/// a hash (joins, grouping, hashed subqueries), a window's buffer or a
/// materialized CTE would hold raw values, and what fits in `work_mem` or
/// in a row decides the order of ties, the batches of a hash, or an
/// error, each a function of the raw lengths. `ORDER BY` the columns of a
/// unique key (`order::is_total`), `LIMIT`, `OFFSET`, `WHERE` without
/// subqueries and any select-list expression of the other columns stay
/// allowed. `item` is the select's first `FROM` item.
fn unbuffered(
    stmt: &SelectStmt,
    out: &OutputColumn,
    item: Option<&NsItem>,
    spill_limit: Option<&str>,
) -> Result<(), Refusal> {
    let what = if stmt.with_clause.is_some() {
        Some("with WITH")
    } else if stmt.from_clause.len() != 1
        || !matches!(
            stmt.from_clause.first().and_then(|n| n.node.as_ref()),
            Some(NodeEnum::RangeVar(_))
        )
    {
        Some("beside a join, a function or a subquery in FROM")
    } else if !stmt.sort_clause.is_empty() && !item.is_some_and(|i| super::order::is_total(stmt, i))
    {
        Some("with an ORDER BY other than every column of a unique key")
    } else if let (false, Some(limit)) = (stmt.sort_clause.is_empty(), &spill_limit) {
        // A sort past work_mem writes temporary files, and fails past the
        // limit at a size a padding column tunes.
        return Err(protected_buffered(
            out,
            &format!("with ORDER BY while the session's temp_file_limit is {limit}"),
        ));
    } else if !stmt.group_clause.is_empty() || stmt.having_clause.is_some() {
        Some("with GROUP BY or HAVING")
    } else if !stmt.distinct_clause.is_empty() {
        Some("with DISTINCT")
    } else if !stmt.window_clause.is_empty() {
        Some("with a WINDOW")
    } else {
        // Every node of the select list and WHERE, at any depth. Their
        // debug text names every node of the tree (pg_query's `nodes()`
        // does not descend into subscripts, COLLATE, ARRAY[...] and
        // other kinds of node, where a subquery would go unseen).
        let text: String = stmt
            .target_list
            .iter()
            .chain(stmt.where_clause.as_deref())
            .map(|n| format!("{n:?}"))
            .collect();
        if text.contains("SubLink(") {
            Some("beside a subquery")
        } else if text.contains("over: Some(") {
            Some("beside a window function")
        } else {
            None
        }
    };
    match what {
        Some(how) => Err(protected_buffered(out, how)),
        None => Ok(()),
    }
}

/// The refusal of a protected column output by a select the server would
/// hold rows of.
pub(super) fn protected_buffered(out: &OutputColumn, how: &str) -> Refusal {
    let name = out.protected_name();
    Refusal::new(
        Rule::ProtectedWithBuffering,
        format!(
            "column {name} is protected and may only be output by a select over one table without grouping, DISTINCT, window functions, subqueries or WITH, ordered by nothing or by bare columns that take in a unique key of NOT NULL columns (its primary key, say), not {how}: there the server would sort, hash or hold raw values, and how much memory they take would show in what it returns; order by the primary key, sort the sanitized rows in the client, or select the other columns alone"
        ),
    )
}
