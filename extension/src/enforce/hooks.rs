//! PostgreSQL hooks of masking at the source: the planner hook (the query
//! rewrite of [`super::rewrite`]), the executor-start hook (cached plans),
//! the utility hook (`COPY`, `TRUNCATE`, `EXPLAIN ANALYZE`, settings, code
//! left behind), the statistics hooks (planner estimates, column widths), the
//! object-access and log hooks of [`super::side_channels`] and the cache
//! invalidation callback. Each chains to the hook that was installed
//! before it. Every hook takes the locks of [`crate::pg::locks`] before it
//! reads the masking decision.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};

use pgrx::pg_sys::{self, NodeTag, Oid};
use pgrx::{is_a, pg_guard, PgList};

use crate::enforce::masking;

static mut PREV_PLANNER: pg_sys::planner_hook_type = None;
static mut PREV_UTILITY: pg_sys::ProcessUtility_hook_type = None;
static mut PREV_STATS: pg_sys::get_relation_stats_hook_type = None;
static mut PREV_ATTAVGWIDTH: pg_sys::get_attavgwidth_hook_type = None;
static mut PREV_NEEDS_FMGR: pg_sys::needs_fmgr_hook_type = None;
static mut PREV_FMGR: pg_sys::fmgr_hook_type = None;
static mut PREV_EXECUTOR_START: pg_sys::ExecutorStart_hook_type = None;
static mut PREV_EXECUTOR_RUN: pg_sys::ExecutorRun_hook_type = None;
static mut PREV_RELATION_INFO: pg_sys::get_relation_info_hook_type = None;

thread_local! {
    /// How many invalidations of every relation this backend has accepted:
    /// label changes send those (and so does a reset of the backend's
    /// caches), so a change of this count while a lock is taken means the
    /// masking decision may have changed under a plan already chosen.
    static WIDE_INVALIDATIONS: Cell<u64> = const { Cell::new(0) };
    /// The masking decision of the latest statement planned for each pair
    /// of session roles (login, current). A cached plan that is still
    /// valid was planned under the labels in force now (a label change
    /// invalidates every plan), hence under this decision.
    static PLANNED_MASKED: RefCell<HashMap<(u32, u32), bool>> = RefCell::new(HashMap::new());
}

/// The session's (login role, current role), as a key of `PLANNED_MASKED`.
fn roles_key() -> (u32, u32) {
    let (login, current) = crate::pg::catalog::session_roles();
    (login.to_u32(), current.to_u32())
}

/// Installs the hooks; called once from `_PG_init`.
pub fn install() {
    // SAFETY: `_PG_init` runs once per process in its main thread, before
    // any query; the previous hooks are saved and called in turn, as every
    // PostgreSQL extension chains them. The callbacks are a valid
    // `RelcacheCallbackFunction`, `XactCallback` and `SubXactCallback`
    // that live as long as the process and touch no PostgreSQL state.
    unsafe {
        PREV_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(planner);
        PREV_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(utility);
        PREV_STATS = pg_sys::get_relation_stats_hook;
        pg_sys::get_relation_stats_hook = Some(relation_stats);
        PREV_ATTAVGWIDTH = pg_sys::get_attavgwidth_hook;
        pg_sys::get_attavgwidth_hook = Some(attavgwidth);
        PREV_NEEDS_FMGR = pg_sys::needs_fmgr_hook;
        pg_sys::needs_fmgr_hook = Some(needs_fmgr);
        PREV_FMGR = pg_sys::fmgr_hook;
        pg_sys::fmgr_hook = Some(fmgr);
        PREV_EXECUTOR_START = pg_sys::ExecutorStart_hook;
        pg_sys::ExecutorStart_hook = Some(executor_start);
        PREV_EXECUTOR_RUN = pg_sys::ExecutorRun_hook;
        pg_sys::ExecutorRun_hook = Some(executor_run);
        PREV_RELATION_INFO = pg_sys::get_relation_info_hook;
        pg_sys::get_relation_info_hook = Some(relation_info);
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0));
        pg_sys::RegisterXactCallback(Some(xact_ended), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(subxact_ended), std::ptr::null_mut());
    }
    super::side_channels::install();
}

/// A transaction's end: on abort, this backend's copy of served store
/// entries is forgotten ([`crate::store::forget_served`]).
#[pg_guard]
unsafe extern "C-unwind" fn xact_ended(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::XactEvent::XACT_EVENT_ABORT
        || event == pg_sys::XactEvent::XACT_EVENT_PARALLEL_ABORT
    {
        crate::store::forget_served();
    }
    if matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE
    ) && !crate::pg::lookup::in_lookup()
        && crate::pg::settings::client_takes_debug()
        && crate::session::session_is_masked()
    {
        // A transaction that turned DEBUG messages on (`SET LOCAL`, or
        // `set_config` in a statement planned before it took effect) does
        // not commit: it ends refused, and the setting goes with it.
        refuse_debug_messages();
    }
    if matches!(
        event,
        pg_sys::XactEvent::XACT_EVENT_ABORT
            | pg_sys::XactEvent::XACT_EVENT_COMMIT
            | pg_sys::XactEvent::XACT_EVENT_PREPARE
    ) {
        super::side_channels::forget_foreign_reads();
    }
}

/// A subtransaction's end: on abort, as [`xact_ended`].
#[pg_guard]
unsafe extern "C-unwind" fn subxact_ended(
    event: pg_sys::SubXactEvent::Type,
    _my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        crate::store::forget_served();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, relid: Oid) {
    // Labels change rarely and a relation's rules depend on its ancestors
    // and descendants, so any invalidation drops every cached decision.
    if relid == Oid::INVALID {
        WIDE_INVALIDATIONS.with(|n| n.set(n.get().wrapping_add(1)));
    }
    masking::invalidate();
    crate::recognizers::invalidate();
    crate::store::invalidate();
    crate::vocabularies::invalidate();
}

#[pg_guard]
unsafe extern "C-unwind" fn planner(
    parse: *mut pg_sys::Query,
    query_string: *const c_char,
    cursor_options: c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    if !crate::pg::lookup::in_lookup() {
        // A role label cannot change until this transaction ends, and one
        // that committed while the lock was awaited is read now.
        crate::pg::locks::lock_session_roles();
        let session_masked = crate::session::session_is_masked();
        PLANNED_MASKED.with(|p| p.borrow_mut().insert(roles_key(), session_masked));
        if session_masked {
            refuse_debug_messages();
        }
        // SAFETY: `parse` is the rewritten query the planner was called
        // with; the planner may modify it.
        unsafe {
            let survey = super::rewrite::survey(parse, session_masked);
            if session_masked || survey.reads_as_masked_role() {
                survey.refuse_transaction_columns(session_masked);
                if crate::guc::deny_unlabelled_text() {
                    survey.refuse_unlabelled_text(session_masked);
                }
                let policies = survey.policies(session_masked);
                if session_masked && policies.values().any(|p| p.protects()) {
                    masking::refuse_raised_settings();
                }
                // A query without labelled relations still goes through
                // the rewrite when it calls dptext.mask: Citus runs the
                // rest of a distributed query, over the masked results of
                // its parts, as SQL text that repeats the calls.
                if !policies.is_empty() || survey.calls_mask {
                    if session_masked
                        && in_foreign_key_check()
                        && policies.values().any(|p| p.protects())
                    {
                        // A foreign-key check compares raw keys: masked it
                        // would break integrity, unmasked it would be an
                        // oracle for raw values. Neither: refuse.
                        crate::error::refuse(
                            "a foreign-key check that reads a labelled table cannot run in a masked session".into(),
                        );
                    }
                    if super::rewrite::rewrite(parse, &policies, session_masked) > 0 {
                        let _ = super::mask::require_key();
                    }
                }
            }
        }
    }
    // SAFETY: the previous hook, or the standard planner, with the
    // arguments PostgreSQL passed.
    let stmt = unsafe {
        match PREV_PLANNER {
            Some(prev) => prev(parse, query_string, cursor_options, bound_params),
            None => pg_sys::standard_planner(parse, query_string, cursor_options, bound_params),
        }
    };
    // A cached plan is reused only by the role it was planned for: the
    // same statement is masked for one role and not for another.
    // SAFETY: the planner returns a valid PlannedStmt.
    unsafe { (*stmt).dependsOnRole = true };
    stmt
}

/// The executor-start hook: a plan cached earlier (a prepared statement,
/// PL/pgSQL, SQL functions) starts without the planner hook, so its
/// transaction takes the role locks here (see [`crate::pg::locks`]). Taking
/// them accepts pending invalidations; if that brings an invalidation of
/// every relation (what a label change sends) and the session is masked
/// now but the plan was not planned masked, the plan was chosen under the
/// old labels: the statement is refused, and runs again re-planned. (The
/// transaction held no lock on its roles yet, as it had planned nothing,
/// but it had locked the plan's relations some other way, so validating
/// the plan accepted no invalidation.)
#[pg_guard]
unsafe extern "C-unwind" fn executor_start(query_desc: *mut pg_sys::QueryDesc, eflags: c_int) {
    if !crate::pg::lookup::in_lookup() {
        let seen = WIDE_INVALIDATIONS.with(Cell::get);
        crate::pg::locks::lock_session_roles();
        if WIDE_INVALIDATIONS.with(Cell::get) != seen
            && PLANNED_MASKED.with(|p| p.borrow().get(&roles_key()).copied()) != Some(true)
            && crate::session::session_is_masked()
        {
            crate::error::refuse(
                "this session became masked after the statement was planned (a dptext label changed): run it again".into(),
            );
        }
        if crate::session::session_is_masked() {
            // Here, not in the planner: every plan that runs starts here,
            // one cached before the transaction began too.
            refuse_serializable();
            refuse_debug_messages();
            // SAFETY: the executor passes a valid QueryDesc whose plannedstmt
            // it is about to run.
            let foreign =
                unsafe { super::side_channels::note_foreign_reads((*query_desc).plannedstmt) };
            if foreign && eflags & pg_sys::EXEC_FLAG_EXPLAIN_ONLY as c_int != 0 {
                // A wrapper's EXPLAIN reports what it read the raw values
                // from (file_fdw: the file's size to the byte).
                crate::error::refuse(
                    "masked sessions cannot EXPLAIN a query that reads a foreign table with dptext rules: the wrapper reports figures of the raw data (a file's size)".into(),
                );
            }
        }
    }
    // SAFETY: the previous hook, or the standard one, with the arguments
    // PostgreSQL passed.
    unsafe {
        match PREV_EXECUTOR_START {
            Some(prev) => prev(query_desc, eflags),
            None => pg_sys::standard_ExecutorStart(query_desc, eflags),
        }
    }
}

/// The executor-run hook: in a masked session, the plan runs under
/// [`super::side_channels::run_masked`], which raises its errors again
/// without their details before a PL/pgSQL handler can read them.
#[cfg(feature = "pg15")]
#[pg_guard]
unsafe extern "C-unwind" fn executor_run(
    query_desc: *mut pg_sys::QueryDesc,
    direction: pg_sys::ScanDirection::Type,
    count: u64,
    execute_once: bool,
) {
    // SAFETY: the previous hook, or the standard one, with the arguments
    // PostgreSQL passed.
    let run = || unsafe {
        match PREV_EXECUTOR_RUN {
            Some(prev) => prev(query_desc, direction, count, execute_once),
            None => pg_sys::standard_ExecutorRun(query_desc, direction, count, execute_once),
        }
    };
    run_for_session(run);
}

/// The executor-run hook (PostgreSQL 18's signature): as above.
#[cfg(feature = "pg18")]
#[pg_guard]
unsafe extern "C-unwind" fn executor_run(
    query_desc: *mut pg_sys::QueryDesc,
    direction: pg_sys::ScanDirection::Type,
    count: u64,
) {
    // SAFETY: the previous hook, or the standard one, with the arguments
    // PostgreSQL passed.
    let run = || unsafe {
        match PREV_EXECUTOR_RUN {
            Some(prev) => prev(query_desc, direction, count),
            None => pg_sys::standard_ExecutorRun(query_desc, direction, count),
        }
    };
    run_for_session(run);
}

/// Runs the executor as the session's masking asks: plainly, or under
/// [`super::side_channels::run_masked`].
fn run_for_session(run: impl FnOnce()) {
    if crate::session::session_is_masked_cached() == Some(false) {
        run();
    } else {
        super::side_channels::run_masked(run);
        refuse_debug_messages_turned_on();
    }
}

/// True inside PostgreSQL's foreign-key checks, the only code that runs
/// queries with `SECURITY_NOFORCE_RLS`.
fn in_foreign_key_check() -> bool {
    let mut user = Oid::INVALID;
    let mut context: c_int = 0;
    // SAFETY: writes the backend's current user and security context into
    // the two locals.
    unsafe { pg_sys::GetUserIdAndSecContext(&mut user, &mut context) };
    context & pg_sys::SECURITY_NOFORCE_RLS as c_int != 0
}

#[pg_guard]
unsafe extern "C-unwind" fn relation_stats(
    root: *mut pg_sys::PlannerInfo,
    rte: *mut pg_sys::RangeTblEntry,
    attnum: pg_sys::AttrNumber,
    vardata: *mut pg_sys::VariableStatData,
) -> bool {
    // SAFETY: PostgreSQL passes a valid range-table entry and stats slot.
    unsafe {
        if !crate::pg::lookup::in_lookup()
            && (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
            && attnum > 0
            && crate::session::session_is_masked()
            && !super::visibility::column_statistics_visible((*rte).relid, attnum)
        {
            // Handled: no statistics, so estimates for a labelled column
            // are the planner's defaults, not the raw column's.
            (*vardata).statsTuple = std::ptr::null_mut();
            (*vardata).freefunc = None;
            return true;
        }
        match PREV_STATS {
            Some(prev) => prev(root, rte, attnum, vardata),
            None => false,
        }
    }
}

/// The planner's view of a relation it reads (`get_relation_info`): when
/// the read is masked (a masked session, or a view owned by a masked
/// role), every index that reads a labelled column, by a key, an
/// expression or its predicate, is taken out of the planner's list. An
/// index scan returns rows in the order of its keys and a partial index
/// holds the rows its predicate chose, both functions of raw values; the
/// scan that reads a labelled table is then a sequential, bitmap or index
/// scan over unlabelled columns only.
#[pg_guard]
unsafe extern "C-unwind" fn relation_info(
    root: *mut pg_sys::PlannerInfo,
    relid: Oid,
    inhparent: bool,
    rel: *mut pg_sys::RelOptInfo,
) {
    // SAFETY: the previous hook, with the arguments PostgreSQL passed.
    if let Some(prev) = unsafe { PREV_RELATION_INFO } {
        unsafe { prev(root, relid, inhparent, rel) };
    }
    // SAFETY: PostgreSQL passes a valid planner state and relation; the
    // entry `rel.relid` of the planner's range-table array is the one the
    // relation is read as; `indexlist` holds IndexOptInfo nodes; emptying
    // `statlist` (a List the planner only reads) leaves no statistics.
    unsafe {
        if crate::pg::lookup::in_lookup()
            || ((*rel).indexlist.is_null() && (*rel).statlist.is_null())
        {
            return;
        }
        // `userid`: the role the relation's privileges are checked as
        // (a view owner's), set before this hook on every major.
        let masked = crate::session::session_is_masked()
            || ((*rel).userid != Oid::INVALID && crate::session::role_is_masked((*rel).userid));
        if !masked {
            return;
        }
        if masking::masked_inheritance_child(relid) {
            // Extended statistics on a routed child's unlabelled columns
            // (its MCV lists of ward and id, say) would give per-child
            // estimates that tell which child holds each row.
            (*rel).statlist = std::ptr::null_mut();
        } else if !(*rel).statlist.is_null() {
            // Statistics on expressions over an owner's function (one that
            // looks a labelled column up) summarise raw values of another
            // table: their estimates are not used.
            let mut kept = PgList::<pg_sys::StatisticExtInfo>::new();
            for info in PgList::<pg_sys::StatisticExtInfo>::from_pg((*rel).statlist).iter_ptr() {
                if !crate::pg::catalog::calls_owner_code((*info).exprs.cast()) {
                    kept.push(info);
                }
            }
            (*rel).statlist = kept.into_pg();
        }
        let mut kept = PgList::<pg_sys::IndexOptInfo>::new();
        let mut dropped = false;
        for index in PgList::<pg_sys::IndexOptInfo>::from_pg((*rel).indexlist).iter_ptr() {
            if masking::index_reads_protected((*index).indexoid) {
                dropped = true;
            } else {
                kept.push(index);
            }
        }
        if dropped {
            (*rel).indexlist = kept.into_pg();
        }
    }
}

/// The planner's width of a column (`get_attavgwidth`, which prices the
/// rows a plan node carries and `EXPLAIN` shows as `width=`): PostgreSQL
/// reads it from `pg_statistic.stawidth`, the raw values' average length,
/// unless this hook returns a positive width. In a masked session a
/// labelled column's width is its type's default (what the planner uses
/// for a column without statistics), never its statistics'.
#[pg_guard]
unsafe extern "C-unwind" fn attavgwidth(relid: Oid, attnum: pg_sys::AttrNumber) -> i32 {
    if !crate::pg::lookup::in_lookup()
        && attnum > 0
        && crate::session::session_is_masked_cached() != Some(false)
        && crate::session::session_is_masked()
        && !super::visibility::column_statistics_visible(relid, attnum)
    {
        let (typ, typmod, _) = crate::pg::catalog::attribute_type(relid, attnum);
        // SAFETY: a syscache read of the column's type, which exists (the
        // relation is locked by the query being planned).
        let width = unsafe { pg_sys::get_typavgwidth(typ, typmod) };
        // Zero would make PostgreSQL read the statistics: at least 1.
        return width.max(1);
    }
    // SAFETY: the previous hook, with the arguments PostgreSQL passed.
    match unsafe { PREV_ATTAVGWIDTH } {
        Some(prev) => unsafe { prev(relid, attnum) },
        None => 0,
    }
}

/// The planner inlines SQL functions (set-returning ones in `FROM` among
/// them) *after* the planner hook: a body such as `SELECT note FROM t`
/// would then be planned unmasked. PostgreSQL never inlines a function for
/// which a plugin asks for the function-manager hook, so a masked session
/// asks for it on every function that is not built in: such functions run
/// as calls, and their queries are planned, and masked, on their own.
/// (The call goes through PostgreSQL's wrapper, which runs the function as
/// it is, and calls [`fmgr`] as it starts.)
#[pg_guard]
unsafe extern "C-unwind" fn needs_fmgr(fn_oid: Oid) -> bool {
    // SAFETY: the previous hook, with the argument PostgreSQL passed.
    if let Some(prev) = unsafe { PREV_NEEDS_FMGR } {
        if unsafe { prev(fn_oid) } {
            return true;
        }
    }
    if fn_oid.to_u32() < pg_sys::FirstNormalObjectId || crate::pg::lookup::in_lookup() {
        return false;
    }
    // fmgr_info also runs outside transactions (start-up, clean-up), where
    // the catalog cannot be read: then only a decision already made counts.
    // SAFETY: reads the transaction state.
    match crate::session::session_is_masked_cached() {
        Some(masked) => masked,
        None if unsafe { pg_sys::IsTransactionState() } => crate::session::session_is_masked(),
        None => false,
    }
}

/// The function-manager hook: as a function that is not built in starts
/// (its `SET` clause applied, see [`needs_fmgr`]), a masked session's
/// call is refused while it would take DEBUG messages: `SET
/// client_min_messages = debug5` on a function holds only inside the call,
/// after the statement's own checks, and a body that plans nothing (a
/// block, an `EXCEPTION` handler) would run under it.
#[pg_guard]
unsafe extern "C-unwind" fn fmgr(
    event: pg_sys::FmgrHookEventType::Type,
    flinfo: *mut pg_sys::FmgrInfo,
    arg: *mut pg_sys::Datum,
) {
    if event == pg_sys::FmgrHookEventType::FHET_START
        && crate::pg::settings::client_takes_debug()
        && !crate::pg::lookup::in_lookup()
        && crate::session::session_is_masked_cached() == Some(true)
    {
        refuse_debug_messages();
    }
    // SAFETY: the previous hook, with the arguments PostgreSQL passed.
    if let Some(prev) = unsafe { PREV_FMGR } {
        unsafe { prev(event, flinfo, arg) };
    }
}

#[allow(clippy::too_many_arguments)]
#[pg_guard]
unsafe extern "C-unwind" fn utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    let mut pstmt = pstmt;
    // Transaction control is neither checked nor locked: nothing in it
    // depends on masking, and ROLLBACK runs in an aborted transaction,
    // where the catalog (the role labels, when an invalidation dropped
    // their cache) cannot be read.
    // SAFETY: `pstmt` is the valid statement PostgreSQL passed.
    let transaction_control = unsafe { is_a((*pstmt).utilityStmt, NodeTag::T_TransactionStmt) };
    if !crate::pg::lookup::in_lookup() && !transaction_control {
        crate::pg::locks::lock_session_roles();
    }
    // SAFETY: as above.
    let sets = unsafe {
        is_a((*pstmt).utilityStmt, NodeTag::T_VariableSetStmt)
            || is_a((*pstmt).utilityStmt, NodeTag::T_VariableShowStmt)
    };
    if !crate::pg::lookup::in_lookup()
        && !sets
        && !transaction_control
        && crate::session::session_is_masked()
    {
        // (Not transaction control: a ROLLBACK must run, and a transaction
        // whose other statements were refused has no ID to show.)
        refuse_debug_messages();
    }
    if !crate::pg::lookup::in_lookup()
        && !transaction_control
        && crate::session::session_is_masked()
    {
        // SAFETY: `pstmt` is a valid utility statement; when the tree is
        // read-only it is copied before `check_utility` changes it.
        unsafe {
            if read_only_tree {
                pstmt = pg_sys::copyObjectImpl(pstmt.cast()).cast();
            }
            check_utility((*pstmt).utilityStmt);
        }
    }
    // SAFETY: the previous hook, or the standard one, with the arguments
    // PostgreSQL passed (the tree is ours now if it was copied).
    unsafe {
        match PREV_UTILITY {
            Some(prev) => prev(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
            None => pg_sys::standard_ProcessUtility(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        }
    }
    if !transaction_control && !crate::pg::lookup::in_lookup() {
        refuse_debug_messages_turned_on();
    }
}

/// The relation a `RangeVar` names, locked as the command will lock it,
/// with the `RangeVar` pinned to it (schema-qualified) so that the command
/// resolves the same relation; none when it does not exist (the command
/// then fails as it would without dptext).
unsafe fn lock_and_pin(rv: *mut pg_sys::RangeVar, lockmode: u32) -> Option<Oid> {
    // SAFETY: `rv` is a valid RangeVar of a statement we may modify (the
    // hook copied a read-only tree); missing_ok. Holding the lock until the
    // end of the transaction keeps the relation from being renamed or
    // dropped, so the pinned name cannot come to mean another relation.
    unsafe {
        let relid = pg_sys::RangeVarGetRelidExtended(
            rv,
            lockmode as _,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        );
        if relid == Oid::INVALID {
            return None;
        }
        if (*rv).relpersistence != pg_sys::RELPERSISTENCE_TEMP as c_char {
            (*rv).schemaname = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        }
        Some(relid)
    }
}

/// Refuses a masked session's statements in a SERIALIZABLE transaction:
/// whether its read fails with a serialization failure (40001) tells
/// whether an owner's SERIALIZABLE transaction read, by a filter on raw
/// values, a row another transaction wrote (its predicate locks follow the
/// rows the filter chose).
fn refuse_serializable() {
    // SAFETY: a backend global, read in the backend's own thread.
    let level = unsafe { pg_sys::XactIsoLevel };
    if level == pg_sys::XACT_SERIALIZABLE as c_int {
        crate::error::refuse(
            "masked sessions cannot run SERIALIZABLE transactions: a serialization failure would tell which rows another transaction chose by raw values (use REPEATABLE READ; check default_transaction_isolation)".into(),
        );
    }
}

/// After a masked session's statement (or a statement a function runs)
/// has run: refuses it when it turned DEBUG messages on (`set_config` in a
/// query, `SET`, `SET LOCAL`), so that it ends in an error and the setting
/// is undone with its transaction before any later statement, or the
/// commit, sends one.
fn refuse_debug_messages_turned_on() {
    if crate::session::session_is_masked_cached() == Some(true)
        && crate::pg::settings::client_takes_debug()
    {
        refuse_debug_messages();
    }
}

/// Refuses a masked session's statement while it takes DEBUG messages
/// (`client_min_messages = debug1` to `debug5`, by `SET`, `set_config` or
/// a start-up option): PostgreSQL sends them to the client without the log
/// hook when the server log does not take them, and they carry transaction
/// IDs (`CommitTransaction ... xid`), the counter other sessions' writes
/// step, and executor internals. Checked where statements are planned,
/// where every plan starts (one cached earlier too), after every executor
/// run and utility statement ([`refuse_debug_messages_turned_on`]), as a
/// function that is not built in starts ([`fmgr`]) and before a commit (a
/// transaction that raised it does not commit, so the setting goes with
/// it). `SET` and `SHOW` still run, so that the session can lower it.
/// Also refuses while `log_min_messages` is above
/// `error`: the log hook that takes the details out of masked sessions'
/// messages runs only for what the server log takes.
fn refuse_debug_messages() {
    if crate::pg::settings::client_takes_debug() {
        crate::error::refuse(
            "masked sessions cannot receive DEBUG messages (they carry transaction IDs and executor internals): SET client_min_messages = notice".into(),
        );
    }
    // SAFETY: a GUC's C variable, read in the backend's own thread.
    let log_level = unsafe { pg_sys::log_min_messages };
    if log_level > pgrx::PgLogLevel::ERROR as c_int {
        // dptext takes the details out of masked sessions' errors in the
        // log hook, which PostgreSQL calls only for what the log takes.
        crate::error::refuse(
            "masked sessions need log_min_messages at error or below (the default is warning): dptext withholds the details of their errors as the server logs them".into(),
        );
    }
}

/// Refuses a statement that would leave code of the masked session behind
/// for other sessions to run (a trigger, rule, policy, function, view or
/// column default runs as the role that calls it, unmasked for an
/// unmasked caller); on this session's temporary objects it is allowed.
fn refuse_planted(what: &str) -> ! {
    crate::error::refuse(format!(
        "masked sessions cannot create or change {what} outside their temporary schema: other sessions would run it unmasked"
    ))
}

/// A masked session's utility statements: no writes to labelled tables,
/// `COPY t TO` read through the rules, no change to `dptext.*` settings,
/// no `EXPLAIN ANALYZE`, no code left behind for other sessions.
unsafe fn check_utility(stmt: *mut pg_sys::Node) {
    // SAFETY: `stmt` is a valid parse node; casts follow tag checks.
    unsafe {
        if sets_client_messages(stmt) {
            // Its SET clause would hold inside each call, after the
            // statement's checks: the function-manager hook refuses such a
            // call as the function starts, but the language's library is
            // looked up before that, under the function's setting.
            crate::error::refuse(
                "masked sessions cannot create or alter a function that sets client_min_messages: it would take DEBUG messages inside its calls".into(),
            );
        }
        if is_a(stmt, NodeTag::T_ListenStmt) {
            // Notifications are sent by other sessions' code: an owner's
            // trigger with a row's raw values as payload (a realtime
            // trigger, contrib's tcn naming the rows a statement wrote).
            crate::error::refuse(
                "masked sessions cannot LISTEN: notifications carry what other sessions' triggers send, raw values among them".into(),
            );
        }
        if is_a(stmt, NodeTag::T_CopyStmt) {
            let copy = stmt.cast::<pg_sys::CopyStmt>();
            if (*copy).relation.is_null() {
                return; // COPY (query) TO: planned, so masked there
            }
            let lock = if (*copy).is_from {
                pg_sys::RowExclusiveLock
            } else {
                pg_sys::AccessShareLock
            };
            let Some(relid) = lock_and_pin((*copy).relation, lock) else {
                return;
            };
            if (*copy).is_from {
                if masking::writes_denied(relid) {
                    masking::refuse_denied_write(relid);
                }
                if masking::relation_policy(relid).protects() {
                    masking::refuse_write(relid);
                }
                return;
            }
            // `COPY t TO` reads without the planner, so every `COPY t TO`
            // of a masked session goes through a query: the planner hook
            // then applies all it applies to a read (the rules, the
            // refusal of families placed by raw values or an owner's code,
            // the filters of pg_class, pg_index, pg_rewrite and the
            // statistics, deny by default).
            copy_through_query(copy, relid);
        } else if is_a(stmt, NodeTag::T_TruncateStmt) {
            let t = stmt.cast::<pg_sys::TruncateStmt>();
            if (*t).behavior == pg_sys::DropBehavior::DROP_CASCADE {
                crate::error::refuse("masked sessions cannot TRUNCATE ... CASCADE".into());
            }
            for rv in PgList::<pg_sys::RangeVar>::from_pg((*t).relations).iter_ptr() {
                if let Some(relid) = lock_and_pin(rv, pg_sys::AccessExclusiveLock) {
                    if masking::relation_policy(relid).protects() {
                        masking::refuse_write(relid);
                    }
                }
            }
        } else if is_a(stmt, NodeTag::T_VariableSetStmt) {
            refuse_dptext_setting((*stmt.cast::<pg_sys::VariableSetStmt>()).name);
        } else if is_a(stmt, NodeTag::T_AlterSystemStmt) {
            // A role granted ALTER SYSTEM on a dptext setting would change
            // it for the whole cluster from a masked session.
            let set = (*stmt.cast::<pg_sys::AlterSystemStmt>()).setstmt;
            if !set.is_null() {
                refuse_dptext_setting((*set).name);
            }
        } else if is_a(stmt, NodeTag::T_AlterRoleSetStmt)
            || is_a(stmt, NodeTag::T_AlterDatabaseSetStmt)
        {
            // The defaults an administrator set for a masked role (a key
            // file, max_parallel_workers_per_gather = 0, work_mem) are
            // part of its masking: `ALTER ROLE self RESET ALL` or `SET x
            // FROM CURRENT` would take them away from its next sessions.
            crate::error::refuse(
                "masked sessions cannot change role or database defaults (ALTER ROLE/DATABASE ... SET or RESET): an administrator sets them".into(),
            );
        } else if is_a(stmt, NodeTag::T_GrantStmt)
            || is_a(stmt, NodeTag::T_GrantRoleStmt)
            || is_a(stmt, NodeTag::T_DropOwnedStmt)
            || is_a(stmt, NodeTag::T_ReassignOwnedStmt)
            || is_a(stmt, NodeTag::T_AlterRoleStmt)
        {
            // Any role may GRANT or REVOKE on what PUBLIC holds (a no-op
            // that only warns), DROP OWNED BY itself or change its own
            // password: each rewrites a catalog row (pg_proc, pg_class,
            // pg_namespace...) that PUBLIC reads, whose `xmin` is then the
            // transaction counter other sessions' writes step.
            crate::error::refuse(
                "masked sessions cannot GRANT, REVOKE, DROP or REASSIGN OWNED, or ALTER ROLE: each rewrites a catalog row whose transaction ID shows the cluster's counter, which other sessions' writes step".into(),
            );
        } else if is_a(stmt, NodeTag::T_AlterDefaultPrivilegesStmt) {
            // The one catalog write any role may make without a privilege:
            // its row in pg_default_acl, which PUBLIC reads, carries a new
            // OID and the statement's transaction ID, the counters an
            // owner's writes step (a rolled-back UPDATE takes an ID only
            // when its raw-value filter matched a row).
            crate::error::refuse(
                "masked sessions cannot ALTER DEFAULT PRIVILEGES: the row it writes shows the cluster's transaction and OID counters, which other sessions' writes step".into(),
            );
        } else if let Some(options) = maintenance_options(stmt) {
            // VACUUM (VERBOSE) of the session's own temporary table prints
            // the cluster's next transaction and multixact IDs (`removable
            // cutoff`, `new relminmxid`), counters an owner's write steps
            // only when its raw-value filter matched; the report is INFO,
            // which reaches the client without the log hook.
            if has_option(options, "verbose") {
                crate::error::refuse(
                    "masked sessions cannot run VACUUM, ANALYZE, CLUSTER or REINDEX with VERBOSE: the report names the cluster's transaction and multixact counters, which other sessions' writes step".into(),
                );
            }
        } else if is_a(stmt, NodeTag::T_ExplainStmt) {
            if super::side_channels::explain_analyzes(stmt.cast()) {
                crate::error::refuse(
                    "masked sessions cannot run EXPLAIN ANALYZE: the memory, disk and buffer figures it reports depend on the raw values that sorts, hashes and reads handle below the masking (EXPLAIN without ANALYZE is allowed)".into(),
                );
            }
        } else if let Some(what) = super::ddl::leaves_code(stmt) {
            refuse_planted(what);
        }
        // A foreign key onto a labelled table: its checks compare raw keys
        // (refused when this session runs them), and its ON UPDATE/DELETE
        // actions, run by the owner's writes in the owner's session, copy
        // raw values into the referencing table (CASCADE) or delete the
        // rows whose guessed key the owner deleted; NOT VALID skips the
        // check that would refuse it. Refused whatever its actions.
        for rv in super::ddl::referenced_tables(stmt) {
            let relid = super::ddl::relation_named(rv);
            if relid != Oid::INVALID && masking::relation_policy(relid).protects() {
                crate::error::refuse(format!(
                    "masked sessions cannot create a foreign key that references {}, which has dptext rules: its checks and cascades would run on raw values",
                    crate::pg::catalog::relation_name(relid)
                ));
            }
        }
    }
}

/// Whether `stmt` creates or alters a function or procedure with a `SET
/// client_min_messages` clause.
///
/// # Safety
/// `stmt` is a valid parse node.
unsafe fn sets_client_messages(stmt: *mut pg_sys::Node) -> bool {
    // SAFETY: as the caller promises; each cast follows its tag check, and
    // a `set` option's argument is a VariableSetStmt (the grammar's).
    unsafe {
        let options = if is_a(stmt, NodeTag::T_CreateFunctionStmt) {
            (*stmt.cast::<pg_sys::CreateFunctionStmt>()).options
        } else if is_a(stmt, NodeTag::T_AlterFunctionStmt) {
            (*stmt.cast::<pg_sys::AlterFunctionStmt>()).actions
        } else {
            return false;
        };
        PgList::<pg_sys::DefElem>::from_pg(options)
            .iter_ptr()
            .any(|d| {
                let arg = (*d).arg;
                !(*d).defname.is_null()
                    && CStr::from_ptr((*d).defname).to_bytes() == b"set"
                    && !arg.is_null()
                    && is_a(arg, NodeTag::T_VariableSetStmt)
                    && {
                        let name = (*arg.cast::<pg_sys::VariableSetStmt>()).name;
                        !name.is_null()
                            && CStr::from_ptr(name)
                                .to_bytes()
                                .eq_ignore_ascii_case(b"client_min_messages")
                    }
            })
    }
}

/// The options of a maintenance statement (`VACUUM`, `ANALYZE`,
/// `CLUSTER`, `REINDEX`), as `DefElem`s; none for any other statement.
///
/// # Safety
/// `stmt` is a valid parse node.
unsafe fn maintenance_options(stmt: *mut pg_sys::Node) -> Option<*mut pg_sys::List> {
    // SAFETY: as the caller promises; each cast follows its tag check.
    unsafe {
        if is_a(stmt, NodeTag::T_VacuumStmt) {
            Some((*stmt.cast::<pg_sys::VacuumStmt>()).options)
        } else if is_a(stmt, NodeTag::T_ClusterStmt) {
            Some((*stmt.cast::<pg_sys::ClusterStmt>()).params)
        } else if is_a(stmt, NodeTag::T_ReindexStmt) {
            Some((*stmt.cast::<pg_sys::ReindexStmt>()).params)
        } else {
            None
        }
    }
}

/// Whether `options` (a list of `DefElem`) names option `name`, whatever
/// its value.
///
/// # Safety
/// `options` is NIL or a valid list of `DefElem` nodes.
unsafe fn has_option(options: *mut pg_sys::List, name: &str) -> bool {
    // SAFETY: as the caller promises; option names are NUL-terminated.
    unsafe {
        PgList::<pg_sys::DefElem>::from_pg(options)
            .iter_ptr()
            .any(|d| {
                !(*d).defname.is_null()
                    && CStr::from_ptr((*d).defname)
                        .to_bytes()
                        .eq_ignore_ascii_case(name.as_bytes())
            })
    }
}

unsafe fn refuse_dptext_setting(name: *const c_char) {
    if name.is_null() {
        return;
    }
    // SAFETY: a NUL-terminated setting name from the parse tree.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    if name.to_ascii_lowercase().starts_with("dptext.") {
        crate::error::refuse(format!("masked sessions cannot change {name}"));
    }
}

/// Turns `COPY t [(cols)] TO ...` into `COPY (SELECT cols FROM ONLY
/// schema.t) TO ...` (the relation already locked and resolved), which the
/// planner hook masks like any query.
unsafe fn copy_through_query(copy: *mut pg_sys::CopyStmt, relid: Oid) {
    // SAFETY: `copy` is a valid CopyStmt we may modify; `raw_parser`
    // returns a list of RawStmt for a valid SELECT; names are quoted with
    // PostgreSQL's own `quote_identifier`.
    unsafe {
        if !crate::pg::version::copy_to_reads(crate::pg::catalog::relkind(relid)) {
            return; // COPY TO refuses this kind by itself
        }
        let cols: Vec<String> = if (*copy).attlist.is_null() {
            vec!["*".to_string()]
        } else {
            PgList::<pg_sys::String>::from_pg((*copy).attlist)
                .iter_ptr()
                .map(|s| quote(CStr::from_ptr((*s).sval)))
                .collect()
        };
        let nsp = CStr::from_ptr(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid)));
        let rel = CStr::from_ptr(pg_sys::get_rel_name(relid));
        let sql = format!(
            "SELECT {} FROM ONLY {}.{}",
            cols.join(", "),
            quote(nsp),
            quote(rel)
        );
        let Ok(csql) = std::ffi::CString::new(sql) else {
            crate::error::refuse("a relation name holds a NUL byte".into());
        };
        let parsed = PgList::<pg_sys::RawStmt>::from_pg(pg_sys::raw_parser(
            csql.as_ptr(),
            pg_sys::RawParseMode::RAW_PARSE_DEFAULT,
        ));
        let Some(raw) = parsed.get_ptr(0) else {
            crate::error::refuse("COPY could not be rewritten for masking".into());
        };
        (*copy).query = (*raw).stmt;
        (*copy).relation = std::ptr::null_mut();
        (*copy).attlist = std::ptr::null_mut();
    }
}

fn quote(ident: &CStr) -> String {
    // SAFETY: quote_identifier reads a NUL-terminated string and returns
    // either it or a palloc'd quoted copy, NUL-terminated.
    unsafe { CStr::from_ptr(pg_sys::quote_identifier(ident.as_ptr())) }
        .to_string_lossy()
        .into_owned()
}
