//! The extension's own catalog queries (labels, families, provenance):
//! read-only SPI, run under a snapshot taken at the lookup, and flagged
//! while they run so that the planner hook leaves them unmasked (they read
//! no labelled column, and masking them would recurse).

use std::cell::Cell;

use pgrx::prelude::*;

thread_local! {
    /// Set while the extension runs its own catalog queries, whose planning
    /// must not be masked (and could not be: they read no labelled column).
    static IN_LOOKUP: Cell<bool> = const { Cell::new(false) };
}

/// The first row's first value of a read-only catalog query. pgrx's
/// `Spi::get_one*` run their query as a write (they take a transaction id
/// first), which a parallel worker cannot do (a masked read planned there
/// through SPI failed: "cannot assign XIDs during a parallel operation"),
/// which a hot standby refuses, and which gave every masked session's
/// first statement a transaction id of its own; the masking lookups only
/// read.
pub(crate) fn read_one<T: FromDatum + IntoDatum>(
    sql: &str,
    args: &[pgrx::datum::DatumWithOid<'_>],
) -> Result<Option<T>, pgrx::spi::Error> {
    Spi::connect(|client| client.select(sql, Some(1), args)?.first().get_one::<T>())
}

/// [`read_one`] of the first row's first two values.
pub(crate) fn read_two<A: FromDatum + IntoDatum, B: FromDatum + IntoDatum>(
    sql: &str,
    args: &[pgrx::datum::DatumWithOid<'_>],
) -> Result<(Option<A>, Option<B>), pgrx::spi::Error> {
    Spi::connect(|client| client.select(sql, Some(1), args)?.first().get_two::<A, B>())
}

/// True while the extension's own catalog queries are being planned.
pub(crate) fn in_lookup() -> bool {
    IN_LOOKUP.with(Cell::get)
}

/// Runs `f` with [`in_lookup`] set, restoring the previous state even when
/// `f` raises an error, under a snapshot taken now: what it reads of the
/// catalog (labels, families, provenance) is what is committed, whatever
/// snapshot the query or its transaction holds
/// ([`crate::pg::catalog::with_latest_snapshot`]).
pub(crate) fn lookup<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_LOOKUP.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(IN_LOOKUP.with(|c| c.replace(true)));
    crate::pg::catalog::with_latest_snapshot(f)
}
