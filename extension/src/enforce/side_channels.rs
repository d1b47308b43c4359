//! Figures that depend on the sizes of raw values, kept from masked
//! sessions.
//!
//! `dptext.mask` runs where a labelled column is read, but a plan moves
//! and stores rows below the expressions that read them: a sort or a hash
//! holds the raw value (its input row carries the column), a read
//! detoasts it, a sort that does not fit in `work_mem` writes it to a
//! temporary file. So every figure of memory, disk or buffers a statement
//! used is a function of the raw values' sizes (a sort of one row, the
//! row's length within a few bytes). A masked session may not see them:
//!
//! - `EXPLAIN ANALYZE` reports them per plan node: refused (the utility
//!   hook, with [`explain_analyzes`]);
//! - the cumulative statistics count them (`pg_stat_database.temp_bytes`,
//!   block counters, `pg_stat_statements`, the tuples fetched from a
//!   TOAST index, ...), so do file sizes, and `currtid2` follows rows by
//!   their place: calling the functions that
//!   read those counters is refused ([`install`]'s object-access hook,
//!   when the executor sets a call up, so views and every path that
//!   evaluates an expression are covered, planned or not);
//! - server log messages (`trace_sort`'s memory figures, `auto_explain`,
//!   `log_temp_files`) reach a client whose `client_min_messages` is `log`
//!   or lower: in a masked session they go to the server log only
//!   ([`install`]'s log hook).

use std::ffi::{c_int, c_void, CStr};

use pgrx::pg_guard;
use pgrx::pg_sys::{self, Oid};

static mut PREV_OBJECT_ACCESS: pg_sys::object_access_hook_type = None;
static mut PREV_EMIT_LOG: pg_sys::emit_log_hook_type = None;

/// Installs the object-access and log hooks; called once from `_PG_init`
/// (through [`super::hooks::install`]).
pub fn install() {
    // SAFETY: `_PG_init` runs once per process in its main thread, before
    // any query; the previous hooks are saved and called in turn.
    unsafe {
        PREV_OBJECT_ACCESS = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(object_access);
        PREV_EMIT_LOG = pg_sys::emit_log_hook;
        pg_sys::emit_log_hook = Some(emit_log);
    }
}

/// True when an `EXPLAIN` statement asks for `ANALYZE` (`EXPLAIN ANALYZE`,
/// `EXPLAIN (ANALYZE)`, `EXPLAIN (ANALYZE on)`; not `ANALYZE false`).
///
/// # Safety
/// `stmt` is a valid `ExplainStmt` of the utility hook.
pub unsafe fn explain_analyzes(stmt: *mut pg_sys::ExplainStmt) -> bool {
    // SAFETY: the options list holds DefElem nodes with NUL-terminated
    // names; defGetBoolean reads the option's value as EXPLAIN will (an
    // ERROR for a value that is not a boolean, as EXPLAIN would raise).
    unsafe {
        pgrx::PgList::<pg_sys::DefElem>::from_pg((*stmt).options)
            .iter_ptr()
            .any(|opt| {
                !(*opt).defname.is_null()
                    && CStr::from_ptr((*opt).defname).to_bytes() == b"analyze"
                    && pg_sys::defGetBoolean(opt)
            })
    }
}

/// Built-in functions whose results count memory, disk or buffers that
/// statements used, or the sizes of relations: temporary files (counted,
/// or listed with their sizes while a sort writes them), block reads and
/// hits (a detoasted value's length, in blocks), buffers allocated and
/// written, WAL written (full-page images of pages a read set hint bits
/// on), memory contexts, relation and database sizes.
const BUILTIN_COUNTERS: &[(u32, &str)] = &[
    (
        pg_sys::F_PG_STAT_GET_DB_TEMP_FILES,
        "pg_stat_get_db_temp_files",
    ),
    (
        pg_sys::F_PG_STAT_GET_DB_TEMP_BYTES,
        "pg_stat_get_db_temp_bytes",
    ),
    (
        pg_sys::F_PG_STAT_GET_DB_BLOCKS_FETCHED,
        "pg_stat_get_db_blocks_fetched",
    ),
    (
        pg_sys::F_PG_STAT_GET_DB_BLOCKS_HIT,
        "pg_stat_get_db_blocks_hit",
    ),
    (
        pg_sys::F_PG_STAT_GET_DB_BLK_READ_TIME,
        "pg_stat_get_db_blk_read_time",
    ),
    (
        pg_sys::F_PG_STAT_GET_DB_BLK_WRITE_TIME,
        "pg_stat_get_db_blk_write_time",
    ),
    (
        pg_sys::F_PG_STAT_GET_BLOCKS_FETCHED,
        "pg_stat_get_blocks_fetched",
    ),
    (pg_sys::F_PG_STAT_GET_BLOCKS_HIT, "pg_stat_get_blocks_hit"),
    (
        pg_sys::F_PG_STAT_GET_XACT_BLOCKS_FETCHED,
        "pg_stat_get_xact_blocks_fetched",
    ),
    (
        pg_sys::F_PG_STAT_GET_XACT_BLOCKS_HIT,
        "pg_stat_get_xact_blocks_hit",
    ),
    (pg_sys::F_PG_STAT_GET_BUF_ALLOC, "pg_stat_get_buf_alloc"),
    (
        pg_sys::F_PG_STAT_GET_BGWRITER_BUF_WRITTEN_CLEAN,
        "pg_stat_get_bgwriter_buf_written_clean",
    ),
    (
        pg_sys::F_PG_STAT_GET_BGWRITER_MAXWRITTEN_CLEAN,
        "pg_stat_get_bgwriter_maxwritten_clean",
    ),
    (pg_sys::F_PG_STAT_GET_WAL, "pg_stat_get_wal"),
    // The transaction ID counter minus its argument (`age(timestamp)`,
    // other OIDs, stays).
    (pg_sys::F_AGE_XID, "age(xid)"),
    (pg_sys::F_PG_CURRENT_WAL_LSN, "pg_current_wal_lsn"),
    (
        pg_sys::F_PG_CURRENT_WAL_INSERT_LSN,
        "pg_current_wal_insert_lsn",
    ),
    (
        pg_sys::F_PG_CURRENT_WAL_FLUSH_LSN,
        "pg_current_wal_flush_lsn",
    ),
    (
        pg_sys::F_PG_GET_BACKEND_MEMORY_CONTEXTS,
        "pg_get_backend_memory_contexts",
    ),
    (pg_sys::F_PG_LS_TMPDIR_, "pg_ls_tmpdir"),
    (pg_sys::F_PG_LS_TMPDIR_OID.to_u32(), "pg_ls_tmpdir"),
    (pg_sys::F_PG_LS_WALDIR, "pg_ls_waldir"),
    (pg_sys::F_PG_RELATION_SIZE_REGCLASS, "pg_relation_size"),
    (pg_sys::F_PG_RELATION_SIZE_REGCLASS_TEXT, "pg_relation_size"),
    (pg_sys::F_PG_TABLE_SIZE, "pg_table_size"),
    (pg_sys::F_PG_INDEXES_SIZE, "pg_indexes_size"),
    (pg_sys::F_PG_TOTAL_RELATION_SIZE, "pg_total_relation_size"),
    (pg_sys::F_PG_DATABASE_SIZE_NAME, "pg_database_size"),
    (pg_sys::F_PG_DATABASE_SIZE_OID.to_u32(), "pg_database_size"),
    (pg_sys::F_PG_TABLESPACE_SIZE_NAME, "pg_tablespace_size"),
    (
        pg_sys::F_PG_TABLESPACE_SIZE_OID.to_u32(),
        "pg_tablespace_size",
    ),
];

/// Name prefixes of built-in (`pg_catalog`) functions a masked session
/// may not call: every cumulative-statistics reader (`pg_stat_get_*`,
/// `pg_stat_get_xact_*`, behind `pg_stat_all_tables`,
/// `pg_stat_all_indexes`, `pg_stat_database`, ...): tuples fetched and
/// returned, scans and live tuples of a TOAST table or its index count
/// the chunks, hence the length, of each raw value read; and the
/// directory listings `pg_ls_*` (file sizes: temporary files, WAL, server
/// logs).
/// Advisory locks are among them: an owner's job that locks on a raw
/// value (`pg_advisory_xact_lock(hashtext(name))`) answers a masked
/// session's `pg_try_advisory_xact_lock(hashtext('Carver'))`.
const BUILTIN_PREFIXES: &[&str] = &["pg_stat_get_", "pg_ls_", "pg_advisory_", "pg_try_advisory_"];

/// Further built-in functions a masked session may not call: the lock
/// table (predicate locks name the tuples a read touched), file reads
/// and sizes (a data file holds the raw values: `pg_read_file`,
/// `pg_read_binary_file`, `pg_stat_file`, `lo_import`), and `currtid2`,
/// which follows a row's update chain to its newest version and whose
/// errors give a relation's size in blocks (where rows are stored depends
/// on their raw lengths).
const BUILTIN_NAMES: &[&str] = &[
    // The lock table (`pg_locks`): in a SERIALIZABLE transaction a read
    // takes predicate locks on the tuples and pages it reads, which name
    // the relation (an inheritance child) and the place (a ctid) of each
    // row a masked read touched.
    "pg_lock_status",
    // The control file: checkpoint positions in the WAL, whose distance
    // counts what every session wrote (WAL figures are refused).
    "pg_control_checkpoint",
    "pg_control_system",
    "pg_control_recovery",
    "pg_control_init",
    "pg_blocking_pids",
    "pg_safe_snapshot_blocking_pids",
    "pg_isolation_test_session_is_blocked",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_stat_file",
    "lo_import",
    "currtid2",
    "currtid",
    // WAL positions by other routes: a logical message's return value is
    // the current insert position, a slot's `safe_wal_size` moves with
    // every byte written (`pg_replication_slots`), and a standby's
    // receive and replay positions are its primary's. Their distance
    // before and after an owner's write is its raw length, to 8 bytes,
    // and how many rows an owner's UPDATE matched, rolled back or not.
    "pg_logical_emit_message",
    "pg_get_replication_slots",
    "pg_last_wal_receive_lsn",
    "pg_last_wal_replay_lsn",
    // The transaction ID counter and others' transactions: an owner's
    // `UPDATE ... WHERE name LIKE 'A%'` takes an ID only when a row
    // matched, so the counter's step, or an ID's status, tells it.
    "pg_current_snapshot",
    "txid_current_snapshot",
    "pg_current_xact_id",
    "pg_current_xact_id_if_assigned",
    "txid_current",
    "txid_current_if_assigned",
    "pg_xact_status",
    "txid_status",
    "pg_xact_commit_timestamp",
    "pg_xact_commit_timestamp_origin",
    "pg_last_committed_xact",
    // A new large object's OID comes from the cluster's OID counter, which
    // an owner's write steps once per value stored out of line (a TOAST
    // chunk ID): how many of its raw values were over about 2 kB.
    "lo_create",
    "lo_creat",
    "lo_from_bytea",
    // The multixact counter and its members (other sessions' transaction
    // IDs and lock modes): an owner's UPDATE of a row another transaction
    // holds a key-share lock on (a foreign key's check) makes one only
    // when its raw-value filter matched.
    "mxid_age",
    "pg_get_multixact_members",
    // Prepared transactions' IDs, and a standby's last replayed commit:
    // the transaction counter again.
    "pg_prepared_xact",
    "pg_last_xact_replay_timestamp",
    // How full the notification queue is: a masked session that fills it
    // to a page boundary with its own pg_notify reads the length of an
    // owner's trigger's payload (`row_to_json(NEW)`) to 20 bytes.
    "pg_notification_queue_usage",
];

/// Functions of contrib extensions (any schema) that read the same
/// figures: `pg_stat_statements`' block, temporary-file and WAL counters,
/// `pgstattuple`'s tuple lengths, `pg_buffercache`'s buffers per relation,
/// `pgrowlocks`' locked rows (their places and lockers: which rows an
/// owner's open UPDATE matched), `pg_freespace`'s free space per page
/// (the raw lengths of a page's rows, to 32 bytes), `pg_visibility`'s
/// page flags, `pg_prewarm`'s block count, `pageinspect`'s raw pages and
/// tuples, `amcheck`'s reports (index tuples in their messages), and
/// `pg_walinspect`'s WAL records (their lengths and block images).
const EXTENSION_COUNTERS: &[&str] = &[
    "pg_stat_statements",
    "pgstattuple",
    "pgstattuple_approx",
    "pgstatindex",
    "pg_relpages",
    "pg_buffercache_pages",
    "pgstathashindex",
    "pgstatginindex",
    "pgrowlocks",
    "pg_freespace",
    "pg_visibility_map",
    "pg_visibility_map_rel",
    "pg_visibility_map_summary",
    "pg_visibility",
    "pg_visibility_rel",
    "pg_check_frozen",
    "pg_check_visible",
    "pg_truncate_visibility_map",
    "pg_prewarm",
    "pg_buffercache_summary",
    "pg_buffercache_usage_counts",
    "get_raw_page",
    "page_header",
    "page_checksum",
    "heap_page_items",
    "heap_page_item_attrs",
    "tuple_data_split",
    "fsm_page_contents",
    "bt_metap",
    "bt_page_stats",
    "bt_page_items",
    "bt_multi_page_stats",
    "brin_page_items",
    "brin_metapage_info",
    "brin_revmap_data",
    "gin_metapage_info",
    "gin_page_opaque_info",
    "gin_leafpage_items",
    "gist_page_items",
    "gist_page_items_bytea",
    "gist_page_opaque_info",
    "hash_page_items",
    "hash_page_stats",
    "hash_metapage_info",
    "hash_bitmap_info",
    "bt_index_check",
    "bt_index_parent_check",
    "verify_heapam",
    "pg_get_wal_records_info",
    "pg_get_wal_records_info_till_end_of_wal",
    "pg_get_wal_record_info",
    "pg_get_wal_stats",
    "pg_get_wal_stats_till_end_of_wal",
    "pg_get_wal_block_info",
];

/// The name of function `oid` when it reads a figure a masked session
/// may not see ([`BUILTIN_COUNTERS`], [`BUILTIN_PREFIXES`],
/// [`BUILTIN_NAMES`], [`EXTENSION_COUNTERS`]).
fn counter_function(oid: Oid) -> Option<String> {
    let id = oid.to_u32();
    if let Some((_, name)) = BUILTIN_COUNTERS
        .iter()
        .chain(crate::pg::version::VERSION_COUNTERS)
        .find(|(f, _)| *f == id)
    {
        return Some((*name).to_string());
    }
    // SAFETY: a syscache read that returns NULL for a missing function,
    // else a palloc'd NUL-terminated name.
    let name = unsafe { pg_sys::get_func_name(oid) };
    if name.is_null() {
        return None;
    }
    // SAFETY: non-NULL, NUL-terminated (above).
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    if id >= pg_sys::FirstNormalObjectId {
        return EXTENSION_COUNTERS
            .contains(&name.as_ref())
            .then(|| name.into_owned());
    }
    // SAFETY: a syscache read (InvalidOid for a missing function).
    let namespace = unsafe { pg_sys::get_func_namespace(oid) };
    let refused = namespace == Oid::from(pg_sys::PG_CATALOG_NAMESPACE)
        && (BUILTIN_PREFIXES.iter().any(|p| name.starts_with(p))
            || BUILTIN_NAMES.contains(&name.as_ref()));
    refused.then(|| name.into_owned())
}

/// The object-access hook: PostgreSQL calls it with
/// `OAT_FUNCTION_EXECUTE` whenever the executor sets up a call of a
/// function (after the `EXECUTE` privilege check), in every expression it
/// evaluates, planned or not (`CALL` and `EXECUTE` arguments, defaults of
/// `COPY FROM`, check constraints). A masked session's call of a counter
/// function is refused there.
#[pg_guard]
unsafe extern "C-unwind" fn object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: Oid,
    object_id: Oid,
    sub_id: c_int,
    arg: *mut c_void,
) {
    // SAFETY: the previous hook, with the arguments PostgreSQL passed.
    if let Some(prev) = unsafe { PREV_OBJECT_ACCESS } {
        unsafe { prev(access, class_id, object_id, sub_id, arg) };
    }
    if access != pg_sys::ObjectAccessType::OAT_FUNCTION_EXECUTE
        || class_id != pg_sys::ProcedureRelationId
        || crate::pg::lookup::in_lookup()
    {
        return;
    }
    // An unmasked session reads nothing for any call.
    if crate::session::session_is_masked_cached() == Some(false) {
        return;
    }
    let Some(name) = counter_function(object_id) else {
        return;
    };
    if crate::session::session_is_masked() {
        crate::error::refuse(format!(
            "masked sessions cannot call {name}: it reports memory, disk, buffer, row-count, size or storage figures that depend on the raw values statements read"
        ));
    }
}

thread_local! {
    /// This transaction executed a plan that reads a foreign table with
    /// dptext rules in a masked session ([`note_foreign_reads`]).
    static FOREIGN_READ: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Notes, in a masked session, whether the plan about to run reads a
/// foreign table whose policy protects it: a foreign-data wrapper parses
/// raw values below the mask, and its errors quote them (file_fdw's
/// `CONTEXT: COPY t, line 2: "2,Bob Smith,..."`, an input function's
/// `invalid input syntax for type integer: "..."`). Until the transaction
/// ends, errors reach the client without their text ([`emit_log`]).
///
/// Returns whether this plan reads one.
///
/// # Safety
/// `stmt` is the valid PlannedStmt the executor is starting.
pub(crate) unsafe fn note_foreign_reads(stmt: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: a PlannedStmt's rtable holds RangeTblEntry nodes.
    unsafe {
        if stmt.is_null() {
            return false;
        }
        for rte in pgrx::PgList::<pg_sys::RangeTblEntry>::from_pg((*stmt).rtable).iter_ptr() {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION
                && (*rte).relkind as u8 == pg_sys::RELKIND_FOREIGN_TABLE
                && super::masking::relation_policy((*rte).relid).protects()
            {
                FOREIGN_READ.with(|f| f.set(true));
                return true;
            }
        }
        false
    }
}

/// Whether this transaction read a foreign table with rules in a masked
/// session ([`note_foreign_reads`]).
pub(crate) fn foreign_read() -> bool {
    FOREIGN_READ.with(std::cell::Cell::get)
}

/// Runs `run` (the executor running a masked session's plan) and raises
/// any error it raises again without its `DETAIL` and `CONTEXT`, and, when
/// the transaction read a foreign table with rules, as one fixed message:
/// before a PL/pgSQL `EXCEPTION` block can catch it, whose `GET STACKED
/// DIAGNOSTICS` would read what the log hook ([`emit_log`]) removes only
/// as the server logs it. The SQLSTATE and, but for foreign reads, the
/// message and hint stay.
pub(crate) fn run_masked<F: FnOnce()>(run: F) {
    use pgrx::pg_sys::panic::{CaughtError, ErrorReport};
    pgrx::PgTryBuilder::new(std::panic::AssertUnwindSafe(run))
        .catch_others(|e| match e {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => {
                let foreign = foreign_read();
                let message = if foreign {
                    FOREIGN_ERROR.to_string_lossy().into_owned()
                } else {
                    r.message().to_string()
                };
                let mut report = ErrorReport::new(r.sql_error_code(), message, "dptext masking");
                if let (false, Some(h)) = (foreign, r.hint()) {
                    report = report.set_hint(h.to_string());
                }
                report.report(pgrx::PgLogLevel::ERROR);
                unreachable!("ERROR does not return")
            }
            other => other.rethrow(),
        })
        .execute();
}

/// Forgets [`note_foreign_reads`]'s mark: the transaction ended.
pub(crate) fn forget_foreign_reads() {
    FOREIGN_READ.with(|f| f.set(false));
}

/// What a masked session's client gets of an error raised while it reads
/// a foreign table with dptext rules.
const FOREIGN_ERROR: &CStr =
    c"an error occurred while reading a foreign table with dptext rules; its text is withheld from masked sessions";

/// The log hook, in a masked session (or one whose masking is not known
/// yet):
/// - messages below `NOTICE` (`LOG` and `DEBUG`, which only reach a
///   client whose `client_min_messages` asks for them) are kept from the
///   client; the server log still gets them;
/// - every message reaches the client without its `CONTEXT` (a lock
///   wait's `while locking tuple (0,2)` is a row's place, COPY's and a
///   foreign-data wrapper's context quote the line read), and an error
///   without its `DETAIL` (a deadlock's names transaction IDs); errors
///   the executor raises were already raised again so
///   ([`run_masked`]), before any PL/pgSQL handler could catch them;
/// - an error raised while the transaction reads a foreign table with
///   rules ([`note_foreign_reads`]) reaches it as one fixed message, its
///   SQLSTATE kept.
///
/// PostgreSQL calls the hook only for messages the server log takes
/// (`log_min_messages`): masked sessions are refused while it is above
/// `error` (`hooks::refuse_debug_messages`).
#[pg_guard]
unsafe extern "C-unwind" fn emit_log(edata: *mut pg_sys::ErrorData) {
    // SAFETY: PostgreSQL passes the report being emitted, which the hook
    // may change (strings it points to are palloc'd in ErrorContext, the
    // current context here); the masking cache is read without any catalog
    // access (this may run outside a transaction, or in an aborted one).
    unsafe {
        if !edata.is_null()
            && (*edata).output_to_client
            && crate::session::session_is_masked_cached() != Some(false)
        {
            if (*edata).elevel < pg_sys::NOTICE as c_int {
                (*edata).output_to_client = false;
            }
            (*edata).context = std::ptr::null_mut();
            if (*edata).elevel >= pgrx::PgLogLevel::ERROR as c_int {
                (*edata).detail = std::ptr::null_mut();
                if foreign_read() {
                    (*edata).message = pg_sys::pstrdup(FOREIGN_ERROR.as_ptr());
                    (*edata).hint = std::ptr::null_mut();
                    (*edata).internalquery = std::ptr::null_mut();
                }
            }
        }
        if let Some(prev) = PREV_EMIT_LOG {
            prev(edata);
        }
    }
}
