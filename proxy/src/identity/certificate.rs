//! One workload certificate as the CA returned it, with the rustls configs
//! HBONE uses it in.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use x509_parser::prelude::{FromDer, X509Certificate};

use super::{Error, Identity};
use crate::state::{CertificateSecret, ValidationSecret};
use crate::tls;

/// A workload's certificate: leaf (and intermediates), its key, the mesh
/// root, and HBONE's client and server configs built from them once.
/// Immutable: a renewal makes a new one, and connections keep the one they
/// were made with.
pub struct WorkloadCertificate {
    identity: Identity,
    /// Leaf first, then any intermediates: what is presented.
    chain: Vec<CertificateDer<'static>>,
    /// The last certificate of the CA's answer: the mesh root (as ztunnel
    /// takes it).
    root: CertificateDer<'static>,
    /// The key, and every root of the trust store: what a sidecar installs
    /// as its `default` and `ROOTCA` secrets.
    key: Arc<PrivateKeyDer<'static>>,
    roots: Arc<RootCertStore>,
    not_before: SystemTime,
    not_after: SystemTime,
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

impl WorkloadCertificate {
    /// From the CA's answer (`[leaf, intermediates..., root]`, PEM each) and
    /// the key the CSR was made with; the leaf must carry `identity`.
    pub fn from_pem(identity: &Identity, key: PrivateKeyDer<'static>, pem_chain: &[String]) -> Result<Self, Error> {
        let bad = |reason: String| Error::BadCertificate { id: identity.clone(), reason };
        let mut certs = Vec::new();
        for pem in pem_chain {
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                certs.push(cert.map_err(|e| bad(format!("a certificate is not PEM: {e}")))?);
            }
        }
        if certs.len() < 2 {
            return Err(bad(format!("{} certificate(s), want at least the leaf and the root", certs.len())));
        }
        let root = certs.pop().expect("at least two");
        let presented = tls::spiffe_id(&certs[0]).ok_or_else(|| bad("the leaf has no SPIFFE ID".into()))?;
        if presented != identity.to_string() {
            return Err(Error::WrongIdentity { requested: identity.clone(), presented });
        }
        let mut roots = RootCertStore::empty();
        roots.add(root.clone()).map_err(|e| bad(format!("the root is unusable: {e}")))?;
        Self::build(identity, certs, Arc::new(key), root, Arc::new(roots))
    }

    /// From a waypoint's `default` and `ROOTCA` secrets: the identity
    /// is the leaf's SPIFFE id.
    pub fn from_secrets(certificate: &CertificateSecret, roots: &ValidationSecret) -> Result<Self, Error> {
        let no_cert = |why: &str| Error::NoCertificateSecret(why.to_string());
        let leaf = certificate.chain.first().ok_or_else(|| no_cert("the chain is empty"))?;
        let id = tls::spiffe_id(leaf).ok_or_else(|| no_cert("the leaf has no SPIFFE ID"))?;
        let identity: Identity = id.parse()?;
        let root = roots.certificates.first().cloned().ok_or_else(|| no_cert("ROOTCA holds no certificate"))?;
        let key = Arc::clone(&certificate.key);
        Self::build(&identity, certificate.chain.clone(), key, root, Arc::clone(&roots.roots))
    }

    fn build(
        identity: &Identity,
        certs: Vec<CertificateDer<'static>>,
        key: Arc<PrivateKeyDer<'static>>,
        root: CertificateDer<'static>,
        roots: Arc<RootCertStore>,
    ) -> Result<Self, Error> {
        let bad = |reason: String| Error::BadCertificate { id: identity.clone(), reason };
        let (not_before, not_after) = validity(&certs[0]).ok_or_else(|| bad("the leaf does not parse".into()))?;
        let tls_err = |e: tls::TlsError| Error::Tls { id: identity.clone(), reason: e.to_string() };
        let certified =
            tls::certified_key(&CertificateSecret { chain: certs.clone(), key: Arc::clone(&key) }).map_err(tls_err)?;
        let client = tls::hbone_client_config(Arc::clone(&certified), Arc::clone(&roots)).map_err(tls_err)?;
        let server = tls::hbone_server_config(certified, Arc::clone(&roots)).map_err(tls_err)?;
        Ok(WorkloadCertificate {
            identity: identity.clone(),
            chain: certs,
            root,
            key,
            roots,
            not_before,
            not_after,
            client: Arc::new(client),
            server: Arc::new(server),
        })
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Leaf first, then intermediates (the root is [`Self::root`]).
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    pub fn root(&self) -> &CertificateDer<'static> {
        &self.root
    }

    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }

    /// When to renew: half way through the certificate's life, as ztunnel
    /// and Istio's agent do, so a CA outage of up to half the TTL costs
    /// nothing.
    pub fn refresh_at(&self) -> SystemTime {
        let life = self.not_after.duration_since(self.not_before).unwrap_or(Duration::ZERO);
        self.not_before + life / 2
    }

    /// This certificate as SDS would have sent it: `default` (chain and key)
    /// and `ROOTCA` (the mesh root), for a sidecar that gets its certificate
    /// from the CA itself.
    pub fn to_secrets(&self) -> (CertificateSecret, ValidationSecret) {
        (
            CertificateSecret { chain: self.chain.clone(), key: Arc::clone(&self.key) },
            ValidationSecret { roots: Arc::clone(&self.roots), certificates: vec![self.root.clone()] },
        )
    }

    /// HBONE's client config with this certificate (see `tls::hbone_client_config`).
    pub fn client_config(&self) -> Arc<ClientConfig> {
        Arc::clone(&self.client)
    }

    /// HBONE's server config with this certificate (see `tls::hbone_server_config`).
    pub fn server_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.server)
    }
}

impl std::fmt::Debug for WorkloadCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadCertificate")
            .field("identity", &self.identity.to_string())
            .field("chain", &self.chain.len())
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

fn validity(cert: &CertificateDer<'_>) -> Option<(SystemTime, SystemTime)> {
    let (_, parsed) = X509Certificate::from_der(cert.as_ref()).ok()?;
    let v = parsed.validity();
    let at = |t: i64| u64::try_from(t).ok().map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s));
    Some((at(v.not_before.timestamp())?, at(v.not_after.timestamp())?))
}
