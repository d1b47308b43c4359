//! Who this session is: masked or not. A session is masked when its
//! login role (`session_user`) or its current role is labelled `SECURITY
//! LABEL FOR dptext ON ROLE r IS 'MASKED'`, or has the privileges of a
//! role that is. Cached per role until the next relation-cache
//! invalidation, which label changes send.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::pg_sys::Oid;
use pgrx::prelude::*;

use crate::error::refuse;
use crate::pg::lookup::{lookup, read_one};

thread_local! {
    /// Masked status per role.
    static ROLES: RefCell<HashMap<Oid, bool>> = RefCell::new(HashMap::new());
}

/// Drops the cached status of every role.
pub(crate) fn invalidate() {
    ROLES.with(|r| r.borrow_mut().clear());
}

/// Whether role `$1` has the privileges of (is an inheriting member of,
/// directly or not) a role labelled `MASKED`.
const INHERITS_MASKED_SQL: &str = "
SELECT EXISTS (
  SELECT 1 FROM pg_catalog.pg_shseclabel l
   WHERE l.provider OPERATOR(pg_catalog.=) 'dptext'
     AND l.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_authid'::pg_catalog.regclass
     AND l.objoid OPERATOR(pg_catalog.<>) $1
     AND pg_catalog.pg_has_role($1, l.objoid, 'USAGE'))";

/// True when `role` is labelled `MASKED`, or is not a superuser and has
/// the privileges of a role that is: a member of a masked role reads with
/// that role's grants, so it is masked too (a role that may create roles
/// could otherwise make an unlabelled member of the analyst's role and
/// read through its privileges raw). Superusers have every role's
/// privileges and are masked only by a label of their own.
pub(crate) fn role_is_masked(role: Oid) -> bool {
    if let Some(m) = ROLES.with(|r| r.borrow().get(&role).copied()) {
        return m;
    }
    let masked = crate::pg::catalog::role_label(role).is_some()
        || (!crate::pg::catalog::is_superuser(role)
            && lookup(|| read_one::<bool>(INHERITS_MASKED_SQL, &[role.into()]))
                .unwrap_or_else(|e| refuse(format!("could not read the roles' dptext labels: {e}")))
                .unwrap_or(false));
    ROLES.with(|r| r.borrow_mut().insert(role, masked));
    masked
}

/// True when this session is masked: its login role or its current role
/// is labelled `MASKED`. Nothing the session sets changes either role's
/// label, and `SET ROLE` cannot change the login role.
pub(crate) fn session_is_masked() -> bool {
    let (login, current) = crate::pg::catalog::session_roles();
    role_is_masked(login) || (current != login && role_is_masked(current))
}

/// [`session_is_masked`] when both roles' labels are cached, without
/// reading the catalog.
pub(crate) fn session_is_masked_cached() -> Option<bool> {
    let (login, current) = crate::pg::catalog::session_roles();
    ROLES.with(|r| {
        let r = r.borrow();
        let l = *r.get(&login)?;
        if l || current == login {
            return Some(l);
        }
        r.get(&current).copied()
    })
}

/// The SQL-callable report of the session's masking, in schema `dptext`.
#[pg_schema]
pub mod dptext {
    use pgrx::prelude::*;
    use pgrx::JsonB;

    /// Whether the calling session is masked and can read labelled
    /// columns: `{"masked", "keyed", "key_id", "login_role",
    /// "current_role", "superuser", "writable_tables", "version"}`. The
    /// proxy checks it before it lets a masked user's session start.
    ///
    /// ```sql
    /// SELECT dptext.session_masking();
    /// ```
    #[pg_extern(stable, parallel_safe)]
    fn session_masking() -> JsonB {
        let (login, current) = crate::pg::catalog::session_roles();
        let mode = crate::guc::random_mode();
        let (keyed, key_id) = match &mode {
            Ok(dptext_core::RandomMode::Keyed(k)) => (true, Some(k.key_id())),
            _ => (false, None),
        };
        let writable = super::lookup(|| {
            super::read_one::<i64>(
                "SELECT pg_catalog.count(*) FROM pg_catalog.pg_class c
                  WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog.\"char\"[])
                    AND c.relnamespace OPERATOR(pg_catalog.<>) ALL (ARRAY['pg_catalog'::pg_catalog.regnamespace, 'information_schema'::pg_catalog.regnamespace])
                    AND (pg_catalog.has_table_privilege(c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
                         OR pg_catalog.has_any_column_privilege(c.oid, 'INSERT, UPDATE'))",
                &[],
            )
        })
        .ok()
        .flatten()
        .unwrap_or(0);
        JsonB(serde_json::json!({
            "masked": super::session_is_masked(),
            "keyed": keyed,
            "key_id": key_id,
            "login_role": crate::pg::catalog::role_name(login),
            "current_role": crate::pg::catalog::role_name(current),
            "superuser": crate::pg::catalog::is_superuser(login) || crate::pg::catalog::is_superuser(current),
            "writable_tables": writable,
            "version": env!("CARGO_PKG_VERSION"),
        }))
    }
}
