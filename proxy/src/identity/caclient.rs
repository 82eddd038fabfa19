//! The client of Istio's certificate API,
//! `istio.v1.auth.IstioCertificateService/CreateCertificate`, over TLS.
//!
//! For each certificate: a fresh P-256 key and a CSR whose only SAN is the
//! identity's SPIFFE URI; the request names the identity in its `metadata`
//! struct as `ImpersonatedIdentity` (ztunnel's way of saying "I act for this
//! pod"; istiod checks the node proxy may), and asks for `ttl`. The answer is
//! `[leaf, intermediates..., root]`.
//!
//! A sidecar asks for its own identity: no `ImpersonatedIdentity`, and the
//! CA authenticates it by its pod's service-account token (audience
//! `istio-ca`), sent as `authorization: Bearer TOKEN` as istio-agent does.
//! The token file is re-read for every request because the kubelet rotates
//! projected tokens. Without a token file nothing is sent: off Kubernetes
//! there is none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use prost_types::value::Kind;
use prost_types::{Struct, Value};
use rcgen::{CertificateParams, DistinguishedName, KeyPair, PKCS_ECDSA_P256_SHA256, SanType};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

use super::{Error, Identity, WorkloadCertificate};
use crate::proto::ca::IstioCertificateRequest;
use crate::proto::ca::istio_certificate_service_client::IstioCertificateServiceClient;
use crate::tls;

/// ztunnel's `SECRET_TTL` default: 24 hours.
pub const DEFAULT_CERTIFICATE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The metadata key naming the identity a node proxy asks for.
const IMPERSONATED_IDENTITY: &str = "ImpersonatedIdentity";

/// Where the CA is, how to trust it and how to authenticate to it: ztunnel's
/// `CA_ADDRESS`, `CA_ROOT_CA`, `ALT_XDS_HOSTNAME`, `SECRET_TTL` and
/// `AUTH_TOKEN`.
#[derive(Debug, Clone)]
pub struct CaClientConfig {
    /// `https://HOST:PORT` (pilot's `--secureGRPCAddr`).
    pub address: String,
    /// PEM of the root that signed the CA's serving certificate.
    pub root_ca: PathBuf,
    /// The name to verify the CA's serving certificate against, when the
    /// address is not one of its names (e.g. `istiod.istio-system.svc`).
    pub alt_hostname: Option<String>,
    /// The validity asked for; the CA may grant less.
    pub ttl: Duration,
    /// A file holding the bearer token to send (the pod's projected
    /// `istio-token`); None sends no token.
    pub token: Option<PathBuf>,
    /// True for a node proxy, which asks on behalf of its pods' identities
    /// (`ImpersonatedIdentity`); false for a sidecar, which asks for its own.
    pub impersonate: bool,
}

/// A connection (made on first use, remade as needed) to the CA.
#[derive(Clone)]
pub struct CaClient {
    client: IstioCertificateServiceClient<Channel>,
    ttl: Duration,
    token: Option<PathBuf>,
    impersonate: bool,
}

impl CaClient {
    /// Reads the root and checks the address; does not connect yet.
    pub fn new(config: &CaClientConfig) -> Result<CaClient, Error> {
        let channel = tls::control_plane_channel(&config.address, &config.root_ca, config.alt_hostname.as_deref())
            .map_err(|e| match e {
                tls::TlsError::RootCa { path, reason } => Error::RootCa { path, reason },
                other => Error::CaAddress { address: config.address.clone(), reason: other.to_string() },
            })?;
        Ok(CaClient {
            client: IstioCertificateServiceClient::new(channel),
            ttl: config.ttl,
            token: config.token.clone(),
            impersonate: config.impersonate,
        })
    }

    /// A new key, its CSR, one CreateCertificate call: the certificate for `id`.
    pub async fn sign(&self, id: &Identity) -> Result<WorkloadCertificate, Error> {
        let (key, csr) = key_and_csr(id)?;
        let metadata = self.impersonate.then(|| Struct {
            fields: BTreeMap::from([(
                IMPERSONATED_IDENTITY.to_string(),
                Value { kind: Some(Kind::StringValue(id.to_string())) },
            )]),
        });
        let mut request = tonic::Request::new(IstioCertificateRequest {
            csr,
            validity_duration: i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX),
            metadata,
        });
        if let Some(path) = &self.token {
            request.metadata_mut().insert("authorization", bearer(path)?);
        }
        let answer = self
            .client
            .clone()
            .create_certificate(request)
            .await
            .map_err(|status| Error::CaRequest { id: id.clone(), status })?
            .into_inner();
        WorkloadCertificate::from_pem(id, key, &answer.cert_chain)
    }
}

/// `Bearer TOKEN` from the token file, read now: the kubelet rewrites a
/// projected token before it expires, so a cached one would go stale. The
/// CA client sends it per request, the xDS client per stream.
pub fn bearer(path: &Path) -> Result<MetadataValue<tonic::metadata::Ascii>, Error> {
    let bad = |reason: String| Error::Token { path: path.display().to_string(), reason };
    let raw = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let token = std::str::from_utf8(&raw).map_err(|_| bad("it is not text".into()))?.trim();
    if token.is_empty() {
        return Err(bad("it is empty".into()));
    }
    // A JWT is base64url and dots; anything else (a space, a control
    // character) cannot go in a gRPC header and is not a token.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(bad("it holds characters a bearer token cannot have".into()));
    }
    format!("Bearer {token}").parse().map_err(|_| bad("it cannot be sent as a gRPC header".into()))
}

/// A P-256 key and a PEM CSR whose URI SAN is `id` (the subject is empty:
/// mesh certificates carry their identity only in the SAN).
fn key_and_csr(id: &Identity) -> Result<(PrivateKeyDer<'static>, String), Error> {
    let csr_err = |e: rcgen::Error| Error::Csr { id: id.clone(), reason: e.to_string() };
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(csr_err)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.subject_alt_names = vec![SanType::URI(id.to_string().try_into().map_err(csr_err)?)];
    let csr = params.serialize_request(&key).map_err(csr_err)?.pem().map_err(csr_err)?;
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    Ok((der, csr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_read_from_its_file_each_time() {
        let path = token_path("rotated");
        std::fs::write(&path, "aaa.bbb.ccc\n").unwrap();
        assert_eq!(bearer(&path).unwrap(), "Bearer aaa.bbb.ccc");
        std::fs::write(&path, "ddd.eee.fff").unwrap();
        assert_eq!(bearer(&path).unwrap(), "Bearer ddd.eee.fff", "a rotated token is sent");
    }

    #[test]
    fn bad_token_files_are_errors_not_panics() {
        let path = token_path("bad");
        for (content, want) in [
            (&b""[..], "it is empty"),
            (b" \n", "it is empty"),
            (b"\xff\xfe", "it is not text"),
            (b"two words", "characters a bearer token cannot have"),
            (b"a\x07b", "characters a bearer token cannot have"),
        ] {
            std::fs::write(&path, content).unwrap();
            let err = bearer(&path).unwrap_err().to_string();
            assert!(err.contains(want), "{content:?}: {err}");
        }
        let _ = std::fs::remove_file(&path);
        let err = bearer(&path).unwrap_err().to_string();
        assert!(err.contains("cannot read the token") && err.contains("bad"), "{err}");
    }

    /// A token file path of this test process's own.
    fn token_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("meshperf-proxy-token-{}-{name}", std::process::id()))
    }

    #[test]
    fn the_csr_names_the_identity_only() {
        let id = Identity::new("cluster.local", "shop", "cart");
        let (_, csr) = key_and_csr(&id).unwrap();
        let der = rustls::pki_types::pem::PemObject::from_pem_slice(csr.as_bytes())
            .map(|d: rustls::pki_types::CertificateSigningRequestDer<'_>| d.as_ref().to_vec())
            .unwrap();
        let (_, parsed) =
            <x509_parser::certification_request::X509CertificationRequest as x509_parser::prelude::FromDer<
                x509_parser::error::X509Error,
            >>::from_der(&der)
            .unwrap();
        parsed.verify_signature().unwrap();
        let sans: Vec<String> = parsed
            .requested_extensions()
            .into_iter()
            .flatten()
            .filter_map(|e| match e {
                x509_parser::extensions::ParsedExtension::SubjectAlternativeName(s) => Some(s),
                _ => None,
            })
            .flat_map(|s| s.general_names.iter().map(|n| n.to_string()))
            .collect();
        assert_eq!(sans, ["URI(spiffe://cluster.local/ns/shop/sa/cart)"]);
    }
}
