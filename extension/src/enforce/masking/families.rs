//! How the rows of a relation's inheritance, partition or Citus family are
//! placed, and whether that placement follows raw values masked sessions
//! may not read: such families are refused to them.

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use crate::error::refuse;
use crate::pg::lookup::{lookup, read_one};

use super::{
    oid_arg, reads_protected, relation_policy, unlabelled_text_refusal, RelationPolicy, CHILDREN,
    FAMILIES,
};

/// Why masked sessions may not read `relid` at all, when the rows of its
/// inheritance or partition family were placed by raw values of a column
/// they read only masked:
///
/// - a partitioned table of the family (its own, an ancestor's, a
///   descendant's) is partitioned by such a column: which partition holds
///   a row is a function of its raw value, and `tableoid`, a read of one
///   partition, partition pruning and partition-wise plans all show it;
/// - a member of a family of more than one table has a CHECK constraint
///   on such a column (partitioning by inheritance: `CHECK (name < 'N')`
///   on one child): which child holds a row follows the raw value;
/// - a member is clustered on an index over such a column (`CLUSTER`):
///   its rows are stored in raw order, which any unordered read shows;
/// - any of these runs an owner's code (a partition key's operator class
///   or expression, a CHECK constraint, a clustered index's operator
///   class, expression or predicate), on a family with or without labels:
///   that code may look up a labelled column of any table, so which
///   member holds a row, or where, may follow raw values the family does
///   not hold (`PARTITION BY RANGE (id owner_ops)` whose comparison ranks
///   the patient's name).
pub(crate) fn family_refusal(relid: Oid) -> Option<String> {
    if let Some(p) = FAMILIES.with(|p| p.borrow().get(&relid).cloned()) {
        return p;
    }
    // The system catalogs place no row by a user's value.
    if relid.to_u32() < pg_sys::FirstNormalObjectId {
        return None;
    }
    type Row = (String, Oid, Vec<i16>, Option<String>, Option<Oid>, bool);
    let rows = lookup(|| -> Result<Vec<Row>, pgrx::spi::Error> {
        Spi::connect(|client| {
            let rows = client.select(FAMILY_PLACEMENT_SQL, None, &oid_arg(relid))?;
            let mut out = Vec::new();
            for row in rows {
                let (Some(kind), Some(table)) = (row.get::<String>(1)?, row.get::<Oid>(2)?) else {
                    continue;
                };
                let cols = row.get::<Vec<i16>>(3)?.unwrap_or_default();
                out.push((
                    kind,
                    table,
                    cols,
                    row.get::<String>(4)?,
                    row.get::<Oid>(5)?,
                    row.get::<bool>(6)?.unwrap_or(true),
                ));
            }
            Ok(out)
        })
    })
    .unwrap_or_else(|e| {
        refuse(format!(
            "could not read how the rows of a masked relation are placed: {e}"
        ))
    });
    let why = rows
        .into_iter()
        .find_map(|(kind, table, mut cols, exprs, index, owner_class)| {
            let (by_label, by_owner) = match index {
                // The index's own columns, not [`index_reads_protected`]:
                // that asks this function about the index's table.
                Some(index) => (
                    crate::pg::catalog::index_columns(index).is_some_and(|(table, cols)| {
                        reads_protected(&relation_policy(table), &cols)
                            || crate::guc::deny_unlabelled_text()
                                && unlabelled_text_refusal(table, &cols).is_some()
                    }),
                    crate::pg::catalog::index_runs_owner_code(index),
                ),
                None => {
                    cols.retain(|&a| a != 0);
                    let owner_expr = exprs
                        .as_deref()
                        .is_some_and(crate::pg::catalog::node_text_calls_owner_code);
                    if let Some(exprs) = exprs {
                        cols.extend(crate::pg::catalog::expression_columns(&exprs));
                    }
                    (
                        reads_protected(&relation_policy(table), &cols),
                        owner_class || owner_expr,
                    )
                }
            };
            let name = crate::pg::catalog::relation_name;
            if by_label {
                Some(format!(
                    "masked sessions cannot read {}: {} has a {kind} on a column with a dptext rule, so where a row is stored tells its raw value",
                    name(relid),
                    name(table)
                ))
            } else if by_owner {
                Some(format!(
                    "masked sessions cannot read {}: {} has a {kind} that runs code that is not built in (an operator class, a function or an operator), which may place rows by raw values of any table",
                    name(relid),
                    name(table)
                ))
            } else {
                None
            }
        });
    let why = why.or_else(|| distribution_refusal(relid));
    FAMILIES.with(|p| p.borrow_mut().insert(relid, why.clone()));
    why
}

/// Why masked sessions may not read `relid`, a Citus distributed table or
/// one of its shards, when the table is distributed by a column they read
/// only masked: which shard holds a row is a function of its raw value
/// (its hash, or its range), and `tableoid`, a read of one shard and the
/// public `get_shard_id_for_distribution_column` would test guesses
/// against it. Without Citus this is one catalog probe.
fn distribution_refusal(relid: Oid) -> Option<String> {
    let (table, key) = lookup(|| -> Result<(Oid, Option<String>), pgrx::spi::Error> {
        if !read_one::<bool>(HAS_DISTRIBUTION_SQL, &[])?.unwrap_or(false) {
            return Ok((relid, None));
        }
        let parent = shard_parent(relid);
        let table = if parent == Oid::INVALID {
            relid
        } else {
            parent
        };
        Ok((
            table,
            read_one::<String>(DISTRIBUTION_KEY_SQL, &oid_arg(table))?,
        ))
    })
    .unwrap_or_else(|e| {
        refuse(format!(
            "could not read how Citus distributes a masked relation: {e}"
        ))
    });
    let key = key?;
    let policy = relation_policy(table);
    let cols = crate::pg::catalog::expression_columns(&key);
    // A key that cannot be read is taken as labelled (fail closed).
    let by_label = policy.protects() && (cols.is_empty() || reads_protected(&policy, &cols));
    by_label.then(|| {
        format!(
            "masked sessions cannot read {}: {} is distributed by a column with a dptext rule, so which shard holds a row tells its raw value; distribute it by an unlabelled key",
            crate::pg::catalog::relation_name(relid),
            crate::pg::catalog::relation_name(table)
        )
    })
}

/// How the rows of `$1`'s inheritance and partition family are placed:
/// each partition key (kind, table, its columns (0: an expression), its
/// expressions, NULL, whether an operator class of its is not built in),
/// each CHECK constraint when the family has more than one table, and
/// each index a member is clustered on (its oid fifth).
const FAMILY_PLACEMENT_SQL: &str = concat!(
    crate::pg::catalog::family_cte!(),
    "
SELECT 'partition key', p.partrelid, p.partattrs::pg_catalog.int2[], p.partexprs::pg_catalog.text,
       NULL::pg_catalog.oid,
       EXISTS (SELECT 1 FROM pg_catalog.unnest(p.partclass::pg_catalog.oid[]) k(c)
                WHERE k.c OPERATOR(pg_catalog.>=) 16384::pg_catalog.oid) -- FirstNormalObjectId
  FROM fam JOIN pg_catalog.pg_partitioned_table p ON p.partrelid OPERATOR(pg_catalog.=) fam.rel
UNION ALL
SELECT 'CHECK constraint', c.conrelid, c.conkey, c.conbin::pg_catalog.text, NULL, false
  FROM fam JOIN pg_catalog.pg_constraint c ON c.conrelid OPERATOR(pg_catalog.=) fam.rel
 WHERE c.contype OPERATOR(pg_catalog.=) 'c'
   AND (SELECT pg_catalog.count(*) FROM fam) OPERATOR(pg_catalog.>) 1
UNION ALL
SELECT 'clustered index', x.indrelid, NULL, NULL, x.indexrelid, false
  FROM fam JOIN pg_catalog.pg_index x ON x.indrelid OPERATOR(pg_catalog.=) fam.rel AND x.indisclustered"
);

/// Whether Citus's distribution catalog exists in this database.
const HAS_DISTRIBUTION_SQL: &str =
    "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL";

/// The distribution key of Citus table `$1` (a `Var` node), one row
/// always: NULL for a reference table or a relation Citus does not
/// distribute.
const DISTRIBUTION_KEY_SQL: &str = "
SELECT (SELECT p.partkey FROM pg_catalog.pg_dist_partition p
         WHERE p.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) $1 LIMIT 1)";

/// Whether Citus's shard catalog exists in this database.
const HAS_SHARDS_SQL: &str =
    "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_shard') IS NOT NULL";

/// The distributed table of Citus shard `$1` (0, one row always, when
/// there is no such shard).
const SHARD_OF_SQL: &str = "
SELECT COALESCE((SELECT s.logicalrelid FROM pg_catalog.pg_dist_shard s
                  WHERE s.shardid OPERATOR(pg_catalog.=) $1), 0::pg_catalog.oid)";

/// On a Citus node, the distributed table whose shard `relid` is (0 for
/// any other relation). Citus copies labels to a shard only when the
/// shard is created after them; a label set later reaches the workers'
/// copies of the table itself, so a shard takes its table's rules as a
/// partition takes its parent's. A shard is named `table_<shardid>` (a
/// long table name is shortened before the suffix) in its table's
/// schema, and has its table's owner. The owner matters: a table that a
/// masked role created and filled itself, named like a shard, would
/// otherwise serve the role's own guesses through the table's rule, an
/// oracle for its masked values. Without Citus this is one catalog probe.
pub(super) fn shard_parent(relid: Oid) -> Oid {
    let has_shards = read_one::<bool>(HAS_SHARDS_SQL, &[])
        .unwrap_or_else(|e| refuse(format!("could not look for Citus shards: {e}")))
        .unwrap_or(false);
    if !has_shards {
        return Oid::INVALID;
    }
    let Some((nsp, name)) = crate::pg::catalog::relation_namespace_and_name(relid) else {
        return Oid::INVALID;
    };
    let Some(shard_id) = name
        .rsplit_once('_')
        .and_then(|(_, digits)| digits.parse::<i64>().ok())
    else {
        return Oid::INVALID;
    };
    let parent = read_one::<Oid>(SHARD_OF_SQL, &[shard_id.into()])
        .unwrap_or_else(|e| refuse(format!("could not read Citus's shard catalog: {e}")))
        .unwrap_or(Oid::INVALID);
    let same_owner = crate::pg::catalog::relation_owner(relid).is_some()
        && crate::pg::catalog::relation_owner(relid) == crate::pg::catalog::relation_owner(parent);
    match crate::pg::catalog::relation_namespace_and_name(parent) {
        Some((parent_nsp, _)) if parent_nsp == nsp && parent != relid && same_owner => parent,
        _ => Oid::INVALID,
    }
}

/// Whether `relid` is a child of plain inheritance in a family with dptext
/// rules: its own statistics, extended statistics and indexes describe the
/// rows the owner's routing sent it, which masked plans must not use.
pub(crate) fn masked_inheritance_child(relid: Oid) -> bool {
    matches!(relation_policy(relid).as_ref(), RelationPolicy::Masked(_))
        && plain_inheritance_child(relid)
}

/// Whether `relid` is a child of plain inheritance (a parent in
/// `pg_inherits`, not a partition), cached until the next invalidation.
pub(crate) fn plain_inheritance_child(relid: Oid) -> bool {
    if let Some(c) = CHILDREN.with(|c| c.borrow().get(&relid).copied()) {
        return c;
    }
    let child = lookup(|| {
        read_one::<bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid OPERATOR(pg_catalog.=) $1)
                AND NOT (SELECT c.relispartition FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1)",
            &[relid.into()],
        )
    })
    // Fail closed: a child whose kind could not be read gets no statistics.
    .map_or(true, |c| c.unwrap_or(true));
    CHILDREN.with(|c| c.borrow_mut().insert(relid, child));
    child
}
