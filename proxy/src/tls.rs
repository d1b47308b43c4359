//! TLS with rustls: for client connections (the certificate and key of
//! the `[tls]` section), and to the server (`upstream.sslmode`, with the
//! certificate authorities of `upstream.sslrootcert`).

use std::sync::Arc;

use pgwire::tokio::tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use pgwire::tokio::tokio_rustls::rustls::client::WebPkiServerVerifier;
use pgwire::tokio::tokio_rustls::rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider,
};
use pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use pgwire::tokio::tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use pgwire::tokio::tokio_rustls::rustls::pki_types::{ServerName, UnixTime};
use pgwire::tokio::tokio_rustls::rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore,
    ServerConfig, SignatureScheme,
};
use pgwire::tokio::tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::config::{Config, SslMode, Tls, Upstream};
use crate::error::{ProxyError, Result};

/// Checks that the TLS files of `config` load: the `[tls]` certificate and
/// key, and the upstream's `sslrootcert`.
pub fn check(config: &Config) -> Result<()> {
    if let Some(t) = &config.tls {
        acceptor(t)?;
    }
    upstream_connector(&config.upstream)?;
    Ok(())
}

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

/// The connector for `upstream.sslmode`, or `None` when TLS is off
/// (`disable`). Built per connection, so a reload picks up new files.
pub fn upstream_connector(u: &Upstream) -> Result<Option<TlsConnector>> {
    let bad = |e: &dyn std::fmt::Display| ProxyError::Config(format!("upstream.sslrootcert: {e}"));
    let roots = match &u.sslrootcert {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
                roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            }
            if roots.is_empty() {
                return Err(bad(&"no certificate in the file"));
            }
            Some(Arc::new(roots))
        }
        None => None,
    };
    let provider = provider();
    let (chain, check_name) = match (u.sslmode, roots) {
        (SslMode::Disable, _) => return Ok(None),
        (SslMode::Prefer, _) | (SslMode::Require, None) => (None, false),
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
            return Err(ProxyError::Config(format!(
                "upstream.sslmode = \"{}\" needs upstream.sslrootcert (the CA certificates, PEM)",
                if u.sslmode == SslMode::VerifyCa {
                    "verify-ca"
                } else {
                    "verify-full"
                }
            )))
        }
        (mode, Some(roots)) => (
            Some(
                WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| bad(&e))?,
            ),
            mode == SslMode::VerifyFull,
        ),
    };
    let verifier = Arc::new(Verifier {
        provider: provider.clone(),
        chain,
        check_name,
    });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(&e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Some(TlsConnector::from(Arc::new(config))))
}

/// The name the server's certificate is checked against.
pub fn server_name(host: &str) -> Result<ServerName<'static>> {
    ServerName::try_from(host.to_string())
        .map_err(|e| ProxyError::Config(format!("upstream.host \"{host}\" as a TLS name: {e}")))
}

fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default().cloned().unwrap_or_else(|| {
        Arc::new(pgwire::tokio::tokio_rustls::rustls::crypto::ring::default_provider())
    })
}

/// How the server's certificate is checked: not at all (`prefer`, and
/// `require` without CA certificates: encryption without authentication,
/// as in libpq), its chain only (`verify-ca`, and `require` with CA
/// certificates), or its chain and name (`verify-full`). The handshake
/// signatures are always checked.
#[derive(Debug)]
struct Verifier {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, TlsError> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
