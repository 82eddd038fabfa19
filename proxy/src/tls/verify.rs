//! The client's check of a mesh server: chain to the mesh root, then SPIFFE
//! identity instead of a hostname.
//!
//! rustls's `WebPkiServerVerifier` always checks the certificate against the
//! `ServerName` given to `connect`, and mesh certificates have no DNS names,
//! so it cannot be used as is. rustls 0.23 exposes the two halves it is made
//! of: `verify_server_cert_signed_by_trust_anchor` (webpki path building,
//! validity, EKU serverAuth, no name) and `verify_server_name`. We call the
//! first and replace the second by a SAN check, and take the handshake
//! signature checks from the crypto provider's algorithms, exactly as the
//! stock verifier does. No direct dependency on `rustls-webpki` is needed.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, Error, OtherError, RootCertStore, SignatureScheme};

use super::identity::PeerIdentities;

/// Verifies a server by its chain to `roots` and its SPIFFE identity; the
/// `ServerName` (the SNI, `outbound_.PORT_._.HOST`) is not an identity and is
/// ignored.
#[derive(Debug)]
pub struct SpiffeServerVerifier {
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
    accept: PeerIdentities,
}

impl SpiffeServerVerifier {
    pub fn new(roots: Arc<RootCertStore>, algorithms: WebPkiSupportedAlgorithms, accept: PeerIdentities) -> Self {
        SpiffeServerVerifier { roots, algorithms, accept }
    }
}

impl ServerCertVerifier for SpiffeServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        // Revocation is not checked: the mesh uses short-lived certificates
        // instead, as Istio does.
        verify_server_cert_signed_by_trust_anchor(&cert, &self.roots, intermediates, now, self.algorithms.all)?;
        self.accept
            .check(end_entity)
            .map_err(|e| Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(e)))))?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
