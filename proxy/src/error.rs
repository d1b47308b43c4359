//! The one error type of the proxy.

/// Everything that can fail in the proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The configuration file is unreadable or invalid.
    #[error("config: {0}")]
    Config(String),
    /// A client or the upstream broke the protocol.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Authentication of a client failed.
    #[error("password authentication failed for user \"{0}\"")]
    Auth(String),
    /// The upstream server refused or failed.
    #[error("upstream: {0}")]
    Upstream(String),
    /// A masked user's session is refused because its upstream role cannot
    /// be shown to be masked at the source; the text says what to fix.
    #[error("{0}")]
    MaskingUnavailable(String),
    /// A limit of the configuration cut a connection or a session off;
    /// the message names the limit. Built by the constructors below.
    #[error("{message}")]
    Limit {
        /// What the client sees as the SQLSTATE.
        sqlstate: &'static str,
        /// What the client reads.
        message: String,
    },
    /// A client asked for a database the proxy does not serve (3D000, as
    /// PostgreSQL answers for a database that does not exist).
    #[error("dptext-proxy serves database \"{served}\" only, not \"{asked}\": connect with dbname={served}")]
    OtherDatabase {
        /// What the client's StartupMessage named.
        asked: String,
        /// The `[upstream] dbname` of the configuration.
        served: String,
    },
    /// Network I/O.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Proxy mode's sanitizing failed (a value too large, a model error).
    #[error("dptext-proxy: sanitizing failed: {0}")]
    Sanitize(#[from] dptext_core::Error),
    /// A fault of the proxy itself (a sanitizing worker stopped or lost a
    /// value): not the client's doing nor the server's.
    #[error("dptext-proxy: internal error: {0}")]
    Internal(String),
}

/// The SQLSTATE of each kind of core error: the same codes the extension
/// reports for them (`extension/src/error.rs`), so that one failure reads
/// the same in SQL and through the proxy.
pub fn core_sqlstate(kind: dptext_core::ErrorKind) -> &'static str {
    use dptext_core::ErrorKind as K;
    match kind {
        K::InvalidParameter => "22023",
        K::MissingAsset | K::MappingNotBuilt => "58P01",
        K::InputTooLarge => "54000",
        K::CorruptAsset => "XX001",
        K::Io => "58030",
        K::Cancelled => "57014",
        K::Model => "XX000",
    }
}

impl ProxyError {
    /// No session slot left for an authenticated client (53300).
    pub fn too_many_sessions(max: usize) -> Self {
        ProxyError::Limit {
            sqlstate: "53300",
            message: format!(
                "dptext-proxy: too many sessions (limits.max_sessions = {max}): try again later"
            ),
        }
    }

    /// A connection still starting up was closed to make room for a newer
    /// one (53300).
    pub fn too_many_pending(max: usize) -> Self {
        ProxyError::Limit {
            sqlstate: "53300",
            message: format!(
                "dptext-proxy: too many connections still starting up (limits.max_pending = \
                 {max}): this one had waited longest and was closed"
            ),
        }
    }

    /// Start-up and authentication took longer than allowed (57014, as
    /// PostgreSQL's `authentication_timeout`).
    pub fn startup_timeout(secs: u64) -> Self {
        ProxyError::Limit {
            sqlstate: "57014",
            message: format!(
                "dptext-proxy: start-up and authentication took longer than {secs} s \
                 (limits.startup_timeout_secs): connection closed"
            ),
        }
    }

    /// A client silent too long while none of its queries ran (57P05).
    pub fn idle(secs: u64) -> Self {
        ProxyError::Limit {
            sqlstate: "57P05",
            message: format!(
                "dptext-proxy: idle for {secs} s (limits.idle_timeout_secs): session closed"
            ),
        }
    }

    /// A client message declared longer than allowed (08P01); `why` is
    /// what the scanner saw.
    pub fn client_message_too_large(why: &ProxyError) -> Self {
        let why = match why {
            ProxyError::Protocol(m) => m.clone(),
            other => other.to_string(),
        };
        ProxyError::Limit {
            sqlstate: "08P01",
            message: format!(
                "dptext-proxy: protocol: {why} (limits.max_message_bytes): session closed"
            ),
        }
    }

    /// A server message declared longer than allowed (54000): the result
    /// is refused before any of that message is read.
    pub fn server_message_too_large(tag: u8, len: i64, max: usize) -> Self {
        ProxyError::Limit {
            sqlstate: "54000",
            message: format!(
                "dptext-proxy: the server sent a message '{}' of {len} bytes, over \
                 limits.max_message_bytes ({max}): session closed; select less, or raise the \
                 limit",
                char::from(tag)
            ),
        }
    }

    /// A server message longer than allowed in proxy mode (54000),
    /// refused before any of it is read. Unlike
    /// [`ProxyError::server_message_too_large`] it names neither the
    /// message nor its length: there a message other than a row (an
    /// error or a notice that quotes a value) could carry a raw value's
    /// length.
    pub fn proxy_mode_server_message_too_large(max: usize) -> Self {
        ProxyError::Limit {
            sqlstate: "54000",
            message: format!(
                "dptext-proxy: the server sent a message over limits.max_message_bytes ({max}): \
                 session closed; select less, or raise the limit"
            ),
        }
    }

    /// A result row with protected columns that is longer than allowed
    /// once sanitized, or that the server could not build (54000). Judged
    /// on what would be sent, never on the raw row, whose length would
    /// tell the raw values' lengths; the same words for both causes, since
    /// which one it was would tell them too.
    pub fn protected_row_too_large(max: usize) -> Self {
        ProxyError::Limit {
            sqlstate: "54000",
            message: format!(
                "dptext-proxy: a result with protected columns ended early: a row over \
                 limits.max_message_bytes ({max}) once sanitized, or an error of the server \
                 while it sent the rows (a row too large to build, a timeout, a cancel, any \
                 other): session closed; select less, or raise the limit"
            ),
        }
    }
}

impl ProxyError {
    /// The SQLSTATE a client sees for this error.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            ProxyError::Config(_) => "F0000",
            ProxyError::Protocol(_) => "08P01",
            ProxyError::Auth(_) => "28P01",
            ProxyError::Upstream(_) => "08006",
            // invalid_authorization_specification: this login cannot be
            // served until an administrator fixes the upstream.
            ProxyError::MaskingUnavailable(_) => "28000",
            ProxyError::Limit { sqlstate, .. } => sqlstate,
            ProxyError::OtherDatabase { .. } => "3D000",
            ProxyError::Io(_) => "08006",
            ProxyError::Sanitize(e) => core_sqlstate(e.kind()),
            ProxyError::Internal(_) => "XX000",
        }
    }
}

/// Result alias of the proxy.
pub type Result<T, E = ProxyError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A core failure reads the same through the proxy as in SQL (the
    /// extension's table, `extension/src/error.rs`), and the proxy's own
    /// faults are internal errors, not protocol violations.
    #[test]
    fn sqlstates_agree_with_the_extension() {
        use dptext_core::ErrorKind as K;
        for (kind, code) in [
            (K::InvalidParameter, "22023"),
            (K::MissingAsset, "58P01"),
            (K::MappingNotBuilt, "58P01"),
            (K::InputTooLarge, "54000"),
            (K::CorruptAsset, "XX001"),
            (K::Io, "58030"),
            (K::Cancelled, "57014"),
            (K::Model, "XX000"),
        ] {
            assert_eq!(core_sqlstate(kind), code, "{kind:?}");
        }
        assert_eq!(ProxyError::Internal("x".into()).sqlstate(), "XX000");
        assert_eq!(
            ProxyError::Sanitize(dptext_core::Error::Model("m".into())).sqlstate(),
            "XX000"
        );
    }
}
