//! Generated columns, as proxy mode must see them.
//!
//! A stored generated column holds a function of other columns of its
//! row, computed when the row was written: `octet_length(note)`, `note
//! LIKE '%cancer%'`, `to_tsvector(note)`. Read beside the sanitized
//! `note`, it would give away what sanitizing hides. So a generated
//! column whose expression reads a protected column (its own table's,
//! through the table's or an ancestor's rule), or calls a function
//! outside `pg_catalog` (which may read any column it is given, or any
//! table), or holds what the node-tree reader does not follow, may not be
//! read at all ([`derived`]); nor the column of that name of each of its
//! table's ancestors, whose reads return the table's rows.
//!
//! The columns an expression reads are those PostgreSQL records it
//! depends on (`pg_depend`) and those its stored tree (`pg_attrdef.adbin`)
//! names. A generated column cannot read a whole row or another
//! generated column.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::analysis::{Policy, QualName, Volatility};

use super::hierarchy::Hierarchy;
use super::row_security;

/// A generated column (`pg_attribute.attgenerated`, `pg_attrdef`).
#[derive(Debug, Clone)]
pub(super) struct Generated {
    /// Its table (`attrelid`).
    pub relation: u32,
    /// Its name.
    pub column: String,
    /// Its expression's node tree (`adbin::text`).
    pub expression: String,
    /// The table's columns it depends on (`pg_depend`).
    pub depends: BTreeSet<i16>,
}

/// The generated columns that may not be read, by relation: column name
/// to what it reads (for the refusal's message). Call after
/// `Hierarchy::protect_ancestors`. `functions` names every function by
/// OID.
pub(super) fn derived(
    generated: &[Generated],
    hierarchy: &Hierarchy,
    policy: &Policy,
    functions: &HashMap<u32, (QualName, Volatility)>,
) -> HashMap<u32, BTreeMap<String, String>> {
    let mut out: HashMap<u32, BTreeMap<String, String>> = HashMap::new();
    for g in generated {
        let q = row_security::read(&g.expression);
        let foreign = row_security::foreign_function(&q, functions);
        let why = if q.opaque.is_some() {
            Some("an expression the proxy cannot follow".to_owned())
        } else if let Some(f) = foreign {
            Some(f)
        } else {
            let mut cols = g.depends.clone();
            cols.extend(q.columns);
            hierarchy
                .protected_column(policy, g.relation, &Some(cols))
                .map(|c| format!("protected column {c}"))
        };
        let Some(why) = why else { continue };
        tracing::debug!(relation = g.relation, column = %g.column, %why, "derived column");
        for oid in std::iter::once(g.relation).chain(hierarchy.ancestors(g.relation)) {
            out.entry(oid)
                .or_default()
                .entry(g.column.clone())
                .or_insert_with(|| why.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `t(id, note, len)` with `note` protected, and its child `c`.
    fn fixture() -> (Hierarchy, Policy) {
        let cols = super::super::hierarchy::numbered;
        let mut h = Hierarchy::new();
        h.relation(
            1,
            QualName::new("public", "t"),
            cols(&["id", "note", "len"]),
        );
        h.relation(
            2,
            QualName::new("public", "c"),
            cols(&["id", "note", "len"]),
        );
        h.inherits(2, 1);
        let mut p = Policy::default();
        p.protect("public", "t", "note", "santext");
        (h, p)
    }

    fn functions() -> HashMap<u32, (QualName, Volatility)> {
        HashMap::from([
            (
                1317,
                (QualName::new("pg_catalog", "length"), Volatility::Immutable),
            ),
            (9000, (QualName::new("public", "f"), Volatility::Immutable)),
        ])
    }

    fn column(relation: u32, expression: &str, depends: &[i16]) -> Generated {
        Generated {
            relation,
            column: "len".into(),
            expression: expression.into(),
            depends: depends.iter().copied().collect(),
        }
    }

    const LENGTH_NOTE: &str = "{FUNCEXPR :funcid 1317 :funcresulttype 23 :args ({VAR :varno 1 \
        :varattno 2 :vartype 25 :varlevelsup 0})}";
    const LENGTH_ID: &str = "{FUNCEXPR :funcid 1317 :funcresulttype 23 :args ({VAR :varno 1 \
        :varattno 1 :vartype 25 :varlevelsup 0})}";
    const F_ID: &str = "{FUNCEXPR :funcid 9000 :funcresulttype 23 :args ({VAR :varno 1 \
        :varattno 1 :vartype 23 :varlevelsup 0})}";

    #[test]
    fn columns_generated_from_protected_ones_are_derived() {
        let (h, p) = fixture();
        let run = |g: &[Generated]| derived(g, &h, &p, &functions());
        // length(note) on the child: the child and its parent.
        let out = run(&[column(2, LENGTH_NOTE, &[2])]);
        assert_eq!(out[&2]["len"], "protected column note");
        assert_eq!(out[&1]["len"], "protected column note");
        // By its recorded dependency alone.
        assert!(run(&[column(1, LENGTH_ID, &[2])]).contains_key(&1));
        // length(id): nothing.
        assert!(run(&[column(1, LENGTH_ID, &[1])]).is_empty());
        // A function of the owner's, whatever it is given.
        assert_eq!(
            run(&[column(1, F_ID, &[1])])[&1]["len"],
            "function public.f"
        );
        // What the reader cannot follow.
        assert!(run(&[column(1, "{SUBLINK :subLinkType 0}", &[1])]).contains_key(&1));
    }
}
