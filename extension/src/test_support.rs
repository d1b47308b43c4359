//! What both `#[pg_test]` modules use.

use pgrx::prelude::*;

/// The SQLSTATE and message of the ERROR that running `sql` raises.
pub(crate) fn failure_of(sql: &str) -> Option<(PgSqlErrorCode, String)> {
    PgTryBuilder::new(|| {
        Spi::run(sql).ok();
        None
    })
    .catch_others(|e| match e {
        pg_sys::panic::CaughtError::PostgresError(r)
        | pg_sys::panic::CaughtError::ErrorReport(r) => {
            Some((r.sql_error_code(), r.message().to_string()))
        }
        _ => None,
    })
    .execute()
}
