//! SPIFFE identities in certificates (the ids themselves are
//! [`crate::identity`]'s): reading them (for telemetry's
//! `source_principal`/`destination_principal`) and deciding which peers a
//! client accepts.

use std::fmt;

use rustls::pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::identity::{is_spiffe, trust_domain};

/// The SPIFFE ID of a certificate: its first `spiffe://` URI SAN. None for a
/// certificate that does not parse or has none.
pub fn spiffe_id(cert: &CertificateDer<'_>) -> Option<String> {
    subject_alt_names(cert)?.into_iter().find(|n| is_spiffe(n))
}

/// The URI and DNS subject alternative names of a certificate.
fn subject_alt_names(cert: &CertificateDer<'_>) -> Option<Vec<String>> {
    let (_, parsed) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let san = parsed.subject_alternative_name().ok()??;
    Some(
        san.value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::URI(s) | GeneralName::DNSName(s) => Some(s.to_string()),
                _ => None,
            })
            .collect(),
    )
}

/// The verified identity of the peer of a TLS connection (its SPIFFE ID).
/// Only meaningful after the handshake and when the peer was verified, which
/// every config of this module does when it asks for a certificate.
pub fn identity_of(conn: &rustls::CommonState) -> Option<String> {
    conn.peer_certificates()?.first().and_then(spiffe_id)
}

/// The client's identity on an accepted connection: `source_principal`.
pub fn peer_identity<IO>(stream: &tokio_rustls::server::TlsStream<IO>) -> Option<String> {
    identity_of(stream.get_ref().1)
}

/// The server's identity on an upstream connection: `destination_principal`.
pub fn server_identity<IO>(stream: &tokio_rustls::client::TlsStream<IO>) -> Option<String> {
    identity_of(stream.get_ref().1)
}

/// Which verified peers a client accepts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PeerIdentities {
    /// Any of these SANs (SPIFFE IDs or DNS names, exact): the cluster's
    /// `subject_alt_names` when the control plane sent some.
    AnyOf(Vec<String>),
    /// Any SPIFFE ID in this trust domain: Istio's default when the control
    /// plane names no identities, since the root alone may be shared by
    /// several trust domains.
    TrustDomain(String),
    /// Any SPIFFE ID: for HBONE, whose configs are shared by every peer of a
    /// certificate, and whose caller checks the exact identity after the
    /// handshake.
    AnySpiffe,
}

impl PeerIdentities {
    /// Checks the end-entity certificate; the error says what was presented.
    pub(crate) fn check(&self, cert: &CertificateDer<'_>) -> Result<(), IdentityMismatch> {
        let presented = subject_alt_names(cert).unwrap_or_default();
        let ok = match self {
            PeerIdentities::AnyOf(want) => presented.iter().any(|p| want.contains(p)),
            PeerIdentities::TrustDomain(td) => {
                presented.iter().filter(|p| is_spiffe(p)).any(|p| trust_domain(p) == Some(td.as_str()))
            }
            PeerIdentities::AnySpiffe => presented.iter().any(|p| is_spiffe(p)),
        };
        if ok { Ok(()) } else { Err(IdentityMismatch { presented, wanted: self.clone() }) }
    }
}

/// A verified peer whose identity is not one the client accepts; carried in
/// rustls's `CertificateError::Other` so the handshake error says why.
pub struct IdentityMismatch {
    pub presented: Vec<String>,
    pub wanted: PeerIdentities,
}

impl fmt::Display for IdentityMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.wanted {
            PeerIdentities::AnyOf(w) => write!(f, "peer identity {:?} is none of {:?}", self.presented, w),
            PeerIdentities::TrustDomain(td) => {
                write!(f, "peer identity {:?} is not in trust domain {td:?}", self.presented)
            }
            PeerIdentities::AnySpiffe => write!(f, "peer identity {:?} has no SPIFFE ID", self.presented),
        }
    }
}

// rustls shows `CertificateError::Other` with `{:?}`: make that the readable text.
impl fmt::Debug for IdentityMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for IdentityMismatch {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_certificate_has_no_identity() {
        let junk = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01]);
        assert_eq!(spiffe_id(&junk), None);
        let td = PeerIdentities::TrustDomain("cluster.local".into());
        assert!(td.check(&junk).is_err());
    }
}
