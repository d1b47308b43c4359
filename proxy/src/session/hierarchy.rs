//! Partitions and inheritance children, as proxy mode must see them.
//!
//! A read of a table includes the rows of its partitions and children, so
//! a column protected on one of them is protected on its ancestors too
//! ([`Hierarchy::protect_ancestors`]). And when a protected column decides
//! which member of a hierarchy a row is stored in (a partition key that
//! reads it, at any level, or a CHECK constraint on it that not every
//! member has), the member a row is in tells what its value is: every
//! member of that hierarchy is marked split ([`Hierarchy::splits`]) and
//! the analyzer refuses to read it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::analysis::{Policy, QualName, Split, SplitBy};

/// The columns a partition key or CHECK constraint reads, by number; `None`
/// when the catalog cannot tell (taken as every column).
pub(super) type Columns = Option<BTreeSet<i16>>;

/// A CHECK constraint of a table (`pg_constraint`, `contype = 'c'`).
#[derive(Debug, Clone)]
pub(super) struct Check {
    /// The table (`conrelid`).
    pub relation: u32,
    /// The columns it reads (`conkey`; 0 stands for a whole-row reference).
    pub columns: Columns,
    /// A copy of an ancestor's constraint (`coninhcount > 0`): every
    /// member below that ancestor has it, so it splits nothing itself.
    pub inherited: bool,
    /// `NO INHERIT`: the table's children do not have it.
    pub no_inherit: bool,
}

/// Columns numbered from 1 in the order given, as test fixtures add them.
#[cfg(test)]
pub(super) fn numbered(names: &[&str]) -> Vec<(i16, String)> {
    (1i16..)
        .zip(names)
        .map(|(i, n)| (i, (*n).to_owned()))
        .collect()
}

/// The tables of the catalog with their columns, and who inherits from
/// (or is a partition of) whom.
#[derive(Debug, Default)]
pub(super) struct Hierarchy {
    names: BTreeMap<u32, QualName>,
    by_name: HashMap<QualName, u32>,
    columns: HashMap<u32, Vec<(i16, String)>>,
    parents: HashMap<u32, Vec<u32>>,
    children: HashMap<u32, Vec<u32>>,
}

impl Hierarchy {
    /// An empty hierarchy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a relation and its columns (number, name).
    pub fn relation(&mut self, oid: u32, name: QualName, columns: Vec<(i16, String)>) {
        self.by_name.insert(name.clone(), oid);
        self.names.insert(oid, name);
        self.columns.insert(oid, columns);
    }

    /// Adds `child` as a partition or inheritance child of `parent`
    /// (`pg_inherits`).
    pub fn inherits(&mut self, child: u32, parent: u32) {
        self.parents.entry(child).or_default().push(parent);
        self.children.entry(parent).or_default().push(child);
    }

    fn closure(edges: &HashMap<u32, Vec<u32>>, oid: u32) -> BTreeSet<u32> {
        let mut seen = BTreeSet::new();
        let mut todo = edges.get(&oid).cloned().unwrap_or_default();
        while let Some(p) = todo.pop() {
            if seen.insert(p) {
                todo.extend(edges.get(&p).into_iter().flatten());
            }
        }
        seen
    }

    /// The relations `oid` inherits from or is a partition of,
    /// transitively.
    pub fn ancestors(&self, oid: u32) -> BTreeSet<u32> {
        Self::closure(&self.parents, oid)
    }

    /// The partitions and children of `oid`, transitively.
    pub fn descendants(&self, oid: u32) -> BTreeSet<u32> {
        Self::closure(&self.children, oid)
    }

    /// The name of a relation that was added.
    pub fn name(&self, oid: u32) -> Option<&QualName> {
        self.names.get(&oid)
    }

    /// The OID of a relation that was added, by its name.
    pub fn oid(&self, name: &QualName) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The name of column `attnum` of a relation that was added.
    pub fn column_name(&self, oid: u32, attnum: i16) -> Option<&str> {
        self.columns
            .get(&oid)?
            .iter()
            .find(|(n, _)| *n == attnum)
            .map(|(_, c)| c.as_str())
    }

    fn has_column(&self, oid: u32, column: &str) -> bool {
        self.columns
            .get(&oid)
            .is_some_and(|cols| cols.iter().any(|(_, c)| c == column))
    }

    /// The rule `policy` protects `column` of `oid` with: its own, else
    /// an ancestor's (as the analyzer reads it).
    fn rule(&self, policy: &Policy, oid: u32, column: &str) -> Option<String> {
        std::iter::once(oid)
            .chain(self.ancestors(oid))
            .filter_map(|o| self.names.get(&o))
            .find_map(|n| policy.protected.get(n).and_then(|c| c.get(column)).cloned())
    }

    /// Protects, on every ancestor of a table with a protected column and
    /// of each of its descendants (which inherit the rule), the column of
    /// that name, unless the ancestor protects it already (by a rule of its
    /// own or of its ancestors): a read of the ancestor returns their rows.
    /// With multiple inheritance a child's rows are read through each of
    /// its parents, so a rule one parent gives it reaches the others; that
    /// is repeated until nothing changes (a newly protected parent's other
    /// children have parents of their own). Tables in name order, so that
    /// the rule of the first one is kept where two disagree.
    pub fn protect_ancestors(&self, policy: &mut Policy) {
        loop {
            let mut entries: Vec<(QualName, String, String)> = policy
                .protected
                .iter()
                .flat_map(|(t, cols)| cols.iter().map(|(c, r)| (t.clone(), c.clone(), r.clone())))
                .collect();
            entries.sort();
            let mut changed = false;
            for (table, column, rule) in entries {
                let Some(&oid) = self.by_name.get(&table) else {
                    continue;
                };
                let members: BTreeSet<u32> = std::iter::once(oid)
                    .chain(self.descendants(oid))
                    .flat_map(|m| self.ancestors(m))
                    .collect();
                for a in members {
                    if !self.has_column(a, &column) || self.rule(policy, a, &column).is_some() {
                        continue;
                    }
                    if let Some(name) = self.names.get(&a) {
                        tracing::debug!(%name, %column, from = %table, "protected on an ancestor");
                        policy.protect(&name.schema, &name.name, &column, &rule);
                        changed = true;
                    }
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// The first column of `columns` (of relation `oid`) that `policy`
    /// protects; `None` columns stand for all of them.
    pub fn protected_column(&self, policy: &Policy, oid: u32, columns: &Columns) -> Option<String> {
        let all = self.columns.get(&oid)?;
        all.iter()
            .filter(|(n, _)| match columns {
                Some(set) => set.contains(n) || set.contains(&0),
                None => true,
            })
            .find(|(_, c)| self.rule(policy, oid, c).is_some())
            .map(|(_, c)| c.clone())
    }

    /// The relations that must not be read: every member (ancestors,
    /// the relation itself, descendants) of a hierarchy that a partition
    /// key in `keys` or a CHECK constraint in `checks` splits by a column
    /// `policy` protects. Call after [`Hierarchy::protect_ancestors`].
    pub fn splits(
        &self,
        policy: &Policy,
        keys: &BTreeMap<u32, Columns>,
        checks: &[Check],
    ) -> HashMap<u32, Split> {
        let mut sources: Vec<(u32, String, SplitBy)> = Vec::new();
        for (&oid, columns) in keys {
            if let Some(c) = self.protected_column(policy, oid, columns) {
                sources.push((oid, c, SplitBy::PartitionKey));
            }
        }
        for check in checks {
            let r = check.relation;
            // A constraint every member below its table has says nothing
            // of which member a row is in.
            let splits = !check.inherited
                && (self.parents.contains_key(&r)
                    || (check.no_inherit && self.children.contains_key(&r)));
            if !splits {
                continue;
            }
            if let Some(c) = self.protected_column(policy, r, &check.columns) {
                sources.push((r, c, SplitBy::Check));
            }
        }
        sources.sort_by_key(|(oid, _, _)| *oid);
        let mut split: HashMap<u32, Split> = HashMap::new();
        for (oid, column, by) in sources {
            let Some(relation) = self.names.get(&oid) else {
                continue;
            };
            let s = Split {
                relation: relation.clone(),
                column,
                by,
            };
            let members = std::iter::once(oid)
                .chain(self.ancestors(oid))
                .chain(self.descendants(oid));
            for m in members {
                split.entry(m).or_insert_with(|| s.clone());
            }
        }
        split
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::numbered as cols;

    /// `parts(id, region)` partitioned, `parts_a` a partition of it that
    /// is partitioned itself (`parts_a_n`, `parts_a_s`), `parts_b` a
    /// partition; `ih(id, region)` with children `ic` and `id2`; `other`.
    fn fixture() -> Hierarchy {
        let mut h = Hierarchy::new();
        for (oid, name) in [
            (1, "parts"),
            (2, "parts_a"),
            (3, "parts_a_n"),
            (4, "parts_a_s"),
            (5, "parts_b"),
            (10, "ih"),
            (11, "ic"),
            (12, "id2"),
            (20, "other"),
        ] {
            h.relation(oid, QualName::new("public", name), cols(&["id", "region"]));
        }
        for (child, parent) in [(2, 1), (3, 2), (4, 2), (5, 1), (11, 10), (12, 10)] {
            h.inherits(child, parent);
        }
        h
    }

    fn policy(table: &str) -> Policy {
        let mut p = Policy::default();
        p.protect("public", table, "region", "santext");
        p
    }

    fn key(oid: u32, columns: &[i16]) -> BTreeMap<u32, Columns> {
        BTreeMap::from([(oid, Some(columns.iter().copied().collect()))])
    }

    fn check(relation: u32, columns: &[i16]) -> Check {
        Check {
            relation,
            columns: Some(columns.iter().copied().collect()),
            inherited: false,
            no_inherit: false,
        }
    }

    fn split_oids(s: &HashMap<u32, Split>) -> BTreeSet<u32> {
        s.keys().copied().collect()
    }

    #[test]
    fn a_sub_partition_key_on_a_protected_column_splits_its_whole_line() {
        let h = fixture();
        let p = policy("parts");
        // parts_a is partitioned by region (attnum 2): it, its partitions
        // and its ancestor; not its sibling parts_b.
        let s = h.splits(&p, &key(2, &[2]), &[]);
        assert_eq!(split_oids(&s), BTreeSet::from([1, 2, 3, 4]));
        assert_eq!(s[&1].relation, QualName::new("public", "parts_a"));
        assert_eq!(s[&1].column, "region");
        assert_eq!(s[&1].by, SplitBy::PartitionKey);
        // A key of unprotected columns splits nothing; an expression key
        // whose columns the catalog could not tell splits.
        assert!(h.splits(&p, &key(1, &[1]), &[]).is_empty());
        let unknown = BTreeMap::from([(1, None)]);
        assert_eq!(
            split_oids(&h.splits(&p, &unknown, &[])),
            BTreeSet::from([1, 2, 3, 4, 5])
        );
        // Without protection nothing is split.
        assert!(h.splits(&Policy::default(), &key(2, &[2]), &[]).is_empty());
    }

    #[test]
    fn a_check_that_only_some_members_have_splits() {
        let h = fixture();
        let p = policy("ih");
        let s = h.splits(&p, &BTreeMap::new(), &[check(11, &[2])]);
        assert_eq!(split_oids(&s), BTreeSet::from([10, 11]));
        assert_eq!(s[&10].by, SplitBy::Check);
        // A whole-row reference reads every column.
        assert!(!h
            .splits(&p, &BTreeMap::new(), &[check(11, &[0])])
            .is_empty());
        // On an unprotected column, on the root (every child has it), or
        // a child's inherited copy: nothing.
        assert!(h
            .splits(&p, &BTreeMap::new(), &[check(11, &[1])])
            .is_empty());
        assert!(h
            .splits(&p, &BTreeMap::new(), &[check(10, &[2])])
            .is_empty());
        let copy = Check {
            inherited: true,
            ..check(11, &[2])
        };
        assert!(h.splits(&p, &BTreeMap::new(), &[copy]).is_empty());
        // NO INHERIT on the root: the children do not have it.
        let no_inherit = Check {
            no_inherit: true,
            ..check(10, &[2])
        };
        assert_eq!(
            split_oids(&h.splits(&p, &BTreeMap::new(), &[no_inherit])),
            BTreeSet::from([10, 11, 12])
        );
        // A table outside any hierarchy is not split by its constraints.
        assert!(h
            .splits(&policy("other"), &BTreeMap::new(), &[check(20, &[2])])
            .is_empty());
    }

    #[test]
    fn a_column_protected_on_a_partition_is_protected_on_its_ancestors() {
        let h = fixture();
        let mut p = policy("parts_a_n");
        p.protect("public", "parts_a_n", "missing", "santext");
        h.protect_ancestors(&mut p);
        // parts_a through parts, and parts_b, a sibling, too.
        for oid in [1, 2, 5] {
            assert_eq!(h.rule(&p, oid, "region").as_deref(), Some("santext"));
        }
        // Not a column the ancestors do not have.
        assert_eq!(h.rule(&p, 1, "missing"), None);
        assert_eq!(p.protected.len(), 2);
        // An ancestor's own rule is kept.
        let mut p = policy("parts_a_n");
        p.protect("public", "parts", "region", "deidentify");
        h.protect_ancestors(&mut p);
        assert_eq!(
            p.protected[&QualName::new("public", "parts")]["region"],
            "deidentify"
        );
        assert!(!p
            .protected
            .contains_key(&QualName::new("public", "parts_a")));
        // And it makes the line split by a key on it.
        let p = {
            let mut p = policy("parts_a_n");
            h.protect_ancestors(&mut p);
            p
        };
        assert_eq!(
            split_oids(&h.splits(&p, &key(2, &[2]), &[])),
            BTreeSet::from([1, 2, 3, 4])
        );
    }

    #[test]
    fn multiple_inheritance_protects_every_parent_of_a_child_that_inherits_a_rule() {
        // mi_c inherits from mi_p1 and mi_p2; mi_c2 from mi_p2 and mi_p3.
        let mut h = Hierarchy::new();
        for (oid, name) in [
            (30, "mi_p1"),
            (31, "mi_p2"),
            (32, "mi_c"),
            (33, "mi_p3"),
            (34, "mi_c2"),
        ] {
            h.relation(oid, QualName::new("public", name), cols(&["id", "region"]));
        }
        for (child, parent) in [(32, 30), (32, 31), (34, 31), (34, 33)] {
            h.inherits(child, parent);
        }
        let mut p = policy("mi_p1");
        h.protect_ancestors(&mut p);
        // mi_p2 returns mi_c's rows; mi_p3 returns mi_c2's, which mi_p2's
        // rule now protects.
        for oid in [30, 31, 32, 33, 34] {
            assert_eq!(
                h.rule(&p, oid, "region").as_deref(),
                Some("santext"),
                "{oid}"
            );
        }
    }
}
