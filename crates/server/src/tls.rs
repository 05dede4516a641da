//! TLS for `goodput serve`: a certificate chain and its private key from PEM files, served
//! with rustls (ring), HTTP/2 and HTTP/1.1 offered by ALPN.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// Why the TLS configuration could not be built; names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--tls-cert {0}: {1}")]
    Cert(String, String),
    #[error("--tls-key {0}: {1}")]
    Key(String, String),
    #[error("the certificate and key do not go together: {0}")]
    Mismatch(rustls::Error),
}

/// The server's TLS configuration from `cert` (PEM, the leaf first, then intermediates) and
/// `key` (PEM: PKCS#8, PKCS#1 or SEC1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let name = |p: &Path| p.display().to_string();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| TlsError::Cert(name(cert), e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::Cert(name(cert), "no PEM certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key(name(key), e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Mismatch)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Mismatch)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
