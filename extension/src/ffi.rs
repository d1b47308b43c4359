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

use std::ffi::{CStr, CString};
use std::path::Path;
use std::sync::Arc;

use dptext_core::embeddings::SharedBytes;

use pgrx::{pg_guard, pg_sys, GucContext, GucFlags, GucSetting};

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
    crate::rules::check_label(target, label.as_deref());
}
