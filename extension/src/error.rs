//! The extension's error type and its mapping to SQLSTATEs.
//!
//! Every error leaves through [`raise`], which reports it with the SQLSTATE
//! the architecture fixes: 22023 for invalid parameter values, 58P01 for
//! missing assets (with a hint naming the fetch command) and unbuilt CusText
//! mappings (with a hint naming `dptext.custext_build`), 54000 for inputs
//! over the size limits, PostgreSQL's own 57014 (or terminate) when a
//! call was cancelled, 0A000 for security labels on objects that cannot
//! carry a rule, 42501 for what masking refuses a masked session.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// Everything that can fail in the extension.
#[derive(Debug, thiserror::Error)]
pub enum ExtError {
    /// An error from the core; its kind decides the SQLSTATE (below).
    #[error(transparent)]
    Core(#[from] dptext_core::Error),
    /// A request the extension does not support (a security label on an
    /// object that cannot carry a rule).
    #[error("{0}")]
    Unsupported(String),
    /// A labelled value over the input limit, read by a masked session:
    /// the message names the limit, never the value's size (the exact
    /// length of a raw value is what masking keeps).
    #[error("a labelled value exceeds the input limit of {limit} bytes, so it cannot be masked")]
    MaskedTooLarge {
        /// The limit in force, in bytes.
        limit: usize,
    },
    /// A masked read whose rule failed on the value for a reason that may
    /// describe the value (a parameter the value made invalid, a model
    /// error): the kind's SQLSTATE, the details withheld.
    #[error("a labelled value could not be masked by its rule; the details are not shown to masked sessions, since they may describe the value (an administrator can reproduce it with dptext.apply_rule on the value)")]
    MaskFailed {
        /// The kind of the mechanism's error.
        kind: dptext_core::ErrorKind,
    },
    /// A masked session asked for something masking does not allow, or
    /// masking could not decide (which refuses the statement: fail closed).
    #[error("{0}")]
    Masked(String),
}

impl ExtError {
    fn code(&self) -> PgSqlErrorCode {
        use dptext_core::ErrorKind as K;
        let of_kind = |kind| match kind {
            K::InvalidParameter => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            K::MissingAsset | K::MappingNotBuilt => PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
            K::InputTooLarge => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            K::CorruptAsset => PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            K::Io => PgSqlErrorCode::ERRCODE_IO_ERROR,
            K::Cancelled => PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            K::Model => PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
        };
        match self {
            ExtError::Core(e) => of_kind(e.kind()),
            ExtError::MaskFailed { kind } => of_kind(*kind),
            ExtError::Unsupported(_) => PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            ExtError::MaskedTooLarge { .. } => PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            ExtError::Masked(_) => PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        }
    }

    /// The hint, in this front end's terms (its settings).
    fn hint(&self) -> Option<&'static str> {
        use dptext_core::ErrorKind as K;
        match self {
            ExtError::Core(e) => match e.kind() {
                K::MappingNotBuilt => Some(
                    "SET dptext.custext_build = on (superuser) and run the call again: the mapping is built once (minutes of CPU) and cached on disk",
                ),
                K::InputTooLarge => Some(
                    "raise dptext.max_input_bytes (dptext.max_detect_bytes for detect_pii, deidentify, ndd and ndd_distort) or split the text",
                ),
                _ => e.hint(),
            },
            ExtError::MaskedTooLarge { .. } => Some(
                "raise dptext.max_input_bytes (dptext.max_detect_bytes for detect_pii, deidentify, ndd and ndd_distort) for the masked role",
            ),
            ExtError::Unsupported(_) | ExtError::Masked(_) | ExtError::MaskFailed { .. } => None,
        }
    }
}

/// Reports `e` as a PostgreSQL ERROR; never returns.
pub fn raise(e: ExtError, funcname: &'static str) -> ! {
    if matches!(e, ExtError::Core(dptext_core::Error::Cancelled)) {
        // Core stopped because PostgreSQL has a cancel or terminate
        // pending: PostgreSQL raises its own error for it.
        crate::pg::interrupts::raise_pending(funcname);
    }
    let mut report = ErrorReport::new(e.code(), e.to_string(), funcname);
    if let Some(h) = e.hint() {
        report = report.set_hint(h);
    }
    report.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Raises the refusal every masking failure ends in: SQLSTATE 42501.
pub(crate) fn refuse(message: String) -> ! {
    raise(ExtError::Masked(message), "dptext masking")
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
