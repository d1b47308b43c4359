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
