//! Indexes, as proxy mode must see them.
//!
//! An index scan returns rows in the order of the index's keys, and the
//! planner chooses one for any read it fits, `ORDER BY` or not: with an
//! index on `(ward, name)`, `SELECT id FROM t WHERE ward = 'w1' ORDER BY
//! ward LIMIT 1` returns the row whose raw `name` sorts first, and repeated
//! with `id NOT IN (...)` the whole raw ranking. A partial index holds only
//! the rows its predicate passes. So a table with an index whose key
//! columns, key expressions or predicate read a protected column, and
//! every ancestor of it (a read of a parent scans its partitions' and
//! children's indexes), is marked and the analyzer refuses to read it
//! ([`ordering`]). Columns an index only carries (`INCLUDE`) neither order
//! nor choose rows.
//!
//! The columns an index reads are its key columns (`indkey`, the first
//! `indnkeyatts`), and, when it has expressions or a predicate, every
//! column PostgreSQL records it depends on (`pg_depend`) and every column
//! the stored expressions name (`indexprs`, `indpred`: a whole-row
//! reference records no column dependency). An expression that calls a
//! function outside `pg_catalog` (which may read any column of the row it
//! is given, or any table), or holds what the node-tree reader does not
//! follow, is taken to read every column.

use std::collections::{BTreeSet, HashMap};

use crate::analysis::{Policy, ProtectedIndex, QualName, Volatility};

use super::hierarchy::{Columns, Hierarchy};
use super::row_security;

/// An index (`pg_index`).
#[derive(Debug, Clone)]
pub(super) struct Index {
    /// The index's name.
    pub name: QualName,
    /// The table it is on (`indrelid`).
    pub relation: u32,
    /// Its key columns (the first `indnkeyatts` of `indkey`; 0 stands for
    /// an expression).
    pub key: Vec<i16>,
    /// Its key expressions' node tree (`indexprs`), if any.
    pub expressions: Option<String>,
    /// Its predicate's node tree (`indpred`), if any.
    pub predicate: Option<String>,
    /// The table's columns it depends on (`pg_depend`): its key and
    /// `INCLUDE` columns and the columns its expressions and predicate
    /// name.
    pub depends: BTreeSet<i16>,
    /// Whether its key is a total order of the rows of its table (see
    /// `INDEXES_SQL`): unique, plain columns, none null, compared as
    /// `ORDER BY` compares them.
    pub total: bool,
}

/// The columns of its table that `index` orders or chooses rows by;
/// `None` for every column.
fn columns(index: &Index, functions: &HashMap<u32, (QualName, Volatility)>) -> Columns {
    let mut cols: BTreeSet<i16> = index.key.iter().copied().filter(|&a| a != 0).collect();
    let trees: Vec<&String> = [&index.expressions, &index.predicate]
        .into_iter()
        .flatten()
        .collect();
    if trees.is_empty() {
        return Some(cols);
    }
    // With expressions or a predicate, the INCLUDE columns are among the
    // dependencies too: taken as read.
    cols.extend(&index.depends);
    for tree in trees {
        let q = row_security::read(tree);
        if q.opaque.is_some() || row_security::foreign_function(&q, functions).is_some() {
            return None;
        }
        // A whole-row reference (0) stands for every column.
        cols.extend(q.columns);
    }
    Some(cols)
}

/// The relations that must not be read for an index in `indexes` that
/// orders or chooses rows by a column `policy` protects (their own rule
/// or an ancestor's): the index's table and every ancestor of it. Call
/// after `Hierarchy::protect_ancestors`. `functions` names every
/// function by OID.
pub(super) fn ordering(
    indexes: &[Index],
    hierarchy: &Hierarchy,
    policy: &Policy,
    functions: &HashMap<u32, (QualName, Volatility)>,
) -> HashMap<u32, ProtectedIndex> {
    let mut sorted: Vec<&Index> = indexes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out: HashMap<u32, ProtectedIndex> = HashMap::new();
    for index in sorted {
        let Some(table) = hierarchy.name(index.relation) else {
            continue;
        };
        let cols = columns(index, functions);
        let Some(column) = hierarchy.protected_column(policy, index.relation, &cols) else {
            continue;
        };
        tracing::debug!(index = %index.name, %table, %column, "index reads a protected column");
        let found = ProtectedIndex {
            index: index.name.clone(),
            table: table.clone(),
            column,
        };
        for oid in std::iter::once(index.relation).chain(hierarchy.ancestors(index.relation)) {
            out.entry(oid).or_insert_with(|| found.clone());
        }
    }
    out
}

/// The unique keys (`RelationInfo::unique_keys`) of each relation: the
/// key columns, by name, of its indexes that make a total order, when a
/// read of the relation returns only rows those indexes hold: it has no
/// partitions or children, or it is partitioned (`partitioned`), whose
/// unique indexes PostgreSQL enforces across its partitions. A read of
/// an inheritance parent also returns its children's rows, which its own
/// indexes do not hold.
pub(super) fn unique_keys(
    indexes: &[Index],
    hierarchy: &Hierarchy,
    partitioned: &BTreeSet<u32>,
) -> HashMap<u32, Vec<Vec<String>>> {
    let mut out: HashMap<u32, Vec<Vec<String>>> = HashMap::new();
    for index in indexes.iter().filter(|i| i.total && !i.key.is_empty()) {
        let table = index.relation;
        if !partitioned.contains(&table) && !hierarchy.descendants(table).is_empty() {
            continue;
        }
        let names: Option<Vec<String>> = index
            .key
            .iter()
            .map(|&a| hierarchy.column_name(table, a).map(str::to_owned))
            .collect();
        if let Some(names) = names {
            out.entry(table).or_default().push(names);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `t(id, ward, name)` with `name` protected, and a child `c` of it.
    fn fixture() -> (Hierarchy, Policy) {
        let cols = super::super::hierarchy::numbered;
        let mut h = Hierarchy::new();
        h.relation(
            1,
            QualName::new("public", "t"),
            cols(&["id", "ward", "name"]),
        );
        h.relation(
            2,
            QualName::new("public", "c"),
            cols(&["id", "ward", "name"]),
        );
        h.relation(
            3,
            QualName::new("public", "o"),
            cols(&["id", "ward", "name"]),
        );
        h.inherits(2, 1);
        let mut p = Policy::default();
        p.protect("public", "t", "name", "santext");
        (h, p)
    }

    fn index(relation: u32, key: &[i16]) -> Index {
        Index {
            name: QualName::new("public", "ix"),
            relation,
            key: key.to_vec(),
            expressions: None,
            predicate: None,
            depends: key.iter().copied().filter(|&a| a != 0).collect(),
            total: false,
        }
    }

    fn functions() -> HashMap<u32, (QualName, Volatility)> {
        HashMap::from([
            (
                870,
                (QualName::new("pg_catalog", "lower"), Volatility::Immutable),
            ),
            (9000, (QualName::new("public", "f"), Volatility::Immutable)),
        ])
    }

    fn marked(indexes: &[Index]) -> BTreeSet<u32> {
        let (h, p) = fixture();
        ordering(indexes, &h, &p, &functions())
            .keys()
            .copied()
            .collect()
    }

    /// `lower(name)` (column 3), and `f(t)`: a function of the owner's
    /// given the whole row.
    const LOWER_NAME: &str = "({FUNCEXPR :funcid 870 :funcresulttype 25 :args ({VAR :varno 1 \
        :varattno 3 :vartype 25 :varlevelsup 0})})";
    const F_ROW: &str = "({FUNCEXPR :funcid 9000 :funcresulttype 25 :args ({VAR :varno 1 \
        :varattno 0 :vartype 16385 :varlevelsup 0})})";
    const NAME_NOT_NULL: &str = "{NULLTEST :arg {VAR :varno 1 :varattno 3 :vartype 25 \
        :varlevelsup 0} :nulltesttype 1}";
    const LOWER_WARD: &str = "({FUNCEXPR :funcid 870 :funcresulttype 25 :args ({VAR :varno 1 \
        :varattno 2 :vartype 25 :varlevelsup 0})})";

    #[test]
    fn a_key_on_a_protected_column_marks_the_table_and_its_ancestors() {
        // (ward, name) on t; (name) on the child c: t too.
        assert_eq!(marked(&[index(1, &[2, 3])]), BTreeSet::from([1]));
        assert_eq!(marked(&[index(2, &[3])]), BTreeSet::from([1, 2]));
        let (h, p) = fixture();
        let out = ordering(&[index(2, &[3])], &h, &p, &functions());
        assert_eq!(out[&1].table, QualName::new("public", "c"));
        assert_eq!(out[&1].column, "name");
        // Unprotected keys, another table, INCLUDE (name): nothing.
        assert!(marked(&[index(1, &[1, 2])]).is_empty());
        assert!(marked(&[index(3, &[3])]).is_empty());
        let include = Index {
            depends: BTreeSet::from([1, 3]),
            ..index(1, &[1])
        };
        assert!(marked(&[include]).is_empty());
    }

    #[test]
    fn expressions_and_predicates_are_followed() {
        let expr = |tree: &str, depends: &[i16]| Index {
            expressions: Some(tree.into()),
            depends: depends.iter().copied().collect(),
            ..index(1, &[0])
        };
        assert_eq!(marked(&[expr(LOWER_NAME, &[3])]), BTreeSet::from([1]));
        assert!(marked(&[expr(LOWER_WARD, &[2])]).is_empty());
        // A whole row given to the owner's function: no column recorded.
        assert_eq!(marked(&[expr(F_ROW, &[])]), BTreeSet::from([1]));
        // The column found by its dependency alone.
        assert_eq!(marked(&[expr(LOWER_WARD, &[2, 3])]), BTreeSet::from([1]));
        // What the reader does not follow reads every column.
        assert_eq!(
            marked(&[expr("({SUBLINK :subLinkType 0})", &[])]),
            BTreeSet::from([1])
        );
        // A predicate on the protected column, the key on another.
        let partial = Index {
            predicate: Some(NAME_NOT_NULL.into()),
            depends: BTreeSet::from([1]),
            ..index(1, &[1])
        };
        assert_eq!(marked(&[partial]), BTreeSet::from([1]));
    }

    #[test]
    fn unique_keys_are_those_of_tables_whose_reads_they_cover() {
        let (h, _) = fixture();
        let total = |relation, key: &[i16]| Index {
            total: true,
            ..index(relation, key)
        };
        let keys = unique_keys(
            &[
                total(3, &[2, 1]),
                index(3, &[3]),
                total(2, &[1]),
                total(1, &[1]),
            ],
            &h,
            &BTreeSet::new(),
        );
        // o: (ward, id), not the index that is not total; the child c:
        // (id); its parent t is read with c's rows: none.
        assert_eq!(keys[&3], vec![vec!["ward".to_owned(), "id".to_owned()]]);
        assert_eq!(keys[&2], vec![vec!["id".to_owned()]]);
        assert!(!keys.contains_key(&1));
        // Partitioned, t's unique indexes hold across its partitions.
        let keys = unique_keys(&[total(1, &[1])], &h, &BTreeSet::from([1]));
        assert_eq!(keys[&1], vec![vec!["id".to_owned()]]);
    }
}
