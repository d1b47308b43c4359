//! The extension's error type and its mapping to SQLSTATEs.
//!
//! Every error leaves through [`raise`], which reports it with the SQLSTATE
//! the architecture fixes: 22023 for invalid parameter values, 58P01 for
//! missing assets (with a hint naming the fetch command), 54000 for inputs
//! over the size limit, 0A000 for security labels on objects that cannot
//! carry a rule, 42501 for what masking refuses a masked session.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Everything that can fail in the extension.
#[derive(Debug, thiserror::Error)]
pub enum ExtError {
    /// An error from the core, carrying its own SQLSTATE.
    #[error(transparent)]
    Core(#[from] dptext_core::Error),
    /// A request the extension does not support (a security label on an
    /// object that cannot carry a rule).
    #[error("{0}")]
    Unsupported(String),
    /// A masked session asked for something masking does not allow, or
    /// masking could not decide (which refuses the statement: fail closed).
    #[error("{0}")]
    Masked(String),
}

impl ExtError {
    fn code(&self) -> PgSqlErrorCode {
        match self {
            ExtError::Core(e) => match e.sqlstate() {
                "22023" => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "58P01" => PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
                "54000" => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                "XX001" => PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                "58030" => PgSqlErrorCode::ERRCODE_IO_ERROR,
                _ => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            },
            ExtError::Unsupported(_) => PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            ExtError::Masked(_) => PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            ExtError::Core(e) => e.hint(),
            ExtError::Unsupported(_) | ExtError::Masked(_) => None,
        }
    }
}

/// Reports `e` as a PostgreSQL ERROR; never returns.
pub fn raise(e: ExtError, funcname: &'static str) -> ! {
    let mut report = ErrorReport::new(e.code(), e.to_string(), funcname);
    if let Some(h) = e.hint() {
        report = report.set_hint(h);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Unwraps a result or raises its error with the right SQLSTATE.
pub trait OrRaise<T> {
    /// The value, or an ERROR reported from `funcname`.
    fn or_raise(self, funcname: &'static str) -> T;
}

impl<T, E: Into<ExtError>> OrRaise<T> for Result<T, E> {
    fn or_raise(self, funcname: &'static str) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(e.into(), funcname),
        }
    }
}
