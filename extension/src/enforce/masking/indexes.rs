//! Indexes and writes: which indexes masked planning may not use (they
//! read a protected column, or run an owner's code), and which tables
//! masked sessions may not write.

use std::rc::Rc;

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use crate::error::refuse;
use crate::pg::lookup::lookup;

use super::{
    family_refusal, masked_inheritance_child, oid_arg, reads_protected, relation_policy,
    unlabelled_text_refusal, INDEXES,
};

/// True when index `indexid` reads (by a key, an expression or its
/// predicate) a column that masked sessions read only through a rule or
/// not at all: masked planning never uses it (its order, and the counts
/// of a partial index, are functions of raw values), and masked sessions
/// see neither its `pg_class` row nor its statistics.
pub(crate) fn index_reads_protected(indexid: Oid) -> bool {
    let reads = match INDEXES.with(|i| i.borrow().get(&indexid).cloned()) {
        Some(r) => r,
        None => {
            let columns = crate::pg::catalog::index_columns(indexid);
            // Every index of a child of a labelled plain-inheritance
            // family counts: its statistics (expressions), its row count
            // (a partial index) and its order describe the rows the owner's
            // routing sent that child.
            // So does every index of a member of a family whose rows were
            // placed by raw values: its row count and statistics are the
            // member's, which masked sessions may not read.
            // And any index that runs an owner's code to order or match
            // (an operator class whose comparison looks names up, an
            // expression or predicate over a function that reads a
            // labelled column through a query): on any table, since the
            // code may read any.
            let labelled = columns.as_ref().is_some_and(|(table, cols)| {
                let policy = relation_policy(*table);
                reads_protected(&policy, cols)
                    || masked_inheritance_child(*table)
                    || family_refusal(*table).is_some()
            }) || crate::pg::catalog::index_runs_owner_code(indexid);
            let r = Rc::new(IndexReads { columns, labelled });
            INDEXES.with(|i| i.borrow_mut().insert(indexid, r.clone()));
            r
        }
    };
    // Under deny by default, an index over a refused column too: its
    // order and a partial index's row count are of raw values.
    reads.labelled
        || crate::guc::deny_unlabelled_text()
            && reads
                .columns
                .as_ref()
                .is_some_and(|(table, cols)| unlabelled_text_refusal(*table, cols).is_some())
}

/// What [`index_reads_protected`] keeps of an index: read once (an
/// `index_open`) per index until the caches are dropped.
pub(super) struct IndexReads {
    /// The table and the columns the index reads (`None`: not an index).
    columns: Option<(Oid, Vec<i16>)>,
    /// One of them is labelled (or otherwise read only masked).
    labelled: bool,
}

/// Under `dptext.deny_unlabelled_text`, whether masked sessions may not
/// write relation `relid`: it has a text column they may not read (a
/// constraint error's detail prints the row, `ON CONFLICT` tells whether a
/// value exists, an inserted value's place in an index order compares it).
pub(crate) fn writes_denied(relid: Oid) -> bool {
    crate::guc::deny_unlabelled_text() && unlabelled_text_refusal(relid, &[0]).is_some()
}

/// Why a masked session may not write `relid`, when one of its indexes
/// runs an owner's code ([`crate::pg::catalog::index_runs_owner_code`]):
/// the owner built it over raw values, so a masked write's uniqueness
/// search compares the session's masked values along the raw order (found
/// or missed duplicates tell that order) and files entries out of place.
pub(crate) fn owner_index_write_refusal(relid: Oid) -> Option<String> {
    let indexes = lookup(|| -> Result<Vec<Oid>, pgrx::spi::Error> {
        Spi::connect(|client| {
            let rows = client.select(
                "SELECT indexrelid FROM pg_catalog.pg_index WHERE indrelid OPERATOR(pg_catalog.=) $1",
                None,
                &oid_arg(relid),
            )?;
            let mut out = Vec::new();
            for row in rows {
                if let Some(i) = row.get::<Oid>(1)? {
                    out.push(i);
                }
            }
            Ok(out)
        })
    })
    .unwrap_or_else(|e| refuse(format!("could not read the indexes of a written table: {e}")));
    indexes
        .into_iter()
        .find(|&i| crate::pg::catalog::index_runs_owner_code(i))
        .map(|i| {
            format!(
                "masked sessions cannot write {}: its index {} runs code that is not built in (an operator class, an expression or a predicate), which its owner ran over raw values",
                crate::pg::catalog::relation_name(relid),
                crate::pg::catalog::relation_name(i)
            )
        })
}
