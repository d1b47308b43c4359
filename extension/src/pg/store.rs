//! Direct reads and writes of `dptext.store`, the computed-once store
//! (`crate::store`): an index lookup by tag and a heap insert with its
//! index entry, below SQL, so that a masked session's read can use the
//! store without any privilege on it, without the planner, the rewrite or
//! the hooks, and without a plan per value.

use pgrx::pg_sys;
use pgrx::{FromDatum, IntoDatum};

/// Columns of `dptext.store`, in order (sql/catalog.sql).
const NATTS: i32 = 5;

/// The store table and its tag index, or `None` when the extension's
/// catalog is not created in this database.
pub fn relations() -> Option<(pg_sys::Oid, pg_sys::Oid)> {
    // SAFETY: both lookups take NUL-terminated constant names and only
    // read the catalog caches; an unknown schema gives InvalidOid
    // (missing_ok), an unknown relation InvalidOid.
    unsafe {
        let ns = pg_sys::get_namespace_oid(c"dptext".as_ptr(), true);
        if ns == pg_sys::InvalidOid {
            return None;
        }
        let table = pg_sys::get_relname_relid(c"store".as_ptr(), ns);
        let index = pg_sys::get_relname_relid(c"store_tag".as_ptr(), ns);
        (table != pg_sys::InvalidOid && index != pg_sys::InvalidOid).then_some((table, index))
    }
}

/// Whether this backend may write the store now: not on a standby, not in
/// a read-only transaction, not inside a parallel operation (no
/// transaction id can be taken there).
pub fn writable() -> bool {
    // SAFETY: plain reads of backend-global state (shared-memory recovery
    // flag behind a function, the transaction's read-only flag, the
    // parallel-mode counter), in the backend's main thread.
    unsafe { !pg_sys::RecoveryInProgress() && !pg_sys::XactReadOnly && !pg_sys::IsInParallelMode() }
}

/// The store table opened with `lock` (kept to the end of the
/// transaction), after checking it has the columns this module reads and
/// writes; an ERROR naming the fix otherwise.
///
/// # Safety
/// `table` is the store table ([`relations`]); the caller closes the
/// relation it gets (with `NoLock`).
unsafe fn open(table: pg_sys::Oid, lock: u32) -> pg_sys::Relation {
    // SAFETY: as the caller promises; a relation opened with a lock has a
    // valid descriptor until it is closed.
    unsafe {
        let rel = pg_sys::table_open(table, lock as pg_sys::LOCKMODE);
        if (*(*rel).rd_att).natts != NATTS {
            pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
            pgrx::error!("dptext.store has an unexpected shape: run ALTER EXTENSION dptext UPDATE");
        }
        rel
    }
}

/// The output filed under `tag`, if any (the first found: every copy of
/// one tag holds the same output).
pub fn lookup(table: pg_sys::Oid, index: pg_sys::Oid, tag: &[u8]) -> Option<String> {
    let datum = tag.into_datum()?;
    // SAFETY: the table is opened with AccessShareLock (kept to the end of
    // the transaction, as the executor's own opens are) so its descriptor
    // stays valid while read; the scan key is initialised by ScanKeyInit
    // over a palloc'd bytea datum that lives in the current memory
    // context until the scan ends; systable_beginscan gets the static
    // SnapshotSelf (no registration needed for a non-MVCC snapshot); the output column is read from a tuple the scan
    // returned, and copied into a Rust string (detoasted) before the scan
    // ends; the column number is checked against the descriptor.
    unsafe {
        let rel = open(table, pg_sys::AccessShareLock);
        let desc = (*rel).rd_att;
        let mut key: pg_sys::ScanKeyData = std::mem::zeroed();
        pg_sys::ScanKeyInit(
            &mut key,
            1,
            pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
            pg_sys::Oid::from(pg_sys::F_BYTEAEQ),
            datum,
        );
        // SnapshotSelf: every committed entry and this transaction's own.
        // Not an MVCC snapshot, so a SERIALIZABLE transaction takes no
        // predicate lock on the entry found (pg_locks would name its
        // place in the store, which follows the order values were
        // filed in), and no snapshot is taken per value. Every copy of a
        // tag holds the same output, so any visible one will do.
        let snapshot = &raw mut pg_sys::SnapshotSelfData;
        let scan = pg_sys::systable_beginscan(rel, index, true, snapshot, 1, &mut key);
        let tuple = pg_sys::systable_getnext(scan);
        let out = if tuple.is_null() {
            None
        } else {
            let mut isnull = false;
            let d = pg_sys::heap_getattr(tuple, 2, desc, &mut isnull);
            String::from_datum(d, isnull)
        };
        pg_sys::systable_endscan(scan);
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        out
    }
}

/// One row to file: tag, output, rule id, key id.
pub struct Entry<'a> {
    /// The tag ([`dptext_core::store::TagKey::tag`]).
    pub tag: &'a [u8],
    /// The sanitized output.
    pub output: &'a str,
    /// The rule's identity ([`dptext_core::store::rule_id`]).
    pub rule_id: &'a str,
    /// The masking key's public id.
    pub key_id: &'a str,
}

/// Files `entries` in the store (heap and tag index), in the current
/// transaction: they become visible to others when it commits and vanish
/// if it aborts. The caller checks [`writable`] first. No privilege is
/// checked: the store is the extension's own, written only here and by
/// the owner's maintenance functions.
pub fn insert(table: pg_sys::Oid, index: pg_sys::Oid, entries: &[Entry<'_>]) {
    if entries.is_empty() {
        return;
    }
    // SAFETY: the table is opened with RowExclusiveLock and the index with
    // RowExclusiveLock (both kept to the end of the transaction); each
    // tuple is formed by heap_form_tuple from NATTS datums (palloc'd
    // varlenas and a timestamp by value) that match the descriptor, which
    // is checked; simple_heap_insert toasts, WAL-logs and sets t_self,
    // which index_insert then reads with the tag datum (the index is a
    // plain btree over column 1, built by the extension's script); the
    // IndexInfo is built from the open index.
    unsafe {
        let rel = open(table, pg_sys::RowExclusiveLock);
        let desc = (*rel).rd_att;
        let irel = pg_sys::index_open(index, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE);
        let info = pg_sys::BuildIndexInfo(irel);
        let now = pg_sys::GetCurrentTimestamp();
        for e in entries {
            let (Some(tag), Some(output), Some(rule), Some(key)) = (
                e.tag.into_datum(),
                e.output.into_datum(),
                e.rule_id.into_datum(),
                e.key_id.into_datum(),
            ) else {
                continue;
            };
            let mut values = [tag, output, rule, key, pg_sys::Datum::from(now)];
            let mut nulls = [false; NATTS as usize];
            let tuple = pg_sys::heap_form_tuple(desc, values.as_mut_ptr(), nulls.as_mut_ptr());
            pg_sys::simple_heap_insert(rel, tuple);
            let mut ivalues = [tag];
            let mut inulls = [false];
            pg_sys::index_insert(
                irel,
                ivalues.as_mut_ptr(),
                inulls.as_mut_ptr(),
                &mut (*tuple).t_self,
                rel,
                pg_sys::IndexUniqueCheck::UNIQUE_CHECK_NO,
                false,
                info,
            );
            pg_sys::heap_freetuple(tuple);
        }
        pg_sys::index_close(irel, pg_sys::NoLock as pg_sys::LOCKMODE);
        pg_sys::table_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
    }
}
