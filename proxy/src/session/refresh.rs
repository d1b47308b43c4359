//! Proxy mode's catalog, read again during a session: a relation that
//! another role created after the session read its catalog is unknown to
//! the analysis (`relation_unresolved`). When a statement is refused for
//! that while the session is idle (every earlier answer delivered, no
//! transaction block open), the relay reads the catalog again over a
//! connection of its own, as the session's upstream role with the
//! session's start-up parameters, prepares the rules it finds in the
//! sanitizer, and analyzes the statement once more
//! (`super::filter`).
//!
//! Why a second connection: the session's own is the client's, and a read
//! there could interleave with an extended-protocol batch or fail in an
//! aborted transaction. The second connection sees what is committed, as
//! the session's next statement (which starts its own snapshot, the
//! session being idle) does. Everything that can go wrong (no connection,
//! a timeout, a rule that cannot be built) leaves the session's catalog as
//! it was and the statement refused as before.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config;
use crate::error::{ProxyError, Result};
use crate::mode::{self, ColumnRule};
use crate::sanitize::Sanitizer;
use crate::upstream::{self, Login};

use super::catalog::{self, SessionCatalog};

/// The least time between two reads of one session: a client that sends
/// unknown names in a loop costs the server one catalog read per period.
pub const MIN_INTERVAL: Duration = Duration::from_secs(5);

/// What a session needs to read its catalog again.
pub struct Refresh {
    /// The upstream server.
    pub cfg: config::Upstream,
    /// The session's upstream login.
    pub login: Login,
    /// The session's start-up parameters (as sent upstream).
    pub params: Vec<(String, String)>,
    /// The configuration's rules.
    pub rules: Vec<ColumnRule>,
    /// The configuration's sanitized relations.
    pub sanitized: Vec<mode::Sanitized>,
    /// The configuration's trusted owners (`masking.trusted_owners`).
    pub trusted_owners: Vec<String>,
    /// The sanitizing pool, which must know every rule before it is used.
    pub sanitizer: Arc<Sanitizer>,
}

impl Refresh {
    /// Whether a read may start now, after one that started at `last`.
    pub fn due(last: Option<Instant>) -> bool {
        last.is_none_or(|t| t.elapsed() >= MIN_INTERVAL)
    }

    /// Reads the catalog over a new connection (connecting and reading
    /// within twice `upstream.connect_timeout_secs`), and prepares its
    /// rules.
    pub async fn load(&self) -> Result<SessionCatalog> {
        let limit = Duration::from_secs(self.cfg.connect_timeout_secs.saturating_mul(2));
        let read = async {
            let mut up = upstream::connect(&self.cfg, &self.login, &self.params).await?;
            let declared = catalog::Declared {
                rules: &self.rules,
                sanitized: &self.sanitized,
                trusted_owners: &self.trusted_owners,
            };
            catalog::load(&mut up, declared).await
        };
        let loaded = tokio::time::timeout(limit, read).await.map_err(|_| {
            ProxyError::Upstream(format!(
                "no catalog within {} s (twice upstream.connect_timeout_secs)",
                limit.as_secs()
            ))
        })??;
        catalog::prepare_rules(&self.sanitizer, &loaded).await?;
        Ok(loaded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_due_first_and_then_once_per_interval() {
        assert!(Refresh::due(None));
        assert!(!Refresh::due(Some(Instant::now())));
        let long_ago = Instant::now().checked_sub(MIN_INTERVAL + Duration::from_millis(10));
        if let Some(t) = long_ago {
            assert!(Refresh::due(Some(t)));
        }
    }
}
