//! The locks that order label changes against the masking decisions of
//! open transactions.
//!
//! A backend decides what to mask when it plans a statement, and keeps the
//! plan (prepared statements, PL/pgSQL, cursors). The relation-cache
//! invalidation a label change sends reaches a backend only when it next
//! accepts invalidations, which a cached plan does not do while it reuses
//! locks its transaction already holds: without these locks a transaction
//! that planned under the old labels keeps running its plans after the
//! change has committed.
//!
//! So a label change waits for those transactions, as `ALTER TABLE` does:
//!
//! - every statement takes an `AccessShareLock` on its session's login
//!   role and current role before it reads the masking decision (the
//!   planner, executor-start and utility hooks), kept to the end of the
//!   transaction; a role label takes an `AccessExclusiveLock` on the role;
//! - a column label takes an `AccessExclusiveLock` on every relation whose
//!   rules it can change: the whole inheritance (partition) family of the
//!   column's relation, since rules pass to ancestors and descendants, and
//!   the materialized views that read any of them. A query holds a lock on
//!   every relation it reads until its transaction ends.
//!
//! Taking a lock accepts pending invalidations, so a statement that had to
//! wait for a label change decides under the new labels.

use std::collections::BTreeSet;

use pgrx::pg_sys::{self, Oid};

/// Takes an `AccessShareLock` on the session's login role and current
/// role, for the rest of the transaction, and accepts pending
/// invalidations: called before every masking decision of a statement.
/// The first call of a transaction takes the locks (a shared lock-table
/// entry each); later calls find them in the backend's local lock table.
/// Nothing is locked outside a transaction in progress (aborted blocks)
/// or in parallel workers, whose leader holds the locks.
pub fn lock_session_roles() {
    // SAFETY: reads of the backend's transaction state, parallel worker
    // number and role globals; LockSharedObject takes a heavyweight lock
    // on a (class, oid) tag (a role that does not exist is only a tag) and
    // raises an ERROR (deadlock, lock_timeout, cancel) rather than
    // returning on failure; the lock is released at the end of the
    // transaction.
    unsafe {
        if pg_sys::ParallelWorkerNumber >= 0 || !pg_sys::IsTransactionState() {
            return;
        }
        let (login, current) = super::catalog::session_roles();
        let roles: &[Oid] = if current == login {
            &[login]
        } else {
            &[login, current]
        };
        for &role in roles.iter().filter(|r| **r != Oid::INVALID) {
            pg_sys::LockSharedObject(
                pg_sys::AuthIdRelationId,
                role,
                0,
                pg_sys::AccessShareLock as pg_sys::LOCKMODE,
            );
        }
    }
}

/// Waits until no transaction holds a lock on role `role` (statements take
/// one on their session's roles, see [`lock_session_roles`]), and keeps
/// others from taking one until this transaction ends: called when the
/// role's label is set or removed. Never errs (its type is that of
/// [`lock_relations_for_relabel`], which the caller picks between).
pub fn lock_role_for_relabel(role: Oid) -> Result<(), String> {
    // SAFETY: as in `lock_session_roles`, in the exclusive mode.
    unsafe {
        pg_sys::LockSharedObject(
            pg_sys::AuthIdRelationId,
            role,
            0,
            pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE,
        );
    }
    Ok(())
}

/// The relations whose rules a label on a column of `$1` can change: its
/// inheritance family (the connected component of `pg_inherits`, as rules
/// pass to ancestors and descendants), then the materialized views that
/// read any of them, directly or through views and other materialized
/// views. Views themselves are left out: a query expands a view, so it
/// locks the tables the view reads.
const AFFECTED_SQL: &str = concat!(
    super::catalog::family_cte!(),
    ", readers(rel) AS (
    SELECT rel FROM fam
  UNION
    SELECT r.ev_class
      FROM pg_catalog.pg_depend d
      JOIN pg_catalog.pg_rewrite r ON r.oid OPERATOR(pg_catalog.=) d.objid
      JOIN readers ON d.refobjid OPERATOR(pg_catalog.=) readers.rel
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND r.ev_class OPERATOR(pg_catalog.<>) readers.rel
)
SELECT r.rel FROM readers r JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.rel
 WHERE c.relkind OPERATOR(pg_catalog.=) 'm' OR r.rel IN (SELECT rel FROM fam)"
);

/// Waits until no transaction holds a lock on a relation whose rules a
/// label on a column of `relid` can change, and keeps others from taking
/// one until this transaction ends: an `AccessExclusiveLock` on each, in
/// oid order. The set is read again after the locks are taken, from the
/// latest committed catalog, until it no longer grows: a partition
/// attached meanwhile is locked too (attaching one locks its parent, so
/// once every member is locked the set cannot change). Errs, saying why,
/// when the set cannot be read.
pub fn lock_relations_for_relabel(relid: Oid) -> Result<(), String> {
    let mut locked = BTreeSet::new();
    loop {
        let affected = affected_relations(relid)?;
        let new: Vec<u32> = affected.difference(&locked).copied().collect();
        if new.is_empty() {
            return Ok(());
        }
        for rel in new {
            // SAFETY: takes a heavyweight lock on a relation oid (one
            // dropped meanwhile is only a tag) and accepts invalidations;
            // raises an ERROR (deadlock, lock_timeout, cancel) rather than
            // returning on failure.
            unsafe {
                pg_sys::LockRelationOid(
                    Oid::from(rel),
                    pg_sys::AccessExclusiveLock as pg_sys::LOCKMODE,
                )
            };
            locked.insert(rel);
        }
    }
}

/// The oids of the relations whose rules a label on a column of `relid`
/// can change ([`AFFECTED_SQL`]), read from the latest committed catalog;
/// why not, when they cannot be read (the caller refuses the label).
pub(crate) fn affected_relations(relid: Oid) -> Result<BTreeSet<u32>, String> {
    const WHY: &str = "the relations a label affects could not be read";
    let sql = AFFECTED_SQL.replace("$1", &relid.to_u32().to_string());
    let sql = std::ffi::CString::new(sql).map_err(|_| WHY.to_string())?;
    let rows = super::catalog::read_only_rows(&sql).map_err(|e| format!("{WHY}: {e}"))?;
    Ok(rows
        .iter()
        .filter_map(|row| row.first().cloned().flatten())
        .filter_map(|oid| oid.parse::<u32>().ok())
        .collect())
}
