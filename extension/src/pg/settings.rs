//! A secret setting: `dptext.key`, registered with a show hook so that
//! `SHOW`, `current_setting` and `pg_settings` never display it.

use std::ffi::{CStr, CString};

use pgrx::{pg_sys, GucContext, GucFlags, GucSetting};

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

thread_local! {
    /// PostgreSQL's record of each setting asked about by name: the
    /// records live as long as the process, so each is found once.
    static RECORDS: std::cell::RefCell<std::collections::HashMap<&'static str, usize>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// PostgreSQL's record of setting `name`, found once per process.
fn record(name: &'static str) -> Option<*const pg_sys::config_generic> {
    let record = RECORDS.with(|r| r.borrow().get(name).copied()).or_else(|| {
        // SAFETY: PostgreSQL's array of setting records holds
        // as many valid pointers as it says, each with a NUL-terminated
        // name; read in the backend's only thread.
        let found = unsafe {
            let (vars, n) = crate::pg::version::setting_records();
            (0..n)
                .map(|i| *vars.add(i))
                .find(|g| {
                    !g.is_null()
                        && CStr::from_ptr((**g).name)
                            .to_bytes()
                            .eq_ignore_ascii_case(name.as_bytes())
                })
                .map(|g| g as usize)
        };
        if let Some(g) = found {
            RECORDS.with(|r| r.borrow_mut().insert(name, g));
        }
        found
    });
    record.map(|g| g as *const pg_sys::config_generic)
}

/// Whether a value from `source`, set by role `srole`, is the session's own
/// choice: a start-up option of the client, a `SET` or `set_config()`, by
/// a role that is not a superuser.
fn by_session(source: pg_sys::GucSource::Type, srole: pg_sys::Oid) -> bool {
    use pg_sys::GucSource as S;
    matches!(
        source,
        S::PGC_S_CLIENT | S::PGC_S_INTERACTIVE | S::PGC_S_TEST | S::PGC_S_SESSION
    ) && !super::catalog::is_superuser(srole)
}

/// True when the current value of setting `name` was chosen by the
/// session itself, as a role that is not a superuser: a start-up option
/// of the client (`PGOPTIONS=-c ...`), a `SET` or `set_config()` (where
/// `SET ON PARAMETER` was granted), rather than the server's
/// configuration, an administrator's `ALTER ROLE/DATABASE ... SET` or a
/// superuser's `SET` before `SET ROLE`. False for a setting that does not
/// exist.
pub fn chosen_by_session(name: &'static str) -> bool {
    let Some(g) = record(name) else {
        return false;
    };
    // SAFETY: a setting's record is never freed or moved (the array of
    // pointers may be re-sorted, the records are not); `source` and
    // `srole` are plain fields.
    let (source, srole) = unsafe { ((*g).source, (*g).srole) };
    by_session(source, srole)
}

/// Whether the session takes DEBUG messages (`client_min_messages` at
/// `debug1` or below), which PostgreSQL sends it without the log hook.
pub fn client_takes_debug() -> bool {
    // SAFETY: a GUC's C variable, read in the backend's own thread.
    unsafe { pg_sys::client_min_messages <= pg_sys::DEBUG1 as std::ffi::c_int }
}

/// True when the session chose ([`chosen_by_session`]) a value of integer
/// setting `name` above the administrator's: the value `RESET` restores
/// (the server's configuration, or an `ALTER ROLE/DATABASE ... SET`
/// default), or 0 when that too is the session's own (a start-up option
/// of the client). False for a setting that does not exist or is not an
/// integer.
pub fn raised_by_session(name: &'static str) -> bool {
    let Some(g) = record(name) else {
        return false;
    };
    // SAFETY: as in [`chosen_by_session`]; the reset fields are plain too.
    let (source, srole, reset_source, reset_srole) =
        unsafe { ((*g).source, (*g).srole, (*g).reset_source, (*g).reset_srole) };
    if !by_session(source, srole) {
        return false;
    }
    let Ok(c) = CString::new(name) else {
        return false;
    };
    // SAFETY: a NUL-terminated name of a setting that exists (it has a
    // record, above); both calls return NUL-terminated strings PostgreSQL
    // owns, read at once.
    let (now, reset) = unsafe {
        let now = pg_sys::GetConfigOption(c.as_ptr(), true, false);
        let reset = pg_sys::GetConfigOptionResetString(c.as_ptr());
        if now.is_null() || reset.is_null() {
            return false;
        }
        (
            CStr::from_ptr(now).to_string_lossy().parse::<i64>(),
            CStr::from_ptr(reset).to_string_lossy().parse::<i64>(),
        )
    };
    let base = if by_session(reset_source, reset_srole) {
        Ok(0)
    } else {
        reset
    };
    matches!((now, base), (Ok(n), Ok(b)) if n > b)
}
