//! Which `ORDER BY` may stand beside a protected output column: one that
//! is a total order of the rows read.
//!
//! A sort holds raw protected values beside its keys, and what fits in
//! memory decides whether it spills to disk; a spilled sort returns tied
//! rows in another order than one in memory, so with ties the order of
//! the output would follow the raw values' lengths. Without ties there is
//! only one order to return. So a select over one table may sort rows
//! with protected output columns when its sort keys are plain column
//! references of that table that take in every column of one of its
//! unique keys ([`crate::analysis::RelationInfo::unique_keys`]: no two
//! rows equal, none null, compared as the sort compares). Each key is a
//! bare column: an expression could pad the rows the sort holds; `USING`
//! or `COLLATE` would compare otherwise than the unique index does.
//!
//! And every output column is a bare column of the table (or `*`): a
//! sort holds each row as one allocation, output columns and keys, and
//! reads every row before it returns the first. An expression beside a
//! raw value (`repeat('x', n)`) would make a row the sort cannot hold
//! (past 1 GiB) fail the statement whether or not that row is ever sent
//! (`LIMIT`, `OFFSET`, a cursor fetched in part, an `Execute` with a row
//! limit): one bit about a raw length, at a threshold the padding tunes.
//! Stored columns alone hold what the table holds.
//!
//! A bare name in `ORDER BY` is first an output column's name: `SELECT
//! note, lower(ward) AS id ... ORDER BY id` sorts by `lower(ward)`. So a
//! key named `n` is taken as the table's column `n` only when no output
//! column other than that column itself may be called `n`: an alias `n`
//! on anything else, or an unaliased expression whose name PostgreSQL
//! could make `n` (it names one after a column, function or type it
//! contains, or after a key word such as `coalesce`) leaves the order
//! unproven, and the statement is refused as before.

use pg_query::protobuf::{ResTarget, SelectStmt, SortBy, SortByDir};
use pg_query::{Node, NodeEnum};

use super::nodes::names;
use super::scope::NsItem;

/// Names PostgreSQL gives an unaliased output column after a key word of
/// its expression (`FigureColname`), not after a name it contains.
const KEYWORD_NAMES: &[&str] = &[
    "array",
    "case",
    "coalesce",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "exists",
    "greatest",
    "grouping",
    "least",
    "localtime",
    "localtimestamp",
    "nullif",
    "row",
    "session_user",
    "user",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
];

/// Whether `stmt`'s `ORDER BY` (over `item`, its only `FROM` item) is a
/// total order of the rows: every key a bare column of the table, with
/// no `USING`, and the keys taking in every column of one of its unique
/// keys. `false` for an item that is not a table (or whose columns an
/// alias renamed).
pub(super) fn is_total(stmt: &SelectStmt, item: &NsItem) -> bool {
    if item.unique_keys.is_empty() || !bare_outputs(stmt, item) {
        return false;
    }
    let mut columns: Vec<&str> = Vec::new();
    for s in &stmt.sort_clause {
        let Some(NodeEnum::SortBy(s)) = &s.node else {
            return false;
        };
        match key_column(s, stmt, item) {
            Some(c) => columns.push(c),
            None => return false,
        }
    }
    item.unique_keys
        .iter()
        .any(|key| key.iter().all(|k| columns.contains(&k.as_str())))
}

/// Whether every output column of `stmt` is a bare column of `item`
/// (`c`, `t.c`, `s.t.c`, aliased or not) or a `*` of it.
fn bare_outputs(stmt: &SelectStmt, item: &NsItem) -> bool {
    stmt.target_list.iter().all(|t| {
        let Some(NodeEnum::ResTarget(t)) = &t.node else {
            return false;
        };
        let Some(NodeEnum::ColumnRef(r)) = t.val.as_ref().and_then(|v| v.node.as_ref()) else {
            return false;
        };
        let Some((last, qualifier)) = r.fields.split_last() else {
            return false;
        };
        let qualified = match names(qualifier).unwrap_or_default().as_slice() {
            [] => true,
            [t] => item.name.as_deref() == Some(*t),
            [s, t] => item.schema.as_deref() == Some(*s) && item.name.as_deref() == Some(*t),
            _ => false,
        };
        qualified
            && matches!(
                &last.node,
                Some(NodeEnum::AStar(_)) | Some(NodeEnum::String(_))
            )
    })
}

/// The table column sort key `s` sorts by, when it is a bare column of
/// `item` compared by its type's default order.
fn key_column<'a>(s: &'a SortBy, stmt: &SelectStmt, item: &NsItem) -> Option<&'a str> {
    if !s.use_op.is_empty() || s.sortby_dir == SortByDir::SortbyUsing as i32 {
        return None;
    }
    let Some(NodeEnum::ColumnRef(r)) = s.node.as_ref().and_then(|n| n.node.as_ref()) else {
        return None;
    };
    let fields = names(&r.fields)?;
    let column = match fields.as_slice() {
        // An output column's name first, then the table's column.
        [n] => {
            let targets = stmt.target_list.iter().filter_map(|t| match &t.node {
                Some(NodeEnum::ResTarget(t)) => Some(t.as_ref()),
                _ => None,
            });
            for t in targets {
                if !binds_only_itself(t, n, item) {
                    return None;
                }
            }
            *n
        }
        [t, n] if item.name.as_deref() == Some(*t) => *n,
        [sch, t, n] if item.schema.as_deref() == Some(*sch) && item.name.as_deref() == Some(*t) => {
            *n
        }
        _ => return None,
    };
    item.cols
        .iter()
        .any(|c| c.certain && c.name == column)
        .then_some(column)
}

/// Whether output column `t` is either not called `n` by any name
/// PostgreSQL could give it, or is the table's column `n` itself.
fn binds_only_itself(t: &ResTarget, n: &str, item: &NsItem) -> bool {
    let Some(val) = t.val.as_deref() else {
        return false;
    };
    let bare = is_bare_column(val, n, item);
    if !t.name.is_empty() {
        return t.name != n || bare;
    }
    if let Some(NodeEnum::ColumnRef(r)) = &val.node {
        // `*`, `t.*` or a column: named after the columns themselves.
        return r.fields.last().is_some_and(|f| match &f.node {
            Some(NodeEnum::AStar(_)) => true,
            Some(NodeEnum::String(s)) => s.sval != n || bare,
            _ => false,
        });
    }
    // An expression: named after a key word, or after a name somewhere
    // in it. Every name of the tree is a `String` node; the tree's debug
    // text holds each as `sval: "name"` (pg_query's own `nodes()` does
    // not descend into every kind of node, so it cannot be used here).
    let named = KEYWORD_NAMES.contains(&n) || format!("{val:?}").contains(&format!("sval: {n:?}"));
    !named
}

/// Whether `val` is a reference to `item`'s column `n` (`n`, `t.n`,
/// `s.t.n`).
fn is_bare_column(val: &Node, n: &str, item: &NsItem) -> bool {
    let Some(NodeEnum::ColumnRef(r)) = &val.node else {
        return false;
    };
    match names(&r.fields).unwrap_or_default().as_slice() {
        [c] => *c == n,
        [t, c] => *c == n && item.name.as_deref() == Some(*t),
        [s, t, c] => {
            *c == n && item.name.as_deref() == Some(*t) && item.schema.as_deref() == Some(*s)
        }
        _ => false,
    }
}
