//! Catalog reads that the session's `search_path` cannot redirect.
//!
//! Proxy mode reads the catalog as the masked user's upstream role, over
//! the session's own connection (or a second one with the session's
//! start-up parameters, whose `search_path` the client chose). An
//! operator, function or type that a query names without a schema is
//! looked up along that path, and a role that may create objects in a
//! schema of it can create an exact match that PostgreSQL prefers to
//! `pg_catalog`'s (`<>(oid, integer)`, say, where `pg_catalog` needs a
//! cast): its function would run with the role's raw reads, before the
//! session's first statement. So every catalog query names its operators
//! `OPERATOR(pg_catalog.=)` and its functions and types with `pg_catalog`
//! (`super::queries`, whose tests check the text), and runs inside one read-only
//! transaction whose path is `pg_catalog, pg_temp` ([`begin`], [`end`]):
//! the session's own path is read before it, and is back when it ends.

use crate::error::{ProxyError, Result};
use crate::upstream::Upstream;

/// Opens the transaction the catalog is read in: one snapshot for every
/// query, read-only, and `pg_catalog` (then `pg_temp`, which a masked
/// session cannot fill) the only schemas names are looked up in.
const BEGIN_SQL: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
                         SET LOCAL search_path = pg_catalog, pg_temp";

/// Starts the pinned transaction on `up`, which must be idle outside a
/// transaction block.
pub(super) async fn begin(up: &mut Upstream) -> Result<()> {
    up.query(BEGIN_SQL)
        .await?
        .map(|_| ())
        .map_err(|e| ProxyError::Upstream(format!("starting the catalog read: {e}")))
}

/// Ends the pinned transaction: commits it when the reads went well
/// (`ok`), else rolls it back. The session's path is its own again.
pub(super) async fn end(up: &mut Upstream, ok: bool) -> Result<()> {
    let sql = if ok { "COMMIT" } else { "ROLLBACK" };
    up.query(sql)
        .await?
        .map(|_| ())
        .map_err(|e| ProxyError::Upstream(format!("ending the catalog read: {e}")))
}
