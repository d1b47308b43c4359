//! `dptext-proxy`: PostgreSQL clients connect to it as to PostgreSQL; each
//! client user is mapped to its own upstream login, and a masked user only
//! ever to a role that the database itself masks (`SECURITY LABEL FOR
//! dptext ON ROLE r IS 'MASKED'`), checked at every session start. Rows
//! are relayed as they come: masking happens at the source.
//!
//! - [`admission`]: slots for connections still starting up and for
//!   authenticated sessions, and the start-up deadline;
//! - [`config`]: the TOML file (`dptext-proxy check FILE` validates it and
//!   runs the masking check for every user);
//! - [`session`]: start-up, SCRAM-SHA-256 of client users, the upstream
//!   connection, cancel requests and the relay, by phase;
//! - [`masking`]: the masking check over a control connection;
//! - [`upstream`]: the server side; [`wire`]: protocol framing;
//! - [`tls`], [`metrics`];
//! - [`analysis`]: the statement analyzer of proxy mode (allow-list,
//!   protected columns, parse cache).
//!
//! The threat model is in docs/proxy.md.

#![forbid(unsafe_code)]

pub mod admission;
pub mod analysis;
pub mod config;
pub mod error;
pub mod masking;
pub mod metrics;
pub mod mode;
pub mod sanitize;
pub mod session;
pub mod tls;
pub mod upstream;
pub mod wire;

use std::sync::{Arc, PoisonError, RwLock};

/// Loads and checks a configuration file: the file itself
/// ([`config::Config::load`]) and the TLS files it names ([`tls::check`]).
pub fn load_config(path: &std::path::Path) -> error::Result<config::Config> {
    let c = config::Config::load(path)?;
    tls::check(&c)?;
    Ok(c)
}

use tokio::net::TcpListener;

pub use error::{ProxyError, Result};

/// A serving proxy: the configuration in force, replaced on reload
/// (sessions keep the one they started with), and what outlives reloads:
/// the slots ([`admission`], whose limits follow reloads), the sessions
/// that can be cancelled, and the secret that SCRAM salts derive from when
/// the file sets no `key`.
pub struct Proxy {
    current: RwLock<Arc<session::Shared>>,
    admission: Arc<admission::Admission>,
    cancels: Arc<session::cancel::Cancels>,
    secret: [u8; 32],
}

impl Proxy {
    /// A proxy serving `config`.
    pub fn new(config: config::Config) -> Result<Arc<Self>> {
        let secret: [u8; 32] = rand::random();
        let admission = admission::Admission::new(&config.limits);
        let shared = session::Shared::new(config, &secret)?;
        Ok(Arc::new(Proxy {
            current: RwLock::new(Arc::new(shared)),
            admission,
            cancels: Arc::default(),
            secret,
        }))
    }

    /// Serves `config` to sessions that start from now on; its slot
    /// limits apply at once.
    pub fn reload(&self, config: config::Config) -> Result<()> {
        let limits = config.limits.clone();
        let shared = Arc::new(session::Shared::new(config, &self.secret)?);
        self.admission.set_limits(&limits);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = shared;
        Ok(())
    }

    /// The configuration in force.
    pub fn shared(&self) -> Arc<session::Shared> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The slots.
    pub fn admission(&self) -> &admission::Admission {
        &self.admission
    }

    /// The sessions that can be cancelled now.
    pub fn cancels(&self) -> &session::cancel::Cancels {
        &self.cancels
    }
}

/// Accepts clients on `listener` until the process ends. Every connection
/// gets a pending slot (the oldest pending one may be closed for it); it
/// takes a session slot once it has authenticated.
pub async fn serve(listener: TcpListener, proxy: Arc<Proxy>) -> Result<()> {
    loop {
        let (socket, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors, most often: wait for sessions
                // to end rather than stop serving.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let shared = proxy.shared();
        let startup = std::time::Duration::from_secs(shared.config.limits.startup_timeout_secs);
        let slot = proxy.admission.pending(startup);
        let cancels = proxy.cancels.clone();
        tokio::spawn(async move {
            if let Err(e) = session::accept(socket, shared, cancels, slot).await {
                tracing::info!(%peer, error = %e, "session ended with an error");
            }
        });
    }
}
