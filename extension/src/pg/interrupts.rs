//! PostgreSQL's interrupts, its database encoding, and the argument types
//! that check them before a function body runs.
//!
//! **Cancellation.** The engine asks [`check`] from every long loop (see
//! `dptext_core::cancel`), always on the backend's main thread: core only
//! runs a hook on the thread that installed it. [`check`] does not raise:
//! when a cancel or terminate is pending it returns
//! `Err(Error::Cancelled)`, core returns that through its frames (joining
//! its helper threads, releasing its locks), and [`raise_pending`] then
//! lets PostgreSQL raise its own error (57014 "canceling statement due to
//! statement timeout" or "... user request", or the terminate). Other
//! pending interrupts (barriers, memory-context logging, ...) are
//! processed on the spot with `CHECK_FOR_INTERRUPTS`, as any long C loop
//! does; should one of them raise, pgrx turns the error into a Rust panic
//! that unwinds through core, which holds no lock across a check.
//!
//! **Encoding.** pgrx converts `text` and `jsonb` arguments to Rust
//! strings before the function body runs, and panics (XX000) on non-UTF-8
//! bytes. [`Utf8Text`] and [`Params`] check the database encoding first
//! (once per backend) and refuse a non-UTF-8 database with 22021;
//! [`Params`] also reads `jsonb` itself, so that numbers beyond the `f64`
//! range or nesting deeper than 128 levels are 22023 naming the parameter.

use std::ffi::CStr;

use pgrx::callconv::{Arg, ArgAbi};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// The cancellation hook the engine asks (on the backend's main thread).
pub fn check() -> dptext_core::Result<()> {
    // SAFETY: plain `sig_atomic_t`/`uint32` globals that PostgreSQL's
    // signal handlers set; read (not written) on the backend's main thread,
    // the only thread core runs this hook on, as CHECK_FOR_INTERRUPTS does.
    let (pending, cancel, die, holdoff, crit) = unsafe {
        (
            pg_sys::InterruptPending != 0,
            pg_sys::QueryCancelPending != 0,
            pg_sys::ProcDiePending != 0,
            pg_sys::InterruptHoldoffCount,
            pg_sys::CritSectionCount,
        )
    };
    if !pending {
        return Ok(());
    }
    if (cancel || die) && holdoff == 0 && crit == 0 {
        return Err(dptext_core::Error::Cancelled);
    }
    pgrx::check_for_interrupts!();
    Ok(())
}

/// Lets PostgreSQL raise the pending cancel or terminate that made core
/// stop; raises 57014 itself if PostgreSQL did not.
pub fn raise_pending(funcname: &'static str) -> ! {
    pgrx::check_for_interrupts!();
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
        "canceling statement due to an interrupt",
        funcname,
    )
    .report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

thread_local! {
    static UTF8: std::cell::OnceCell<Option<String>> = const { std::cell::OnceCell::new() };
}

/// `None` in a UTF8 database, else the database encoding's name (looked up
/// once per backend).
pub fn non_utf8_encoding() -> Option<String> {
    UTF8.with(|c| {
        c.get_or_init(|| {
            // SAFETY: reads the backend's database encoding, fixed once the
            // backend is connected; called from SQL functions only, so in
            // a connected backend, on its main thread.
            let enc = unsafe { pg_sys::GetDatabaseEncoding() };
            if enc == pg_sys::pg_enc::PG_UTF8 as i32 {
                None
            } else {
                // SAFETY: a static string owned by PostgreSQL.
                let name = unsafe { CStr::from_ptr(pg_sys::GetDatabaseEncodingName()) };
                Some(name.to_string_lossy().into_owned())
            }
        })
        .clone()
    })
}

/// Raises 22021 in a database whose encoding is not UTF8.
pub fn require_utf8() {
    if let Some(enc) = non_utf8_encoding() {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
            format!("dptext needs a UTF8 database; this database's encoding is {enc}"),
            "dptext",
        )
        .set_hint("create the database with ENCODING 'UTF8' (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0) and load the data there")
        .report(PgLogLevel::ERROR);
    }
}

/// A `text` argument, read after checking that the database is UTF8.
#[derive(Debug, Clone, Copy)]
pub struct Utf8Text<'a>(pub &'a str);

// SAFETY: the SQL type is `text`, which is what `&str` reads.
pgrx::impl_sql_translatable!(Utf8Text<'_>, "text");

// SAFETY: delegates to `&str`'s unboxing for the same SQL type, after a
// check that only reads the database encoding.
unsafe impl<'fcx> ArgAbi<'fcx> for Utf8Text<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        require_utf8();
        // SAFETY: the caller guarantees a non-null `text` argument.
        Utf8Text(unsafe { <&'fcx str as ArgAbi<'fcx>>::unbox_arg_unchecked(arg) })
    }
}

/// A `jsonb` argument holding mechanism parameters, parsed by
/// `dptext_core::mechanisms::parse_params` (errors kept for the body to
/// report with its function's name).
#[derive(Debug)]
pub struct Params(pub dptext_core::Result<serde_json::Value>);

// SAFETY: the SQL type is `jsonb`, which `unbox_arg_unchecked` reads.
pgrx::impl_sql_translatable!(Params, "jsonb");

// SAFETY: reads the argument's datum as jsonb through jsonb_out, like
// pgrx's own `JsonB`, without its panics.
unsafe impl<'fcx> ArgAbi<'fcx> for Params {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        require_utf8();
        // SAFETY: the caller guarantees a non-null argument of type jsonb.
        let datum = unsafe { arg.unbox_arg_using_from_datum::<pg_sys::Datum>() };
        let Some(datum) = datum else {
            return Params(Err(dptext_core::Error::InvalidParameter {
                name: "params",
                reason: "must not be null".into(),
            }));
        };
        // SAFETY: jsonb_out takes a jsonb datum (detoasting it itself) and
        // returns a palloc'd C string in the current memory context.
        let text =
            unsafe { pgrx::direct_function_call::<&CStr>(pg_sys::jsonb_out, &[Some(datum)]) };
        let parsed = match text.map(CStr::to_str) {
            Some(Ok(s)) => dptext_core::mechanisms::parse_params(s),
            _ => Err(dptext_core::Error::InvalidParameter {
                name: "params",
                reason: "is not valid UTF-8 JSON".into(),
            }),
        };
        Params(parsed)
    }
}

/// After `ms`, sets the flags PostgreSQL's cancel signal handler sets, as
/// `pg_cancel_backend` or a statement timeout would (for tests: a `SET
/// statement_timeout` inside a running statement arms nothing, and a
/// cancel sent now is taken by the executor before the call starts).
#[cfg(any(test, feature = "pg_test"))]
pub fn cancel_after(ms: u64) {
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(ms));
        // SAFETY: what StatementCancelHandler does from a signal handler,
        // which may run on any thread: two `volatile sig_atomic_t` stores,
        // read by the main thread's interrupt checks. No PostgreSQL
        // function is called from this thread.
        unsafe {
            std::ptr::write_volatile(&raw mut pg_sys::QueryCancelPending, 1);
            std::ptr::write_volatile(&raw mut pg_sys::InterruptPending, 1);
        }
    });
}
