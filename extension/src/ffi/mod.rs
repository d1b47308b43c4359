//! The only module with `unsafe` code.
//!
//! - pgrx 0.18 has no safe way to register a string setting with a show
//!   hook, and `dptext.key` needs one so that `SHOW`, `current_setting` and
//!   `pg_settings` never display the secret, not even to superusers.
//! - Embedding matrices are memory-mapped, so that every backend of the
//!   server shares one copy in the page cache.
//! - The security label provider `dptext` is a C hook; it reads the
//!   labelled object's kind and column type from the catalog caches and
//!   hands them to the safe check in [`crate::rules`].
//! - Masking at the source hooks the planner, utility commands and the
//!   planner's statistics ([`hooks`]) and rewrites query trees
//!   ([`rewrite`]); the decisions are safe code in [`crate::masking`].

use std::ffi::{CStr, CString};
use std::path::Path;
use std::sync::Arc;

use dptext_core::embeddings::SharedBytes;

use pgrx::{pg_guard, pg_sys, GucContext, GucFlags, GucSetting};

pub mod hooks;
pub mod lineage;
pub mod rewrite;

/// What `SHOW dptext.key` displays.
const MASK: &CStr = c"********";

/// Show hook for secret settings: a constant mask instead of the value.
unsafe extern "C-unwind" fn show_masked() -> *const std::ffi::c_char {
    MASK.as_ptr()
}

/// Registers a superuser-only string setting whose value is never displayed.
pub fn define_secret_guc(
    name: &'static CStr,
    short: &'static CStr,
    long: &'static CStr,
    setting: &'static GucSetting<Option<CString>>,
) {
    let flags = GucFlags::SUPERUSER_ONLY | GucFlags::NO_SHOW_ALL;
    // SAFETY: called once from `_PG_init` in the backend's main thread; the
    // name, descriptions and `setting` are 'static, as PostgreSQL requires
    // for the lifetime of the process; the boot value is NULL (no key); the
    // show hook returns a pointer to a 'static NUL-terminated string.
    unsafe {
        pg_sys::DefineCustomStringVariable(
            name.as_ptr(),
            short.as_ptr(),
            long.as_ptr(),
            setting.as_ptr(),
            std::ptr::null(),
            GucContext::Suset as isize as _,
            flags.bits(),
            None,
            None,
            Some(show_masked),
        );
    }
}

/// True while the library is being loaded by `shared_preload_libraries`.
pub fn loading_at_server_start() -> bool {
    // SAFETY: a plain bool global that PostgreSQL sets while it processes
    // shared_preload_libraries; read here from `_PG_init` in the backend's
    // main thread, where nothing writes it concurrently.
    unsafe { pg_sys::process_shared_preload_libraries_in_progress }
}

/// Memory-maps a read-only asset file (the extension's [`dptext_core::embeddings::MapFn`]).
pub fn map_file(path: &Path) -> std::io::Result<SharedBytes> {
    let file = std::fs::File::open(path)?;
    // SAFETY: the map is read-only and private to this process. Undefined
    // behaviour would need the file's contents to change while mapped:
    // `dptext assets fetch` never writes an installed file in place, it
    // removes the asset directory and writes new files (new inodes), so a
    // mapped file keeps its contents until it is unmapped.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    Ok(Arc::new(map))
}

/// Registers the security label provider `dptext`; called once from
/// `_PG_init`. Labels can be set in every backend that loaded the library
/// (with `shared_preload_libraries = 'dptext'`, every backend).
pub fn register_label_provider() {
    // SAFETY: called from `_PG_init` in the backend's main thread; the
    // provider name is a 'static NUL-terminated string (PostgreSQL keeps
    // the pointer) and the hook is a valid `check_object_relabel_type`.
    unsafe { pg_sys::register_label_provider(c"dptext".as_ptr(), Some(check_relabel)) }
}

/// The label provider's hook: called by `SECURITY LABEL FOR dptext` before
/// the label is stored; an ERROR refuses it.
#[pg_guard]
unsafe extern "C-unwind" fn check_relabel(
    object: *const pg_sys::ObjectAddress,
    seclabel: *const std::ffi::c_char,
) {
    // SAFETY: PostgreSQL passes a valid ObjectAddress for the statement's
    // object (never NULL) and either NULL (label removed) or a
    // NUL-terminated label that outlives this call.
    let (object, label) = unsafe {
        let label = (!seclabel.is_null()).then(|| CStr::from_ptr(seclabel).to_string_lossy());
        (*object, label)
    };
    let target = if object.classId == pg_sys::AuthIdRelationId {
        crate::rules::LabelTarget::Role
    } else if object.classId == pg_sys::RelationRelationId {
        match i16::try_from(object.objectSubId) {
            Ok(attnum) if attnum > 0 => {
                // SAFETY: the relation and column exist (PostgreSQL resolved
                // them before calling the hook and holds a lock); both
                // functions only read the syscache and return 0 / InvalidOid
                // for a missing entry.
                let (relkind, type_oid) = unsafe {
                    (
                        pg_sys::get_rel_relkind(object.objectId) as u8,
                        pg_sys::get_atttype(object.objectId, attnum),
                    )
                };
                crate::rules::LabelTarget::Column { relkind, type_oid }
            }
            Ok(0) => crate::rules::LabelTarget::Relation,
            _ => crate::rules::LabelTarget::Other,
        }
    } else {
        crate::rules::LabelTarget::Other
    };
    if crate::masking::session_is_masked() {
        crate::masking::refuse("masked sessions cannot change dptext labels".into());
    }
    crate::rules::check_label(target, label.as_deref());
    // Other backends cache masking decisions and plans: a label change
    // reaches them as a relation-cache invalidation at commit (labels
    // themselves send none). Role labels and rules inherited through
    // partitions touch many relations, so every relation is invalidated.
    // SAFETY: queues a transactional invalidation message; no arguments.
    unsafe { pg_sys::CacheInvalidateRelcacheAll() };
}

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
