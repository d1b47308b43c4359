//! What masked sessions see of the catalogs: the filters through which
//! the rewrite makes them read `pg_stats`, `pg_class` and the extended
//! statistics (no most-common value or histogram bound of a labelled
//! column, no row count that counts raw matches), and the random sort key
//! of the inheritance shuffle.

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use super::masking::{
    family_refusal, index_reads_protected, plain_inheritance_child, relation_policy,
    unlabelled_text_refusal, RelationPolicy,
};
use crate::pg::lookup::{lookup, read_two};
use crate::session::session_is_masked;

/// False when masked sessions may not read `relid` at all because raw
/// values decided which rows it holds or where: a materialized view
/// refused whole, or a member of a family [`family_refusal`] refuses.
/// Masked `pg_class` hides such relations, whose `reltuples` would count
/// the rows that matched.
pub(crate) fn row_count_visible(relid: Oid) -> bool {
    match relation_policy(relid).as_ref() {
        RelationPolicy::Refused(_) => false,
        _ => family_refusal(relid).is_none(),
    }
}

/// True when a masked session may see statistics of column `attnum` of
/// `relid`.
pub(crate) fn column_statistics_visible(relid: Oid, attnum: i16) -> bool {
    let visible = match relation_policy(relid).as_ref() {
        // An unlabelled family placed by an owner's code (an operator
        // class or expression of its partition key): its members'
        // statistics describe the rows that code sent each.
        RelationPolicy::Plain => family_refusal(relid).is_none(),
        RelationPolicy::Derived { .. } | RelationPolicy::Refused(_) => false,
        // A child of a labelled plain-inheritance family: its own
        // statistics of any column describe the rows the owner's routing
        // (a trigger on the raw value) sent it, and the planner's per-child
        // estimates would show them (how many rows of each ward went to
        // each child). None is used: the planner's defaults.
        RelationPolicy::Masked(_) if plain_inheritance_child(relid) => false,
        // A member of a family whose rows were placed by raw values
        // (partitioned, CHECK-routed or clustered by a labelled column):
        // masked sessions may not read it, and the statistics of its
        // unlabelled columns would say which rows it holds (a partition's
        // histogram of `id` lists the ids whose raw name fell in its
        // range; a clustered table's correlation compares the raw order).
        RelationPolicy::Masked(_) if family_refusal(relid).is_some() => false,
        p @ RelationPolicy::Masked(_) => p.rule(attnum).is_none(),
    };
    // Under deny by default, a refused column's statistics (its most
    // common values, histogram bounds) are refused values too.
    visible
        && !(crate::guc::deny_unlabelled_text()
            && unlabelled_text_refusal(relid, &[attnum]).is_some())
}

/// The SQL-callable filters, in schema `dptext`.
#[pg_schema]
pub mod dptext {
    use pgrx::prelude::*;

    /// False when the calling session is masked and column `attnum` of
    /// `relid` is labelled: masked sessions read `pg_stats` through this
    /// filter, so no most-common value or histogram bound of a labelled
    /// column reaches them.
    #[pg_extern(stable, parallel_safe)]
    fn statistics_visible(relid: pg_sys::Oid, attnum: i16) -> bool {
        !super::session_is_masked()
            || (super::column_statistics_visible(relid, attnum)
                && !super::index_reads_protected(relid))
    }

    /// False when the calling session is masked and `relid`, of kind
    /// `relkind`, is an index that reads a labelled column, or a TOAST
    /// table: masked sessions read `pg_class` through this filter, so the
    /// row counts and sizes of such indexes (a partial index's `reltuples`
    /// counts the raw values that match its predicate) and of TOAST tables
    /// (chunks of raw values) never reach them.
    #[pg_extern(stable, parallel_safe)]
    fn class_visible(relid: pg_sys::Oid, relkind: i8) -> bool {
        let kind = relkind as u8;
        if crate::store::is_store_relation(relid) {
            // Its row count is how many distinct values were computed,
            // across every table, readable by the session or not.
            return !super::session_is_masked();
        }
        if kind == pg_sys::RELKIND_TOASTVALUE {
            // A TOAST table's row count is the number of ~2 kB chunks of
            // the values stored out of line: raw lengths, to the chunk.
            return !super::session_is_masked();
        }
        if kind != pg_sys::RELKIND_INDEX && kind != pg_sys::RELKIND_PARTITIONED_INDEX {
            // A relation masked sessions may not read because raw values
            // decided which rows it holds (a partition of a table
            // partitioned by a labelled column, a child routed by a CHECK
            // on one, a materialized view filtered on one): its
            // `reltuples` counts the rows that matched.
            let data = [
                pg_sys::RELKIND_RELATION,
                pg_sys::RELKIND_PARTITIONED_TABLE,
                pg_sys::RELKIND_MATVIEW,
                pg_sys::RELKIND_FOREIGN_TABLE,
            ];
            return !super::session_is_masked()
                || !data.contains(&kind)
                || relid.to_u32() < pg_sys::FirstNormalObjectId
                || super::row_count_visible(relid);
        }
        if crate::pg::catalog::in_toast_namespace(relid) {
            // A TOAST index's row count is the chunk count too.
            return !super::session_is_masked();
        }
        !super::session_is_masked() || !super::index_reads_protected(relid)
    }

    /// A random sort key from the operating system: the order in which a
    /// masked read of a parent of plain inheritance hands on its rows
    /// (docs/masking.md). Unlike `random()`, no session can seed or replay
    /// it.
    #[pg_extern(volatile, parallel_safe)]
    fn shuffle_key() -> f64 {
        dptext_core::rng::os_unit()
    }

    /// False when the calling session is masked and the extended
    /// statistics object `stxoid` covers a relation with labelled columns
    /// (`pg_stats_ext`, `pg_stats_ext_exprs`).
    #[pg_extern(stable, parallel_safe)]
    fn extended_statistics_visible(stxoid: pg_sys::Oid) -> bool {
        if !super::session_is_masked() {
            return true;
        }
        let rel = super::lookup(|| {
            super::read_two::<pg_sys::Oid, String>(
                "SELECT stxrelid, stxexprs::pg_catalog.text FROM pg_catalog.pg_statistic_ext WHERE oid OPERATOR(pg_catalog.=) $1",
                &[stxoid.into()],
            )
        });
        match rel {
            // Expressions over an owner's function (one that looks a
            // labelled column up) summarise raw values of another table.
            Ok((Some(rel), exprs)) => {
                matches!(
                    super::relation_policy(rel).as_ref(),
                    super::RelationPolicy::Plain
                ) && !exprs.is_some_and(|e| crate::pg::catalog::node_text_calls_owner_code(&e))
            }
            _ => false,
        }
    }
}
