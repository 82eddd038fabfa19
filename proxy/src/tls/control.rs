//! The TLS gRPC channel to the control plane's secure port (istiod's 15012):
//! the CA, and workload discovery, are served only there.
//!
//! The control plane's serving certificate is verified against the root in
//! `root_ca` (istiod's `root-cert.pem`) and, like ztunnel's
//! `ALT_XDS_HOSTNAME`, against `alt_hostname` when given (a DNS name the
//! certificate carries, e.g. `istiod.istio-system.svc`), since the address
//! dialled is often a bare IP the certificate does not name.

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use super::TlsError;

/// A lazily connecting channel to `address` (`https://HOST:PORT`): built
/// without any I/O but reading `root_ca`, so a bad address or root fails
/// here and an unreachable server only fails the calls.
pub fn control_plane_channel(
    address: &str,
    root_ca: &std::path::Path,
    alt_hostname: Option<&str>,
) -> Result<Channel, TlsError> {
    let bad_address = |reason: String| TlsError::ControlPlaneAddress { address: address.to_string(), reason };
    if !address.starts_with("https://") {
        return Err(bad_address("the control plane is reached over TLS only: use https://HOST:PORT".into()));
    }
    let pem = std::fs::read(root_ca)
        .map_err(|e| TlsError::RootCa { path: root_ca.display().to_string(), reason: e.to_string() })?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        let reason = "no PEM certificate in it".to_string();
        return Err(TlsError::RootCa { path: root_ca.display().to_string(), reason });
    }
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
    if let Some(name) = alt_hostname.filter(|n| !n.is_empty()) {
        tls = tls.domain_name(name);
    }
    let endpoint = Endpoint::from_shared(address.to_string()).map_err(|e| bad_address(e.to_string()))?;
    Ok(endpoint.tls_config(tls).map_err(|e| bad_address(e.to_string()))?.connect_lazy())
}
