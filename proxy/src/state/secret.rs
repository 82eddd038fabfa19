//! Secrets from SDS: the workload certificate (`default`) and the mesh roots
//! (`ROOTCA`), parsed into rustls types on receipt so a bad PEM is a NACK and
//! the TLS code only ever sees usable keys. Private keys never leave this
//! module's types: the dump shows only that a key is there.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::google::protobuf;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Serialize, Serializer};

use super::{Bad, ConvertError, at, decode_resource};

const KIND: &str = "secret";

/// Istio's SDS name of a workload's own certificate.
pub const WORKLOAD_SECRET: &str = "default";
/// Istio's SDS name of the mesh roots.
pub const ROOT_SECRET: &str = "ROOTCA";

#[derive(Debug)]
pub enum Secret {
    Certificate(CertificateSecret),
    Validation(ValidationSecret),
}

/// A certificate chain (leaf first) and its private key.
#[derive(Debug)]
pub struct CertificateSecret {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Arc<PrivateKeyDer<'static>>,
}

/// Trusted roots, both as a store for verifiers and as DER for the dump.
#[derive(Debug)]
pub struct ValidationSecret {
    pub roots: Arc<RootCertStore>,
    pub certificates: Vec<CertificateDer<'static>>,
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Secret", 4)?;
        match self {
            Secret::Certificate(c) => {
                st.serialize_field("type", "tls_certificate")?;
                st.serialize_field("certificate_chain_len", &c.chain.len())?;
                st.serialize_field("certificate_chain", &pem_list(&c.chain))?;
                st.serialize_field("private_key", "[redacted]")?;
            }
            Secret::Validation(v) => {
                st.serialize_field("type", "validation_context")?;
                st.serialize_field("trusted_ca_len", &v.certificates.len())?;
                st.serialize_field("root_store_len", &v.roots.len())?;
                st.serialize_field("trusted_ca", &pem_list(&v.certificates))?;
            }
        }
        st.end()
    }
}

/// Certificates as PEM, for the dump: what a reader verifies a chain with.
fn pem_list(certs: &[CertificateDer<'_>]) -> Vec<String> {
    certs.iter().map(|c| pem::encode(&pem::Pem::new("CERTIFICATE", c.as_ref().to_vec()))).collect()
}

impl Secret {
    /// Converts one SDS resource; returns its name with it.
    pub fn from_any(any: &protobuf::Any) -> Result<(String, Secret), ConvertError> {
        let s: tls::Secret = decode_resource(KIND, any)?;
        let secret = convert(&s).map_err(|b| b.into_error(KIND, &s.name))?;
        Ok((s.name, secret))
    }
}

fn convert(s: &tls::Secret) -> Result<Secret, Bad> {
    use tls::secret::Type;
    match &s.r#type {
        Some(Type::TlsCertificate(c)) => {
            let chain_pem = inline(c.certificate_chain.as_ref()).map_err(at("tls_certificate.certificate_chain"))?;
            let key_pem = inline(c.private_key.as_ref()).map_err(at("tls_certificate.private_key"))?;
            let chain = certificates(chain_pem).map_err(at("tls_certificate.certificate_chain"))?;
            let key = PrivateKeyDer::from_pem_slice(key_pem)
                .map_err(|e| Bad::new(format!("tls_certificate.private_key: not a PEM private key: {e}")))?;
            // Refuse a key rustls cannot sign with now, not at the first handshake.
            rustls::crypto::ring::sign::any_supported_type(&key)
                .map_err(|e| Bad::new(format!("tls_certificate.private_key: unusable: {e}")))?;
            Ok(Secret::Certificate(CertificateSecret { chain, key: Arc::new(key) }))
        }
        Some(Type::ValidationContext(v)) => {
            let pem = inline(v.trusted_ca.as_ref()).map_err(at("validation_context.trusted_ca"))?;
            let certificates = certificates(pem).map_err(at("validation_context.trusted_ca"))?;
            let mut roots = RootCertStore::empty();
            for (i, c) in certificates.iter().enumerate() {
                roots.add(c.clone()).map_err(|e| Bad::new(format!("validation_context.trusted_ca[{i}]: {e}")))?;
            }
            Ok(Secret::Validation(ValidationSecret { roots: Arc::new(roots), certificates }))
        }
        _ => Err(Bad::new("want tls_certificate or validation_context")),
    }
}

fn inline(d: Option<&core::DataSource>) -> Result<&[u8], Bad> {
    use core::data_source::Specifier;
    match d.and_then(|d| d.specifier.as_ref()) {
        Some(Specifier::InlineBytes(b)) => Ok(b),
        Some(Specifier::InlineString(s)) => Ok(s.as_bytes()),
        Some(_) => Err(Bad::new("only inline data is supported")),
        None => Err(Bad::new("missing")),
    }
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, Bad> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Bad::new(format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Bad::new("no PEM certificates"));
    }
    Ok(certs)
}
