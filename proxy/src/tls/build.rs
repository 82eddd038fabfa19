//! rustls configs for the two sides of mesh mTLS.
//!
//! ALPN: the control plane sends Istio's lists, `istio-peer-exchange, istio`
//! on the client and `h2, http/1.1` on the server. BoringSSL (Envoy) simply
//! negotiates nothing when the lists do not meet; rustls refuses the
//! handshake (`no_application_protocol`). So, as Istio's own sidecars do
//! (`ALPNInMeshH2WithMxc` on clients, `ALPNDownstreamWithMxc` on servers):
//! the client adds the protocol it will speak (`h2` for an HTTP/2 upstream,
//! `http/1.1` for HTTP/1.1), and a server that verifies client certificates
//! also accepts the mesh names, after its own, so that a TCP client still
//! completes the handshake and an HTTP client gets its protocol.

use std::sync::{Arc, LazyLock};

use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SignatureScheme};

use super::TlsError;
use super::identity::PeerIdentities;
use super::verify::SpiffeServerVerifier;
use crate::state::{CertificateSecret, ValidationSecret};

/// What Istio's clients offer on mesh mTLS, so servers can tell mesh traffic.
pub const MESH_ALPN: [&str; 2] = ["istio-peer-exchange", "istio"];

/// The protocol the client will speak inside TLS: decides the ALPN it adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppProtocol {
    Tcp,
    Http1,
    Http2,
}

impl AppProtocol {
    fn alpn(self) -> Option<&'static str> {
        match self {
            AppProtocol::Tcp => None,
            AppProtocol::Http1 => Some("http/1.1"),
            AppProtocol::Http2 => Some("h2"),
        }
    }
}

/// One ring provider for every config: building it per config would be cheap
/// too, but sharing it keeps the configs' algorithm lists identical.
static PROVIDER: LazyLock<Arc<CryptoProvider>> = LazyLock::new(|| Arc::new(rustls::crypto::ring::default_provider()));

/// The workload certificate with its parsed signing key; checked to match.
pub(crate) fn certified_key(cert: &CertificateSecret) -> Result<Arc<CertifiedKey>, TlsError> {
    CertifiedKey::from_der(cert.chain.clone(), cert.key.clone_key(), &PROVIDER)
        .map(Arc::new)
        .map_err(TlsError::Certificate)
}

/// A client config that presents `cert`, and accepts a server whose chain
/// leads to `roots` and whose identity `accept` allows. `alpn` is the
/// cluster's list (Istio's); `app` adds the protocol spoken inside.
pub fn client_config(
    cert: &CertificateSecret,
    roots: &ValidationSecret,
    accept: PeerIdentities,
    alpn: &[String],
    app: AppProtocol,
) -> Result<ClientConfig, TlsError> {
    client_config_with(certified_key(cert)?, Arc::clone(&roots.roots), accept, alpn, app)
}

pub(crate) fn client_config_with(
    key: Arc<CertifiedKey>,
    roots: Arc<RootCertStore>,
    accept: PeerIdentities,
    alpn: &[String],
    app: AppProtocol,
) -> Result<ClientConfig, TlsError> {
    let verifier = SpiffeServerVerifier::new(roots, PROVIDER.signature_verification_algorithms, accept);
    let mut config = ClientConfig::builder_with_provider(Arc::clone(&PROVIDER))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_cert_resolver(Arc::new(WorkloadCert(key)));
    let mut protocols: Vec<Vec<u8>> = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    if let Some(p) = app.alpn().filter(|p| !alpn.iter().any(|a| a == p)) {
        protocols.push(p.as_bytes().to_vec());
    }
    config.alpn_protocols = protocols;
    Ok(config)
}

/// A server config that presents `cert`. With `roots`, client certificates
/// are verified against them, and required when `require_client_cert`
/// (STRICT/PERMISSIVE mesh chains); without, none is asked for.
pub fn server_config(
    cert: &CertificateSecret,
    roots: Option<&ValidationSecret>,
    require_client_cert: bool,
    alpn: &[String],
) -> Result<ServerConfig, TlsError> {
    server_config_with(certified_key(cert)?, roots.map(|r| Arc::clone(&r.roots)), require_client_cert, alpn)
}

pub(crate) fn server_config_with(
    key: Arc<CertifiedKey>,
    roots: Option<Arc<RootCertStore>>,
    require_client_cert: bool,
    alpn: &[String],
) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(Arc::clone(&PROVIDER))
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let mesh = roots.is_some();
    let verifier = match roots {
        Some(roots) => {
            let b = WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&PROVIDER));
            let b = if require_client_cert { b } else { b.allow_unauthenticated() };
            b.build().map_err(TlsError::Verifier)?
        }
        None if require_client_cert => return Err(TlsError::ClientCertWithoutValidation),
        None => WebPkiClientVerifier::no_client_auth(),
    };
    let mut config = builder.with_client_cert_verifier(verifier).with_cert_resolver(Arc::new(WorkloadCert(key)));
    let mut protocols: Vec<Vec<u8>> = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    if mesh {
        for p in MESH_ALPN {
            if !alpn.iter().any(|a| a == p) {
                protocols.push(p.as_bytes().to_vec());
            }
        }
    }
    config.alpn_protocols = protocols;
    Ok(config)
}

/// Presents the one workload certificate on both sides; sharing the parsed
/// key means a rotation parses it once, not once per config.
#[derive(Debug)]
pub(crate) struct WorkloadCert(pub(crate) Arc<CertifiedKey>);

impl ResolvesClientCert for WorkloadCert {
    fn resolve(&self, _root_hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
    fn has_certs(&self) -> bool {
        true
    }
}

impl ResolvesServerCert for WorkloadCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}
