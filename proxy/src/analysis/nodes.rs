//! What the analysis's walkers share, in a leaf module so that none of
//! them imports another back: the clause an expression is in, what a
//! select's outputs may do, the refusals every walker builds, and small
//! readers of parse nodes.

use std::collections::BTreeMap;

use pg_query::{Node, NodeEnum};

use super::{OutputColumn, Refusal, Rule};

/// What a select's protected output columns may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outputs {
    /// Be output bare: the statement's top-level select, if the server
    /// holds no row of it (see `query::unbuffered`).
    Top,
    /// Carry their protection to the query that reads them (derived
    /// tables, CTEs, `EXISTS`); such a protected output refuses the
    /// statement once the rest of it is analysed (see `Walker::nested`).
    Bare,
    /// Nothing: the output is consumed; a protected one is refused by
    /// this rule.
    Refuse(Rule),
}

/// Where an expression appears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Clause {
    /// An expression of the select list.
    Target,
    /// `WHERE`.
    Where,
    /// `HAVING`.
    Having,
    /// `JOIN ... ON`.
    Join,
    /// `GROUP BY`.
    GroupBy,
    /// `ORDER BY`.
    OrderBy,
    /// `DISTINCT ON`.
    Distinct,
    /// A window definition.
    Window,
    /// `LIMIT`/`OFFSET`.
    Limit,
    /// `VALUES`, arguments of functions in `FROM`, `EXECUTE` parameters.
    Values,
}

/// An expression's context: its clause, and whether it is inside an
/// aggregate or a window function call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cx {
    pub clause: Clause,
    pub aggregate: bool,
    pub window: bool,
}

impl Clause {
    /// The context of an expression directly in this clause.
    pub fn cx(self) -> Cx {
        Cx {
            clause: self,
            aggregate: false,
            window: false,
        }
    }

    /// The rule that refuses a protected column here.
    pub fn rule(self) -> Rule {
        match self {
            Clause::Target => Rule::ProtectedInExpression,
            Clause::Where => Rule::ProtectedInWhere,
            Clause::Having => Rule::ProtectedInHaving,
            Clause::Join => Rule::ProtectedInJoin,
            Clause::GroupBy => Rule::ProtectedInGroupBy,
            Clause::OrderBy => Rule::ProtectedInOrderBy,
            Clause::Distinct => Rule::ProtectedInDistinct,
            Clause::Window => Rule::ProtectedInWindow,
            Clause::Limit => Rule::ProtectedInLimit,
            Clause::Values => Rule::ProtectedInValues,
        }
    }

    pub fn how(self) -> &'static str {
        match self {
            Clause::Target => "in an expression",
            Clause::Where => "in WHERE",
            Clause::Having => "in HAVING",
            Clause::Join => "in a join condition",
            Clause::GroupBy => "in GROUP BY",
            Clause::OrderBy => "in ORDER BY",
            Clause::Distinct => "in DISTINCT ON",
            Clause::Window => "in a window",
            Clause::Limit => "in LIMIT or OFFSET",
            Clause::Values => "in VALUES or a function in FROM",
        }
    }
}

/// One field of a column reference.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field<'a> {
    /// A name.
    Name(&'a str),
    /// `*`.
    Star,
}

/// Where a value comes from, for the catalog functions
/// (`Policy::catalog_functions`), which may only be given values of the
/// catalog: a value derived from a table's rows, even from unprotected
/// columns, is never an argument of theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// Only constants, parameters, session values (`current_user`) and
    /// columns of allow-listed catalog relations, through any allowed
    /// function, operator, cast, join or derived table.
    Catalog,
    /// Something else: a column of a table, a sanitized relation or a
    /// subquery, a whole row, a system column, and the result of any
    /// aggregate or window function (`count(*)`, `row_number()`), which
    /// is computed over the rows a query reads, whatever its arguments.
    Data,
}

impl Origin {
    /// The origin of a value computed from both.
    pub fn and(self, other: Origin) -> Origin {
        if self == Origin::Catalog && other == Origin::Catalog {
            Origin::Catalog
        } else {
            Origin::Data
        }
    }
}

/// Relation schemas the analysis resolved, by the position of the
/// relation's name in the statement text.
pub(super) type Relations = BTreeMap<i32, String>;

/// A refusal for a construct outside the analyzed subset.
pub(super) fn construct(what: &str) -> Refusal {
    Refusal::new(Rule::ConstructNotAllowed, format!("{what} is not allowed"))
}

/// A refusal for a whole-row reference to protected columns.
pub(super) fn whole_row() -> Refusal {
    Refusal::new(
        Rule::WholeRowReference,
        "a whole-row reference includes protected columns (or columns of types other roles own); \
         select the columns instead",
    )
}

/// A refusal of a whole-row value of type `type_name`, which a role that
/// is not a superuser owns or may make run its code, used in an
/// expression.
pub(super) fn opaque_row(type_name: &str) -> Refusal {
    opaque("a whole-row reference", type_name, "in an expression")
}

fn opaque(what: &str, type_name: &str, how: &str) -> Refusal {
    Refusal::new(
        Rule::TypeNotAllowed,
        format!(
            "{what} has type {type_name}, which a role that is not a superuser owns, or may \
             make run its code (a cast, a domain CHECK, a type it is built on); it may only \
             be selected as a plain output column, not used {how}"
        ),
    )
}

/// A refusal by `rule` for protected column `out` used `how` (an opaque
/// one is refused as [`Rule::TypeNotAllowed`]).
pub(super) fn protected(rule: Rule, out: &OutputColumn, how: &str) -> Refusal {
    if let OutputColumn::Opaque { column, type_name } = out {
        return opaque(&format!("column {column}"), type_name, how);
    }
    let name = out.protected_name();
    Refusal::new(
        rule,
        format!(
            "column {name} is protected and may only be selected as a plain output column, not used {how}: {}",
            instead(rule)
        ),
    )
}

/// What a user whose tool filtered, sorted, grouped or computed on a
/// protected column (a BI tool's filter, say) can do instead.
fn instead(rule: Rule) -> &'static str {
    match rule {
        Rule::ProtectedInWhere
        | Rule::ProtectedInHaving
        | Rule::ProtectedInJoin
        | Rule::ProtectedInGroupBy
        | Rule::ProtectedInOrderBy
        | Rule::ProtectedInDistinct => {
            "the server would compare raw text. Filter, sort or group on an unprotected column, or read a sanitized copy (dptext.create_sanitized_view, listed as [[sanitized]]) and filter that, or use database mode, where the database masks before it filters"
        }
        _ => {
            "the server would compute on raw text. Select the column as it is and compute on what comes back, or read a sanitized copy (dptext.create_sanitized_view, listed as [[sanitized]])"
        }
    }
}

/// The fields of a column reference.
pub(super) fn fields(nodes: &[Node]) -> Result<Vec<Field<'_>>, Refusal> {
    nodes
        .iter()
        .map(|n| match &n.node {
            Some(NodeEnum::String(s)) => Ok(Field::Name(s.sval.as_str())),
            Some(NodeEnum::AStar(_)) => Ok(Field::Star),
            _ => Err(construct("a column reference of this shape")),
        })
        .collect()
}

/// The strings of a name list (`schema.name`), or `None` if some element
/// is not a string.
pub(super) fn names(nodes: &[Node]) -> Option<Vec<&str>> {
    nodes
        .iter()
        .map(|n| match &n.node {
            Some(NodeEnum::String(s)) => Some(s.sval.as_str()),
            _ => None,
        })
        .collect()
}

/// A node type's name for messages (never its contents).
pub(super) fn node_name(n: &NodeEnum) -> String {
    let debug = format!("{n:?}");
    debug
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .next()
        .unwrap_or("unknown")
        .to_owned()
}
