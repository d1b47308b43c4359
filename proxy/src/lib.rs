//! `dptext-proxy`: PostgreSQL clients connect to it as to PostgreSQL, and
//! protected text columns come back sanitized, by rule, fail-closed.
//!
//! - [`config`]: the TOML file (`dptext-proxy check FILE` validates it);
//! - [`session`]: startup, SCRAM-SHA-256 of client users, the upstream
//!   connection and the message-level relay;
//! - [`policy`]: which columns are sanitized and how; [`values`]: one value
//!   in its type and wire format; [`pool`]: the sanitization workers;
//! - [`wire`]: protocol framing; [`upstream`]: the server side.
//!
//! The threat model is in docs/proxy.md.

pub mod config;
pub mod error;
pub mod metrics;
pub mod policy;
pub mod pool;
pub mod session;
pub mod tls;
pub mod upstream;
pub mod values;
pub mod wire;

use std::sync::Arc;

use tokio::net::TcpListener;

pub use error::{ProxyError, Result};

/// Builds the shared state (engine, workers, users) for `config`.
pub fn shared(config: config::Config) -> Result<Arc<session::Shared>> {
    let dir =
        dptext_core::assets::resolve_dir(config.assets_dir.as_deref().map(std::path::Path::new));
    let mut ec = dptext_core::EngineConfig::new(dir);
    ec.build_mappings = false;
    ec.device = config.device()?;
    ec.mlm_dir = config.mlm_model.as_ref().map(std::path::PathBuf::from);
    let engine = Arc::new(dptext_core::Engine::new(ec));
    let workers = config
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let pool = pool::Pool::new(engine, config.random_mode()?, workers);
    Ok(Arc::new(session::Shared::new(config, pool)?))
}

/// The configuration in force: replaced on reload (SIGHUP); sessions keep
/// the one they started with.
pub type Current = Arc<std::sync::RwLock<Arc<session::Shared>>>;

/// Wraps shared state for [`serve`].
pub fn current(shared: Arc<session::Shared>) -> Current {
    Arc::new(std::sync::RwLock::new(shared))
}

/// Accepts clients on `listener` until the process ends.
pub async fn serve(listener: TcpListener, current: Current) -> Result<()> {
    let max = current
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .config
        .limits
        .max_sessions;
    let limit = Arc::new(tokio::sync::Semaphore::new(max));
    loop {
        let (socket, peer) = listener.accept().await?;
        let _ = socket.set_nodelay(true);
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "too many sessions; refusing");
            metrics::inc(&metrics::METRICS.sessions_failed);
            tokio::spawn(async move {
                let mut s = socket;
                let e = wire::error("FATAL", "53300", "dptext-proxy: too many sessions");
                let _ = tokio::io::AsyncWriteExt::write_all(&mut s, &e.to_bytes()).await;
            });
            continue;
        };
        let shared = current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        tokio::spawn(async move {
            if let Err(e) = session::accept(socket, shared).await {
                tracing::info!(%peer, error = %e, "session ended with an error");
            }
            drop(permit);
        });
    }
}
