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
    /// Network I/O.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
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
            ProxyError::Io(_) => "08006",
        }
    }
}

/// Result alias of the proxy.
pub type Result<T, E = ProxyError> = std::result::Result<T, E>;
