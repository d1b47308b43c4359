//! Catalog reads the masking decisions need, each a thin safe wrapper
//! over one PostgreSQL call. Imports nothing else of the crate, so that
//! [`crate::enforce::masking`] can use it while the hooks use `masking`.

use std::ffi::CStr;

use pgrx::pg_sys;

/// The start of a catalog query over the inheritance and partition family
/// of relation `$1`: a CTE `fam(rel)` of every relation joined to it by
/// `pg_inherits`, in either direction (its ancestors, descendants and
/// their other parents). A macro, so that queries can `concat!` it.
macro_rules! family_cte {
    () => {
        "
WITH RECURSIVE fam(rel) AS (
    SELECT $1::pg_catalog.oid
  UNION
    SELECT CASE WHEN i.inhrelid OPERATOR(pg_catalog.=) fam.rel THEN i.inhparent ELSE i.inhrelid END
      FROM pg_catalog.pg_inherits i
      JOIN fam ON i.inhrelid OPERATOR(pg_catalog.=) fam.rel OR i.inhparent OPERATOR(pg_catalog.=) fam.rel
)"
    };
}
pub(crate) use family_cte;

/// The `dptext` label of role `role`, if it has one.
pub fn role_label(role: pg_sys::Oid) -> Option<String> {
    let object = pg_sys::ObjectAddress {
        classId: pg_sys::AuthIdRelationId,
        objectId: role,
        objectSubId: 0,
    };
    // SAFETY: reads pg_shseclabel through its index; the address and the
    // provider name are valid for the call; the result is NULL or a
    // palloc'd NUL-terminated string, copied before it is freed.
    unsafe {
        let label = pg_sys::GetSecurityLabel(&object, c"dptext".as_ptr());
        if label.is_null() {
            return None;
        }
        let s = CStr::from_ptr(label).to_string_lossy().into_owned();
        pg_sys::pfree(label.cast());
        Some(s)
    }
}

/// The session's login role (`session_user`) and current role.
pub fn session_roles() -> (pg_sys::Oid, pg_sys::Oid) {
    // SAFETY: plain reads of the backend's role globals.
    unsafe { (pg_sys::GetSessionUserId(), pg_sys::GetUserId()) }
}

/// A role's name (its oid when it no longer exists).
pub fn role_name(role: pg_sys::Oid) -> String {
    // SAFETY: noerr: NULL for a missing role; else a palloc'd name.
    unsafe {
        let name = pg_sys::GetUserNameFromId(role, true);
        if name.is_null() {
            return role.to_u32().to_string();
        }
        CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// True when `role` is a superuser.
pub fn is_superuser(role: pg_sys::Oid) -> bool {
    // SAFETY: a syscache read; false for a missing role.
    unsafe { pg_sys::superuser_arg(role) }
}

/// A relation's kind (`pg_class.relkind`), 0 when it does not exist.
pub fn relkind(relid: pg_sys::Oid) -> u8 {
    // SAFETY: a syscache read that returns 0 for a missing relation.
    unsafe { pg_sys::get_rel_relkind(relid) as u8 }
}

/// A relation's schema oid and bare name, read from the syscache (which
/// no planner hook filters: Citus hides its shards from SQL reads of
/// `pg_class`); `None` when it does not exist.
pub fn relation_namespace_and_name(relid: pg_sys::Oid) -> Option<(pg_sys::Oid, String)> {
    // SAFETY: syscache reads returning NULL / InvalidOid for missing
    // entries, else a palloc'd NUL-terminated string.
    unsafe {
        let rel = pg_sys::get_rel_name(relid);
        if rel.is_null() {
            return None;
        }
        let nsp = pg_sys::get_rel_namespace(relid);
        Some((nsp, CStr::from_ptr(rel).to_string_lossy().into_owned()))
    }
}

/// A relation's owner, read from the syscache (which Citus's shard hiding
/// does not filter); `None` when it does not exist.
pub fn relation_owner(relid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: a syscache lookup by oid; a valid tuple of pg_class is a
    // FormData_pg_class, read before the tuple is released.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::RELOID as std::ffi::c_int,
            pg_sys::Datum::from(relid),
        );
        if tuple.is_null() {
            return None;
        }
        let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple)).relowner;
        pg_sys::ReleaseSysCache(tuple);
        Some(owner)
    }
}

/// Runs `f` with a snapshot taken now as the active one, so that the
/// SPI reads of the catalog inside it (labels, inheritance, provenance)
/// see every change committed before the call, as the syscache does, and
/// not the statement's or a REPEATABLE READ transaction's older snapshot:
/// a policy read under that one, then cached, missed a label an owner
/// committed since, and served the column raw. In a parallel worker, where
/// no snapshot may be taken, `f` runs under the active one.
pub fn with_latest_snapshot<R>(f: impl FnOnce() -> R) -> R {
    struct Pop(pg_sys::Snapshot);
    impl Drop for Pop {
        fn drop(&mut self) {
            // SAFETY: pops only the snapshot pushed below, and only while
            // it is still the active one (an error inside `f` may leave
            // more on the stack, which the abort then releases).
            unsafe {
                if pg_sys::ActiveSnapshotSet() && pg_sys::GetActiveSnapshot() == self.0 {
                    pg_sys::PopActiveSnapshot();
                }
            }
        }
    }
    // SAFETY: GetLatestSnapshot returns a static snapshot that
    // PushActiveSnapshot copies onto the active stack; taken only outside
    // parallel mode, where PostgreSQL allows it.
    let _pop = unsafe {
        if pg_sys::IsInParallelMode() {
            None
        } else {
            pg_sys::PushActiveSnapshot(pg_sys::GetLatestSnapshot());
            Some(Pop(pg_sys::GetActiveSnapshot()))
        }
    };
    f()
}

/// Whether row-level security is enabled on a relation
/// (`pg_class.relrowsecurity`, or forced); true when it cannot be read.
pub fn row_security(relid: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by oid; a valid tuple of pg_class is a
    // FormData_pg_class, read before the tuple is released.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::RELOID as std::ffi::c_int,
            pg_sys::Datum::from(relid),
        );
        if tuple.is_null() {
            return true;
        }
        let class = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple);
        let on = (*class).relrowsecurity || (*class).relforcerowsecurity;
        pg_sys::ReleaseSysCache(tuple);
        on
    }
}

/// The name of function `oid`, from the syscache (`None`: no such function).
pub fn function_name(oid: pg_sys::Oid) -> Option<String> {
    // SAFETY: a syscache read that returns NULL for a missing function,
    // else a palloc'd NUL-terminated name.
    unsafe {
        let name = pg_sys::get_func_name(oid);
        (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
    }
}

/// The number of column `name` of relation `relid` (`None`: no such
/// column, or a dropped one).
pub fn attnum(relid: pg_sys::Oid, name: &str) -> Option<i16> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: a syscache lookup with a NUL-terminated name that outlives
    // the call; it returns InvalidAttrNumber (0) when there is no column.
    let n = unsafe { pg_sys::get_attnum(relid, name.as_ptr()) };
    (n > 0).then_some(n)
}

/// A column's type, typmod and collation, from the syscache.
pub fn attribute_type(relid: pg_sys::Oid, attnum: i16) -> (pg_sys::Oid, i32, pg_sys::Oid) {
    let (mut typ, mut typmod, mut coll) = (pg_sys::Oid::INVALID, -1, pg_sys::Oid::INVALID);
    // SAFETY: the out-pointers are valid locals; the function raises an
    // ERROR (not undefined behaviour) for a missing attribute.
    unsafe { pg_sys::get_atttypetypmodcoll(relid, attnum, &mut typ, &mut typmod, &mut coll) };
    (typ, typmod, coll)
}

/// True for a type whose values may hold text a person wrote: the string
/// category (`text`, `varchar`, `char`, `name`, `citext`...), the
/// user-defined category (`json`, `jsonb`, `xml`, `bytea`, `tsvector`,
/// `hstore` and other extension types), any composite type, a range of
/// one, and domains and arrays of these.
pub fn text_like_type(typ: pg_sys::Oid) -> bool {
    text_like_at(typ, 0)
}

fn text_like_at(typ: pg_sys::Oid, depth: u32) -> bool {
    if depth > 8 {
        return true; // deeper than any sane type: fail closed
    }
    // SAFETY: syscache reads; getBaseType returns its argument for a type
    // that is not a domain, get_element_type and the range lookups
    // InvalidOid where they do not apply, and get_type_category_preferred
    // writes its out-pointers (valid locals) or raises an ERROR for a
    // missing type.
    unsafe {
        let mut t = pg_sys::getBaseType(typ);
        let elem = pg_sys::get_element_type(t);
        if elem != pg_sys::Oid::INVALID {
            return text_like_at(elem, depth + 1);
        }
        let (mut category, mut preferred) = (0 as std::ffi::c_char, false);
        pg_sys::get_type_category_preferred(t, &mut category, &mut preferred);
        match category as u8 {
            b'S' | b'U' | b'C' => true,
            b'R' => {
                let range = pg_sys::get_multirange_range(t);
                if range != pg_sys::Oid::INVALID {
                    t = range;
                }
                let sub = pg_sys::get_range_subtype(t);
                sub == pg_sys::Oid::INVALID || text_like_at(sub, depth + 1)
            }
            _ => false,
        }
    }
}

/// The name of relation `relid`'s schema (empty for a missing one).
pub fn relation_schema(relid: pg_sys::Oid) -> String {
    // SAFETY: syscache reads returning InvalidOid / NULL for missing
    // entries, else a palloc'd NUL-terminated string.
    unsafe {
        let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        if nsp.is_null() {
            String::new()
        } else {
            CStr::from_ptr(nsp).to_string_lossy().into_owned()
        }
    }
}

/// A column's name (empty for a missing one).
pub fn column_name(relid: pg_sys::Oid, attnum: i16) -> String {
    // SAFETY: a syscache read returning NULL for a missing column, else a
    // palloc'd NUL-terminated string.
    unsafe {
        let n = pg_sys::get_attname(relid, attnum, true);
        if n.is_null() {
            String::new()
        } else {
            CStr::from_ptr(n).to_string_lossy().into_owned()
        }
    }
}

/// `f` of relation `relid`'s relation-cache entry; `None` when the
/// relation does not exist.
fn with_relation<T>(relid: pg_sys::Oid, f: impl FnOnce(pg_sys::Relation) -> T) -> Option<T> {
    // SAFETY: the relation cache returns NULL for a missing relation, else
    // a pinned entry, valid until the pin is released after `f`; callers
    // hold a lock on the relation (the query that reads it).
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return None;
        }
        let out = f(rel);
        pg_sys::RelationClose(rel);
        Some(out)
    }
}

/// Which columns of relation `relid` are dropped, in column order: its
/// length is the relation's number of columns (dropped ones included);
/// empty when the relation does not exist.
pub fn dropped_columns(relid: pg_sys::Oid) -> Vec<bool> {
    with_relation(relid, |rel| {
        // SAFETY: a pinned entry's descriptor holds `natts` attributes.
        unsafe {
            crate::pg::version::attributes((*rel).rd_att)
                .into_iter()
                .map(|a| (*a).attisdropped)
                .collect()
        }
    })
    .unwrap_or_default()
}

/// True when relation `relid` has (or had) inheritance children, and is
/// not a partitioned table: a parent of plain inheritance (`INHERITS`).
pub fn has_inheritance_children(relid: pg_sys::Oid) -> bool {
    with_relation(relid, |rel| {
        // SAFETY: a pinned entry's `rd_rel` is its pg_class row.
        let form = unsafe { &*(*rel).rd_rel };
        form.relhassubclass && form.relkind as u8 != pg_sys::RELKIND_PARTITIONED_TABLE
    })
    .unwrap_or(false)
}

/// A relation's name as `schema.name` (its oid when it does not exist).
pub fn relation_name(relid: pg_sys::Oid) -> String {
    // SAFETY: syscache reads returning NULL for missing entries, else
    // palloc'd NUL-terminated strings.
    unsafe {
        let rel = pg_sys::get_rel_name(relid);
        if rel.is_null() {
            return relid.to_u32().to_string();
        }
        let nsp = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        let rel = CStr::from_ptr(rel).to_string_lossy();
        if nsp.is_null() {
            return rel.into_owned();
        }
        format!("{}.{}", CStr::from_ptr(nsp).to_string_lossy(), rel)
    }
}

/// True when the function was called by an expression the masking
/// rewrite built: a `FuncExpr` marked `COERCE_SQL_SYNTAX`, which the
/// parser gives only to calls of pg_catalog functions.
pub fn called_by_rewrite(fcinfo: pg_sys::FunctionCallInfo) -> bool {
    // SAFETY: PostgreSQL passes a valid fcinfo; flinfo and fn_expr may be
    // NULL (direct calls from C), which counts as not called by the
    // rewrite; fn_expr is a node, cast after its tag is checked.
    unsafe {
        if fcinfo.is_null() || (*fcinfo).flinfo.is_null() {
            return false;
        }
        let expr = (*(*fcinfo).flinfo).fn_expr;
        if expr.is_null() || !pgrx::is_a(expr, pg_sys::NodeTag::T_FuncExpr) {
            return false;
        }
        (*expr.cast::<pg_sys::FuncExpr>()).funcformat == pg_sys::CoercionForm::COERCE_SQL_SYNTAX
    }
}

/// Queues a relation-cache invalidation of `relid`: sent to every session
/// when the transaction commits, and to this one at its next command, so
/// that all of them drop what they cached from it (the recognizers).
pub fn invalidate_relation(relid: pg_sys::Oid) {
    // SAFETY: only queues an invalidation message for a relation id (the
    // triggers pass their own table's, which exists; an unknown one raises
    // an ERROR, not undefined behaviour); no pointer is passed and nothing
    // is returned.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(relid) }
}

/// Runs a read-only query through SPI on the latest committed data (the
/// statement's snapshot inside a parallel operation, where it cannot
/// change) and
/// returns its rows, every column as text (NULL as `None`). Read-only: no
/// command counter increment, so it works inside parallel workers and in
/// transactions that have written, where pgrx's SPI client would start a
/// new command and fail.
pub fn read_only_rows(sql: &std::ffi::CStr) -> Result<Vec<Vec<Option<String>>>, String> {
    // SAFETY: SPI_connect/SPI_finish bracket the query (the plan is freed
    // with SPI's memory at SPI_finish); SPI_prepare and SPI_execute_snapshot
    // run a constant, NUL-terminated query read-only, with no parameters,
    // under GetLatestSnapshot (registered by SPI for the call) (errors are turned into Rust
    // panics by pgrx's guarded bindings, and SPI is cleaned up by the
    // transaction abort); SPI_tuptable and SPI_processed are read before
    // SPI_finish frees them; each SPI_getvalue result is a palloc'd string
    // or NULL, copied and freed; column numbers stay within the tuple
    // descriptor's natts.
    unsafe {
        if pg_sys::SPI_connect() != pg_sys::SPI_OK_CONNECT as i32 {
            return Err("SPI_connect failed".into());
        }
        // The latest committed data, not the statement's snapshot: a
        // change committed after it must be what the cache is rebuilt from.
        let plan = pg_sys::SPI_prepare(sql.as_ptr(), 0, std::ptr::null_mut());
        if plan.is_null() {
            pg_sys::SPI_finish();
            return Err("the query could not be planned".into());
        }
        // In a parallel operation the snapshot cannot be changed: the
        // statement's (the leader's) is used there.
        let rc = if pg_sys::IsInParallelMode() {
            pg_sys::SPI_execute_plan(plan, std::ptr::null_mut(), std::ptr::null(), true, 0)
        } else {
            pg_sys::SPI_execute_snapshot(
                plan,
                std::ptr::null_mut(),
                std::ptr::null(),
                pg_sys::GetLatestSnapshot(),
                std::ptr::null_mut(),
                true,
                false,
                0,
            )
        };
        if rc != pg_sys::SPI_OK_SELECT as i32 {
            pg_sys::SPI_finish();
            return Err(format!("query failed with SPI code {rc}"));
        }
        let table = pg_sys::SPI_tuptable;
        let mut rows = Vec::new();
        if !table.is_null() {
            let desc = (*table).tupdesc;
            let natts = (*desc).natts;
            for i in 0..pg_sys::SPI_processed as usize {
                let tuple = *(*table).vals.add(i);
                let mut row = Vec::with_capacity(natts as usize);
                for col in 1..=natts {
                    let v = pg_sys::SPI_getvalue(tuple, desc, col);
                    if v.is_null() {
                        row.push(None);
                    } else {
                        row.push(Some(CStr::from_ptr(v).to_string_lossy().into_owned()));
                        pg_sys::pfree(v.cast());
                    }
                }
                rows.push(row);
            }
        }
        pg_sys::SPI_finish();
        Ok(rows)
    }
}

/// Column numbers a Var of range-table entry 1 reads in `node` (an
/// expression or a list of them), 0 for a whole-row reference.
///
/// # Safety
/// `node` is NULL or a valid expression tree whose Vars of level 0 read
/// one relation as entry 1.
unsafe fn varattnos(node: *mut pg_sys::Node) -> Vec<i16> {
    // SAFETY: as the caller promises; the bitmapset is allocated by
    // pull_varattnos in the current memory context and only read here.
    unsafe {
        let mut set: *mut pg_sys::Bitmapset = std::ptr::null_mut();
        pg_sys::pull_varattnos(node, 1, &mut set);
        attnums_of(set)
    }
}

/// The column numbers of a set offset by
/// `FirstLowInvalidHeapAttributeNumber` (what `pull_varattnos` and a
/// range-table entry's `selectedCols` hold; 0 a whole-row reference).
///
/// # Safety
/// `set` is NULL or a valid bitmapset.
pub unsafe fn attnums_of(set: *const pg_sys::Bitmapset) -> Vec<i16> {
    let mut out = Vec::new();
    // SAFETY: as the caller promises; bms_next_member only reads the set.
    unsafe {
        let mut m = pg_sys::bms_next_member(set, -1);
        while m >= 0 {
            let attnum = m + pg_sys::FirstLowInvalidHeapAttributeNumber;
            if let Ok(a) = i16::try_from(attnum) {
                out.push(a);
            }
            m = pg_sys::bms_next_member(set, m);
        }
    }
    out
}

/// Whether `node` itself (not its arguments) calls a function, operator,
/// aggregate or window function that is not built in: an owner's code,
/// which may read any table.
///
/// # Safety
/// `node` is a valid, non-NULL node.
pub unsafe fn is_owner_call(node: *mut pg_sys::Node) -> bool {
    use pgrx::is_a;
    use pgrx::pg_sys::NodeTag;
    let owner = |oid: pg_sys::Oid| oid.to_u32() >= pg_sys::FirstNormalObjectId;
    // SAFETY: nodes are cast after their tags are checked.
    unsafe {
        if is_a(node, NodeTag::T_FuncExpr) {
            owner((*node.cast::<pg_sys::FuncExpr>()).funcid)
        } else if is_a(node, NodeTag::T_OpExpr)
            || is_a(node, NodeTag::T_DistinctExpr)
            || is_a(node, NodeTag::T_NullIfExpr)
        {
            let op = node.cast::<pg_sys::OpExpr>();
            owner((*op).opno) || owner((*op).opfuncid)
        } else if is_a(node, NodeTag::T_ScalarArrayOpExpr) {
            owner((*node.cast::<pg_sys::ScalarArrayOpExpr>()).opno)
        } else if is_a(node, NodeTag::T_Aggref) {
            owner((*node.cast::<pg_sys::Aggref>()).aggfnoid)
        } else if is_a(node, NodeTag::T_WindowFunc) {
            owner((*node.cast::<pg_sys::WindowFunc>()).winfnoid)
        } else {
            false
        }
    }
}

/// Whether an expression tree calls a function or operator that is not
/// built in (an owner's code, which may read any table).
///
/// # Safety
/// `node` is NULL or a valid expression tree.
pub unsafe fn calls_owner_code(node: *mut pg_sys::Node) -> bool {
    type Walker = unsafe extern "C-unwind" fn(*mut pg_sys::Node, *mut std::ffi::c_void) -> bool;
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, ctx: *mut std::ffi::c_void) -> bool {
        if node.is_null() {
            return false;
        }
        // SAFETY: `node` is a valid node of the tree being walked.
        unsafe {
            is_owner_call(node) || pg_sys::expression_tree_walker(node, Some(walk as Walker), ctx)
        }
    }
    // SAFETY: as the caller promises; the walker only reads the tree.
    unsafe { walk(node, std::ptr::null_mut()) }
}

/// Whether index `indexid` runs an owner's code to order or match its
/// entries: an operator family or support function that is not built in
/// (an operator class whose comparison looks names up), or such a
/// function or operator in its expressions or predicate. Its order and
/// its matches may then be raw values of any table, whatever columns its
/// own table holds. False when it is not an index.
pub fn index_runs_owner_code(indexid: pg_sys::Oid) -> bool {
    let kind = relkind(indexid);
    if kind != pg_sys::RELKIND_INDEX && kind != pg_sys::RELKIND_PARTITIONED_INDEX {
        return false;
    }
    let owner = |oid: pg_sys::Oid| oid.to_u32() >= pg_sys::FirstNormalObjectId;
    // SAFETY: the index exists (its kind was read); index_open locks it,
    // so its relcache entry, `rd_opfamily` (one per key column), and its
    // expression lists stay valid while read.
    unsafe {
        let rel = pg_sys::index_open(indexid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let index = (*rel).rd_index;
        let keys = usize::try_from((*index).indnkeyatts).unwrap_or(0);
        let families = if (*rel).rd_opfamily.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts((*rel).rd_opfamily, keys)
        };
        let runs = families.iter().any(|&f| owner(f))
            || calls_owner_code(pg_sys::RelationGetIndexExpressions(rel).cast())
            || calls_owner_code(pg_sys::RelationGetIndexPredicate(rel).cast());
        pg_sys::index_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        runs
    }
}

/// Whether the expressions of `node_text` (a `pg_node_tree` of a
/// catalog: an extended statistics object's `stxexprs`) call an owner's
/// code; true when it cannot be read.
pub fn node_text_calls_owner_code(node_text: &str) -> bool {
    let Ok(text) = std::ffi::CString::new(node_text) else {
        return true;
    };
    // SAFETY: stringToNode parses a NUL-terminated node string written by
    // PostgreSQL into fresh nodes in the current memory context.
    unsafe { calls_owner_code(pg_sys::stringToNode(text.as_ptr()).cast()) }
}

/// The table index `indexid` is on and every column it reads: its keys,
/// its expressions and its predicate (0: a whole-row reference). `None`
/// when `indexid` is not an index.
pub fn index_columns(indexid: pg_sys::Oid) -> Option<(pg_sys::Oid, Vec<i16>)> {
    let kind = relkind(indexid);
    if kind != pg_sys::RELKIND_INDEX && kind != pg_sys::RELKIND_PARTITIONED_INDEX {
        return None;
    }
    // SAFETY: the index exists (its kind was read); index_open locks it
    // (kept until the transaction ends, as the planner's own opens are),
    // so its relcache entry, `rd_index` and the expression lists stay
    // valid while read; `indkey` holds `indnatts` attribute numbers.
    unsafe {
        let rel = pg_sys::index_open(indexid, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let index = (*rel).rd_index;
        let table = (*index).indrelid;
        let natts = usize::try_from((*index).indnatts).unwrap_or(0);
        let mut cols: Vec<i16> = (*index)
            .indkey
            .values
            .as_slice(natts)
            .iter()
            .copied()
            .filter(|&a| a != 0)
            .collect();
        cols.extend(varattnos(pg_sys::RelationGetIndexExpressions(rel).cast()));
        cols.extend(varattnos(pg_sys::RelationGetIndexPredicate(rel).cast()));
        pg_sys::index_close(rel, pg_sys::NoLock as pg_sys::LOCKMODE);
        Some((table, cols))
    }
}

/// The columns (0: a whole-row reference) that the expressions of
/// `node_text` read, a `pg_node_tree` of expressions over one relation
/// (a partition key's `partexprs`), as entry 1.
pub fn expression_columns(node_text: &str) -> Vec<i16> {
    let Ok(text) = std::ffi::CString::new(node_text) else {
        return vec![0];
    };
    // SAFETY: stringToNode parses a NUL-terminated node string written by
    // PostgreSQL (a catalog's pg_node_tree) into fresh nodes in the
    // current memory context; its Vars read the relation as entry 1.
    unsafe { varattnos(pg_sys::stringToNode(text.as_ptr()).cast()) }
}

/// The base type of `typ` (a domain's, through every level), or `typ`
/// itself when it is not a domain.
pub fn base_type(typ: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache read; returns its argument for a non-domain and
    // raises an ERROR (not undefined behaviour) for an unknown type.
    unsafe { pg_sys::getBaseType(typ) }
}

/// Whether `relid` lives in `pg_toast` or a session's `pg_toast_temp_N`
/// (a TOAST table or its index; a temporary table's live in the latter).
pub fn in_toast_namespace(relid: pg_sys::Oid) -> bool {
    // SAFETY: syscache reads; InvalidOid for a missing relation, NULL for
    // a missing namespace, else a palloc'd NUL-terminated name.
    unsafe {
        let ns = pg_sys::get_rel_namespace(relid);
        if ns == pg_sys::Oid::from(pg_sys::PG_TOAST_NAMESPACE) {
            return true;
        }
        if ns == pg_sys::Oid::INVALID {
            return false;
        }
        let name = pg_sys::get_namespace_name(ns);
        !name.is_null()
            && std::ffi::CStr::from_ptr(name)
                .to_bytes()
                .starts_with(b"pg_toast_temp_")
    }
}
