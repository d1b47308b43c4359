//! Whose relations a masked session may read, in proxy mode.
//!
//! The catalog is read at the session's start, and a relation's owner may
//! change the relation at any time after: make it a view of its own
//! functions (`DROP TABLE` then `CREATE VIEW`, or a `_RETURN` rule that
//! keeps the OID), give it a row-level security policy, or retype a
//! column to a type of its own with a cast. A read the analysis allowed
//! would then run the owner's code with the session's raw reads. So a
//! masked session reads only relations whose owner the proxy trusts
//! ([`untrusted`]): superusers, the owners of the relations that carry
//! rules and of every member of their hierarchies, the owners of
//! sanitized relations, and the roles of `masking.trusted_owners`. A
//! relation is refused when it or a member of its hierarchy belongs to
//! anyone else: an ancestor's owner may retype the relation's columns (a
//! change to a parent's column recurses to its children), and a read
//! includes the rows of its partitions and children, whose owners may
//! add constraints that split them.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::analysis::{Policy, UntrustedOwner};

use super::hierarchy::Hierarchy;

/// A relation's owner (`pg_class.relowner`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    /// The role's name.
    pub name: String,
    /// Whether the role is a superuser.
    pub superuser: bool,
}

/// Schemas whose relations are the catalog: read as they are (what may be
/// read of them is the catalog allow-list's business).
const CATALOG_SCHEMAS: [&str; 2] = ["pg_catalog", "information_schema"];

/// The roles whose relations may be read: `configured` (the
/// configuration's `masking.trusted_owners`), superusers, the owners of
/// every member of the hierarchy of a relation `policy` protects columns
/// of, and the owners of the relations it declares sanitized.
fn trusted<'a>(
    hierarchy: &Hierarchy,
    owners: &'a HashMap<u32, Owner>,
    policy: &Policy,
    configured: &'a [String],
) -> HashSet<&'a str> {
    let mut trusted: HashSet<&str> = configured.iter().map(String::as_str).collect();
    trusted.extend(
        owners
            .values()
            .filter(|o| o.superuser)
            .map(|o| o.name.as_str()),
    );
    let mut carriers: Vec<u32> = Vec::new();
    for table in policy.protected.keys() {
        if let Some(oid) = hierarchy.oid(table) {
            carriers.push(oid);
            carriers.extend(hierarchy.ancestors(oid));
            carriers.extend(hierarchy.descendants(oid));
        }
    }
    carriers.extend(policy.sanitized.iter().filter_map(|r| hierarchy.oid(r)));
    trusted.extend(
        carriers
            .iter()
            .filter_map(|oid| owners.get(oid))
            .map(|o| o.name.as_str()),
    );
    trusted
}

/// The relations a masked session may not read for their owner's sake,
/// with the member of their hierarchy (themselves first, then the others
/// by OID) whose owner is not trusted. Relations of the catalog's schemas
/// are left out. Call after `Hierarchy::protect_ancestors`.
pub(super) fn untrusted(
    hierarchy: &Hierarchy,
    owners: &HashMap<u32, Owner>,
    policy: &Policy,
    configured: &[String],
) -> HashMap<u32, UntrustedOwner> {
    let trusted = trusted(hierarchy, owners, policy, configured);
    let sorted: BTreeMap<u32, &Owner> = owners.iter().map(|(o, w)| (*o, w)).collect();
    let mut out = HashMap::new();
    for oid in sorted.keys() {
        let Some(name) = hierarchy.name(*oid) else {
            continue;
        };
        if CATALOG_SCHEMAS.contains(&name.schema.as_str()) {
            continue;
        }
        let mut others: Vec<u32> = hierarchy.ancestors(*oid).into_iter().collect();
        others.extend(hierarchy.descendants(*oid));
        others.sort_unstable();
        let found = std::iter::once(*oid).chain(others).find_map(|m| {
            let owner = sorted.get(&m)?;
            (!trusted.contains(owner.name.as_str())).then(|| (m, owner.name.clone()))
        });
        let Some((member, owner)) = found else {
            continue;
        };
        let Some(relation) = hierarchy.name(member).cloned() else {
            continue;
        };
        tracing::debug!(%name, %relation, %owner, "relation refused for its owner");
        out.insert(*oid, UntrustedOwner { relation, owner });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::QualName;

    fn owner(name: &str, superuser: bool) -> Owner {
        Owner {
            name: name.into(),
            superuser,
        }
    }

    /// `rec` (protected, owned by `clinic`) with a partition `rec_a`
    /// owned by `part`; `lookup` (owned by `etl`); `mine` (owned by
    /// `colluder`); `safe` (sanitized, owned by `views`); `sys` (a
    /// superuser's); `par` (a superuser's) with a child `kid` owned by
    /// `colluder`; `pg_class` in `pg_catalog`, owned by `colluder` for the
    /// test's sake.
    fn fixture() -> (Hierarchy, HashMap<u32, Owner>, Policy) {
        let mut h = Hierarchy::new();
        let rels = [
            (1, "public", "rec", "clinic", false),
            (2, "public", "rec_a", "part", false),
            (3, "public", "lookup", "etl", false),
            (4, "public", "mine", "colluder", false),
            (5, "public", "safe", "views", false),
            (6, "public", "sys", "postgres", true),
            (7, "public", "par", "postgres", true),
            (8, "public", "kid", "colluder", false),
            (9, "pg_catalog", "pg_class", "colluder", false),
        ];
        let mut owners = HashMap::new();
        for (oid, schema, name, role, superuser) in rels {
            h.relation(oid, QualName::new(schema, name), Vec::new());
            owners.insert(oid, owner(role, superuser));
        }
        h.inherits(2, 1);
        h.inherits(8, 7);
        let mut p = Policy::default();
        p.protect("public", "rec", "note", "santext");
        p.sanitize("public", "safe");
        (h, owners, p)
    }

    fn refused(out: &HashMap<u32, UntrustedOwner>) -> Vec<(u32, String, String)> {
        let mut v: Vec<_> = out
            .iter()
            .map(|(o, u)| (*o, u.relation.name.clone(), u.owner.clone()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn only_relations_of_trusted_owners_are_read() {
        let (h, owners, p) = fixture();
        let out = untrusted(&h, &owners, &p, &[]);
        assert_eq!(
            refused(&out),
            [
                (3, "lookup".into(), "etl".into()),
                (4, "mine".into(), "colluder".into()),
                (7, "kid".into(), "colluder".into()),
                (8, "kid".into(), "colluder".into()),
            ]
        );
        // A configured owner is trusted.
        let out = untrusted(&h, &owners, &p, &["etl".into(), "colluder".into()]);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn a_parent_is_refused_for_its_child_and_a_child_for_its_parent() {
        let (mut h, mut owners, p) = fixture();
        // `sub` (a superuser's) inherits from `mine` (the colluder's): the
        // colluder may retype its columns.
        h.relation(10, QualName::new("public", "sub"), Vec::new());
        owners.insert(10, owner("postgres", true));
        h.inherits(10, 4);
        let out = untrusted(&h, &owners, &p, &[]);
        assert_eq!(out[&10].relation.name, "mine");
        assert_eq!(out[&10].owner, "colluder");
    }
}
