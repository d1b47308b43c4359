//! The security label provider `dptext`: PostgreSQL calls its hook before
//! it stores a label; an ERROR refuses the label.

use std::ffi::CStr;

use pgrx::{pg_guard, pg_sys};

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
                crate::rules::LabelTarget::Column {
                    relid: object.objectId,
                    attnum,
                    relkind,
                    type_oid,
                }
            }
            Ok(0) => crate::rules::LabelTarget::Relation,
            _ => crate::rules::LabelTarget::Other,
        }
    } else {
        crate::rules::LabelTarget::Other
    };
    if crate::session::session_is_masked() {
        crate::error::refuse("masked sessions cannot change dptext labels".into());
    }
    let wait_for: fn(pg_sys::Oid) -> Result<(), String> = match target {
        crate::rules::LabelTarget::Role => crate::pg::locks::lock_role_for_relabel,
        crate::rules::LabelTarget::Column { .. } => crate::pg::locks::lock_relations_for_relabel,
        _ => |_| Ok(()),
    };
    crate::rules::check_label(target, label.as_deref());
    // Transactions that planned under the old labels keep their plans
    // until they end: wait for them, as ALTER TABLE does (see
    // `crate::pg::locks`). A valid label only: a refused one changes nothing.
    wait_for(object.objectId).unwrap_or_else(|why| crate::error::refuse(why));
    // Other backends cache masking decisions and plans: a label change
    // reaches them as a relation-cache invalidation at commit (labels
    // themselves send none). Role labels and rules inherited through
    // partitions touch many relations, so every relation is invalidated.
    // SAFETY: queues a transactional invalidation message; no arguments.
    unsafe { pg_sys::CacheInvalidateRelcacheAll() };
}
