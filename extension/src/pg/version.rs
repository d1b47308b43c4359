//! What differs between the PostgreSQL majors the extension builds for
//! (15 and 18), in one place: the rest of the extension calls these and
//! carries no `cfg` of its own.
//!
//! - **Permissions of a range-table entry.** PostgreSQL 15 keeps them on
//!   the entry (`checkAsUser`, `selectedCols`, `requiredPerms`); 16 moved
//!   them to `Query.rteperminfos`, which an entry indexes with
//!   `perminfoindex`. [`perms`] reads them either way; [`move_perms`] moves
//!   them from a relation entry onto the entry of the masking subquery
//!   that replaces it.
//! - **Tree mutators.** 16 renamed `query_tree_mutator` and
//!   `expression_tree_mutator` to `*_impl` with typed callbacks (the
//!   walkers pgrx wraps itself).
//! - **`ALTER TABLE` subcommands.** 16 dropped the `*Recurse` variants:
//!   [`alter_base`] maps them to the plain ones.
//! - **Counter functions** that 17 removed with `pg_stat_bgwriter`'s
//!   backend columns ([`VERSION_COUNTERS`]).
//! - **Setting records**: 16 returns their count from `get_guc_variables`.
//! - **`COPY ... TO` of a materialized view**, which 18 reads ([`copy_to_reads`]).

use pgrx::pg_sys::{self, Node, Oid, Query, RangeTblEntry};

/// A mutator callback, as [`query_tree_mutator`] and
/// [`expression_tree_mutator`] take it.
pub type Mutator = unsafe extern "C-unwind" fn(*mut Node, *mut std::ffi::c_void) -> *mut Node;

/// The permission facts of a relation entry: the role its privileges are
/// checked as (`InvalidOid`: the current user) and the columns it reads.
#[derive(Clone, Copy)]
pub struct Perms {
    /// `checkAsUser`: the view owner's role for a relation a view reads.
    pub check_as_user: Oid,
    /// `selectedCols`: the columns read, offset by
    /// `FirstLowInvalidHeapAttributeNumber`.
    pub selected_cols: *mut pg_sys::Bitmapset,
}

/// The permission facts of entry `rte` of query `q`; `None` when the
/// entry carries none (an entry the planner added, or not a relation).
///
/// # Safety
/// `rte` is a valid range-table entry of `q`'s range table (the query as
/// the parser or rewriter left it: a mutator's copy shares the list).
#[cfg(feature = "pg15")]
pub unsafe fn perms(_q: *mut Query, rte: *mut RangeTblEntry) -> Option<Perms> {
    // SAFETY: as the caller promises.
    unsafe {
        Some(Perms {
            check_as_user: (*rte).checkAsUser,
            selected_cols: (*rte).selectedCols,
        })
    }
}

/// The permission facts of entry `rte` of query `q`; `None` when the
/// entry carries none (an entry the planner added, or not a relation).
///
/// # Safety
/// `rte` is a valid range-table entry of `q`'s range table (the query as
/// the parser or rewriter left it: a mutator's copy shares the list).
#[cfg(not(feature = "pg15"))]
pub unsafe fn perms(q: *mut Query, rte: *mut RangeTblEntry) -> Option<Perms> {
    // SAFETY: as the caller promises; `perminfoindex` is 1-based into
    // `q.rteperminfos` (0: none), checked against the list's length.
    unsafe {
        let info = perm_info(q, rte)?;
        Some(Perms {
            check_as_user: (*info).checkAsUser,
            selected_cols: (*info).selectedCols,
        })
    }
}

/// The `RTEPermissionInfo` entry `rte` indexes in `q`, when it has one for
/// the same relation.
///
/// # Safety
/// As [`perms`].
#[cfg(not(feature = "pg15"))]
unsafe fn perm_info(
    q: *mut Query,
    rte: *mut RangeTblEntry,
) -> Option<*mut pg_sys::RTEPermissionInfo> {
    // SAFETY: as the caller promises.
    unsafe {
        let index = usize::try_from((*rte).perminfoindex).ok()?;
        if index == 0 || q.is_null() {
            return None;
        }
        let list = pgrx::PgList::<pg_sys::RTEPermissionInfo>::from_pg((*q).rteperminfos);
        let info = list.get_ptr(index - 1)?;
        ((*info).relid == (*rte).relid).then_some(info)
    }
}

/// Moves the permission facts of relation entry `outer` (of query `q`),
/// which becomes the masking subquery `sub`, onto `inner`: `sub`'s only
/// entry, a copy of `outer` made before the change. The privileges are
/// then checked once, where the relation is read.
///
/// # Safety
/// `outer` is a valid relation entry of `q`'s range table, `sub` a query
/// built by the caller whose range table holds `inner` alone.
#[cfg(feature = "pg15")]
pub unsafe fn move_perms(
    _q: *mut Query,
    outer: *mut RangeTblEntry,
    _sub: *mut Query,
    _inner: *mut RangeTblEntry,
) {
    // SAFETY: as the caller promises; `inner` keeps its own copies.
    unsafe {
        (*outer).requiredPerms = 0;
        (*outer).checkAsUser = Oid::INVALID;
        (*outer).selectedCols = std::ptr::null_mut();
        (*outer).insertedCols = std::ptr::null_mut();
        (*outer).updatedCols = std::ptr::null_mut();
        (*outer).extraUpdatedCols = std::ptr::null_mut();
    }
}

/// Moves the permission facts of relation entry `outer` (of query `q`),
/// which becomes the masking subquery `sub`, onto `inner`: `sub`'s only
/// entry, a copy of `outer` made before the change. The privileges are
/// then checked once, where the relation is read; `q`'s entry for it is
/// left unreferenced, and the planner drops such entries.
///
/// # Safety
/// `outer` is a valid relation entry of `q`'s range table, `sub` a query
/// built by the caller whose range table holds `inner` alone.
#[cfg(not(feature = "pg15"))]
pub unsafe fn move_perms(
    q: *mut Query,
    outer: *mut RangeTblEntry,
    sub: *mut Query,
    inner: *mut RangeTblEntry,
) {
    // SAFETY: as the caller promises; the copy is made in the current
    // (planner's) memory context.
    unsafe {
        (*inner).perminfoindex = 0;
        if let Some(info) = perm_info(q, outer) {
            let copy = pg_sys::copyObjectImpl(info.cast()).cast::<pg_sys::RTEPermissionInfo>();
            (*sub).rteperminfos = pg_sys::lappend(std::ptr::null_mut(), copy.cast());
            (*inner).perminfoindex = 1;
        }
        (*outer).perminfoindex = 0;
    }
}

/// PostgreSQL's `query_tree_mutator`.
///
/// # Safety
/// As PostgreSQL's: `q` a valid Query, `ctx` what `mutator` expects.
pub unsafe fn query_tree_mutator(
    q: *mut Query,
    mutator: Mutator,
    ctx: *mut std::ffi::c_void,
    flags: i32,
) -> *mut Query {
    // SAFETY: as the caller promises; the callback's real signature is the
    // one PostgreSQL calls it with (PostgreSQL 15 declares it untyped).
    unsafe {
        #[cfg(feature = "pg15")]
        {
            pg_sys::query_tree_mutator(
                q,
                Some(std::mem::transmute::<
                    Mutator,
                    unsafe extern "C-unwind" fn() -> *mut Node,
                >(mutator)),
                ctx,
                flags,
            )
        }
        #[cfg(not(feature = "pg15"))]
        {
            pg_sys::query_tree_mutator_impl(q, Some(mutator), ctx, flags)
        }
    }
}

/// PostgreSQL's `expression_tree_mutator`.
///
/// # Safety
/// As PostgreSQL's: `node` a valid node, `ctx` what `mutator` expects.
pub unsafe fn expression_tree_mutator(
    node: *mut Node,
    mutator: Mutator,
    ctx: *mut std::ffi::c_void,
) -> *mut Node {
    // SAFETY: as for [`query_tree_mutator`].
    unsafe {
        #[cfg(feature = "pg15")]
        {
            pg_sys::expression_tree_mutator(
                node,
                Some(std::mem::transmute::<
                    Mutator,
                    unsafe extern "C-unwind" fn() -> *mut Node,
                >(mutator)),
                ctx,
            )
        }
        #[cfg(not(feature = "pg15"))]
        {
            pg_sys::expression_tree_mutator_impl(node, Some(mutator), ctx)
        }
    }
}

/// `ALTER TABLE` subcommand `t` without PostgreSQL 15's `*Recurse`
/// variants (the parser's own, which 16 dropped for a flag).
pub fn alter_base(t: pg_sys::AlterTableType::Type) -> pg_sys::AlterTableType::Type {
    #[cfg(feature = "pg15")]
    {
        use pg_sys::AlterTableType as At;
        match t {
            At::AT_AddColumnRecurse => At::AT_AddColumn,
            At::AT_AddConstraintRecurse => At::AT_AddConstraint,
            At::AT_DropColumnRecurse => At::AT_DropColumn,
            At::AT_ValidateConstraintRecurse => At::AT_ValidateConstraint,
            At::AT_DropConstraintRecurse => At::AT_DropConstraint,
            other => other,
        }
    }
    #[cfg(not(feature = "pg15"))]
    {
        t
    }
}

/// Counter functions of this major that a masked session may not call,
/// beside those every major has: PostgreSQL 15's `pg_stat_bgwriter`
/// backend counters (17 moved the rest to `pg_stat_checkpointer` and
/// `pg_stat_io`, whose functions the `pg_stat_get_` prefix refuses).
#[cfg(feature = "pg15")]
pub const VERSION_COUNTERS: &[(u32, &str)] = &[
    (
        pg_sys::F_PG_STAT_GET_BUF_WRITTEN_BACKEND,
        "pg_stat_get_buf_written_backend",
    ),
    (
        pg_sys::F_PG_STAT_GET_BUF_FSYNC_BACKEND,
        "pg_stat_get_buf_fsync_backend",
    ),
    (
        pg_sys::F_PG_STAT_GET_BGWRITER_BUF_WRITTEN_CHECKPOINTS,
        "pg_stat_get_bgwriter_buf_written_checkpoints",
    ),
];

/// Counter functions of this major that a masked session may not call,
/// beside those every major has (the `pg_stat_get_` prefix refuses the
/// rest).
#[cfg(not(feature = "pg15"))]
pub const VERSION_COUNTERS: &[(u32, &str)] = &[];

/// PostgreSQL's array of setting records and its length.
///
/// # Safety
/// Called in a backend's main thread; the array may be re-sorted by a
/// later call that adds a setting.
pub unsafe fn setting_records() -> (*mut *mut pg_sys::config_generic, usize) {
    // SAFETY: as the caller promises.
    unsafe {
        #[cfg(feature = "pg15")]
        {
            let vars = pg_sys::get_guc_variables();
            let n = usize::try_from(pg_sys::GetNumConfigOptions()).unwrap_or(0);
            (vars, n)
        }
        #[cfg(not(feature = "pg15"))]
        {
            let mut n: std::ffi::c_int = 0;
            let vars = pg_sys::get_guc_variables(&mut n);
            (vars, usize::try_from(n).unwrap_or(0))
        }
    }
}

/// The attributes of tuple descriptor `desc`, in column order (dropped
/// ones included). PostgreSQL 18 keeps compact attributes before the full
/// ones, which it reaches through `TupleDescAttr`.
///
/// # Safety
/// `desc` is a valid tuple descriptor; the pointers live as long as it.
pub unsafe fn attributes(desc: pg_sys::TupleDesc) -> Vec<*const pg_sys::FormData_pg_attribute> {
    // SAFETY: as the caller promises; `natts` attributes follow.
    unsafe {
        let natts = usize::try_from((*desc).natts).unwrap_or(0);
        #[cfg(feature = "pg15")]
        {
            (*desc)
                .attrs
                .as_slice(natts)
                .iter()
                .map(|a| a as *const pg_sys::FormData_pg_attribute)
                .collect()
        }
        #[cfg(not(feature = "pg15"))]
        {
            (0..natts)
                .map(|i| {
                    pg_sys::TupleDescAttr(desc, i32::try_from(i).unwrap_or(i32::MAX)).cast_const()
                })
                .collect()
        }
    }
}

/// Whether `COPY rel TO` reads a relation of kind `relkind` itself (rather
/// than refusing it): tables on every major, materialized views from
/// PostgreSQL 18 on. A masked session's `COPY` of such a relation must go
/// through a planned (masked) query. (Built for 16 or 17, which refuse a
/// materialized view themselves, the query would serve it masked.)
pub fn copy_to_reads(relkind: u8) -> bool {
    relkind == pg_sys::RELKIND_RELATION
        || (cfg!(not(feature = "pg15")) && relkind == pg_sys::RELKIND_MATVIEW)
}
