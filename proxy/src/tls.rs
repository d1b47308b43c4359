//! TLS for client connections: rustls with the certificate and key of the
//! `[tls]` section.

use std::sync::Arc;

use pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use pgwire::tokio::tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use pgwire::tokio::tokio_rustls::rustls::ServerConfig;
use pgwire::tokio::tokio_rustls::TlsAcceptor;

use crate::config::Tls;
use crate::error::{ProxyError, Result};

/// A TLS acceptor from PEM files.
pub fn acceptor(t: &Tls) -> Result<TlsAcceptor> {
    let bad =
        |what: &str, e: &dyn std::fmt::Display| ProxyError::Config(format!("tls.{what}: {e}"));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&t.cert)
        .map_err(|e| bad("cert", &e))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("cert", &e))?;
    if certs.is_empty() {
        return Err(bad("cert", &"no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&t.key).map_err(|e| bad("key", &e))?;
    let config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("cert", &e))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
