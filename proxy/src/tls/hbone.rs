//! rustls configs for HBONE (port 15008): mutual TLS 1.3 only, AES-GCM
//! suites only, ALPN `h2`, as ztunnel and Istio's waypoints speak it.
//!
//! Both configs are built once per workload certificate, so neither can name
//! the one peer identity a connection expects: the client accepts any SPIFFE
//! id chained to the mesh root and the pool checks the exact destination
//! identity after the handshake, before a single stream is opened; the
//! server requires a client certificate chained to the root, and checks that
//! its SPIFFE id is in our trust domain after the handshake, before it reads
//! a single stream.

use std::sync::{Arc, LazyLock};

use rustls::crypto::CryptoProvider;
use rustls::crypto::ring::cipher_suite::{TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use super::TlsError;
use super::build::WorkloadCert;
use super::identity::PeerIdentities;
use super::verify::SpiffeServerVerifier;

/// The only protocol spoken inside HBONE's TLS.
pub const HBONE_ALPN: &[u8] = b"h2";

/// ring with the two TLS 1.3 AES-GCM suites only (ztunnel's list without
/// FIPS; ChaCha20 is left out as there).
static HBONE_PROVIDER: LazyLock<Arc<CryptoProvider>> = LazyLock::new(|| {
    Arc::new(CryptoProvider {
        cipher_suites: vec![TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256],
        ..rustls::crypto::ring::default_provider()
    })
});

/// The client side of HBONE: presents `key`, accepts a server chained to
/// `roots` with any SPIFFE id (the caller checks which, see the module doc),
/// sends no SNI.
pub fn hbone_client_config(key: Arc<CertifiedKey>, roots: Arc<RootCertStore>) -> Result<ClientConfig, TlsError> {
    let verifier =
        SpiffeServerVerifier::new(roots, HBONE_PROVIDER.signature_verification_algorithms, PeerIdentities::AnySpiffe);
    let mut config = ClientConfig::builder_with_provider(Arc::clone(&HBONE_PROVIDER))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(TlsError::Config)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_cert_resolver(Arc::new(WorkloadCert(key)));
    config.alpn_protocols = vec![HBONE_ALPN.to_vec()];
    config.enable_sni = false;
    Ok(config)
}

/// The server side of HBONE: presents `key`, requires a client certificate
/// chained to `roots` (the caller checks its identity, see the module doc).
pub fn hbone_server_config(key: Arc<CertifiedKey>, roots: Arc<RootCertStore>) -> Result<ServerConfig, TlsError> {
    let verifier = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&HBONE_PROVIDER))
        .build()
        .map_err(TlsError::Verifier)?;
    let mut config = ServerConfig::builder_with_provider(Arc::clone(&HBONE_PROVIDER))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(TlsError::Config)?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(Arc::new(WorkloadCert(key)));
    config.alpn_protocols = vec![HBONE_ALPN.to_vec()];
    Ok(config)
}
