//! Workload identities and their certificates, for the node proxy's HBONE.
//!
//! An [`Identity`] is a SPIFFE id, `spiffe://TRUST_DOMAIN/ns/NS/sa/SA`, the
//! only name the mesh's certificates carry. This module is the one place that
//! parses and prints them; `tls` reads them out of certificates with it.
//!
//! A node proxy acts for every pod of its node, so it holds one certificate
//! per identity among them: the [`SecretManager`] asks the CA
//! (`IstioCertificateService/CreateCertificate`, istiod's API, see
//! [`CaClient`]) for each identity on first use, shares the one request among
//! concurrent first users, renews each certificate at half its life in the
//! background, and drops it when told the identity's last workload has gone.
//! A [`WorkloadCertificate`] carries the chain, the mesh root and the rustls
//! configs HBONE needs, built once per certificate.

mod caclient;
mod certificate;
mod manager;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;

pub use caclient::{CaClient, CaClientConfig, DEFAULT_CERTIFICATE_TTL, bearer};
pub use certificate::WorkloadCertificate;
pub use manager::SecretManager;

const SPIFFE_SCHEME: &str = "spiffe://";

/// Where HBONE's ends get the certificate of an identity: a node proxy asks
/// the CA for each identity it serves ([`SecretManager`]); a waypoint has the
/// one certificate SDS gave it (`default`, with `ROOTCA`), as an Envoy
/// waypoint does.
pub trait CertificateSource: Send + Sync {
    /// The current certificate of `id`.
    fn fetch<'a>(
        &'a self,
        id: &'a Identity,
    ) -> Pin<Box<dyn Future<Output = Result<Arc<WorkloadCertificate>, Error>> + Send + 'a>>;
}

impl CertificateSource for SecretManager {
    fn fetch<'a>(
        &'a self,
        id: &'a Identity,
    ) -> Pin<Box<dyn Future<Output = Result<Arc<WorkloadCertificate>, Error>> + Send + 'a>> {
        Box::pin(SecretManager::fetch(self, id))
    }
}

/// A workload's SPIFFE identity, Istio's form: trust domain, namespace and
/// service account. Parse with `str::parse`, print with `Display`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    pub trust_domain: String,
    pub namespace: String,
    pub service_account: String,
}

impl Identity {
    pub fn new(
        trust_domain: impl Into<String>,
        namespace: impl Into<String>,
        service_account: impl Into<String>,
    ) -> Identity {
        Identity {
            trust_domain: trust_domain.into(),
            namespace: namespace.into(),
            service_account: service_account.into(),
        }
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SPIFFE_SCHEME}{}/ns/{}/sa/{}", self.trust_domain, self.namespace, self.service_account)
    }
}

impl FromStr for Identity {
    type Err = Error;

    /// Exactly `spiffe://TD/ns/NS/sa/SA` with no empty part: the form Istio
    /// issues. Anything else (another path, a query, extra segments) is not
    /// a workload identity.
    fn from_str(s: &str) -> Result<Identity, Error> {
        let bad = |why: &'static str| Error::InvalidIdentity { id: s.to_string(), why };
        let rest = s.strip_prefix(SPIFFE_SCHEME).ok_or(bad("it does not start with spiffe://"))?;
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            [td, "ns", ns, "sa", sa] if ![td, ns, sa].iter().any(|p| p.is_empty()) => {
                if !td.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')) {
                    return Err(bad("the trust domain has characters a DNS-like name cannot have"));
                }
                Ok(Identity::new(*td, *ns, *sa))
            }
            _ => Err(bad("it is not of the form spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT")),
        }
    }
}

/// The trust domain of any SPIFFE id (`cluster.local` in
/// `spiffe://cluster.local/ns/a/sa/b`), also of ids that are not Istio's
/// workload form.
pub fn trust_domain(spiffe_id: &str) -> Option<&str> {
    let rest = spiffe_id.strip_prefix(SPIFFE_SCHEME)?;
    let domain = rest.split('/').next()?;
    (!domain.is_empty()).then_some(domain)
}

/// True for a string in the `spiffe://` scheme.
pub fn is_spiffe(name: &str) -> bool {
    name.starts_with(SPIFFE_SCHEME)
}

/// What went wrong with an identity or its certificate. Clone: one failed
/// CA request is the answer to every caller that waited on it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("{id:?} is not a workload identity: {why}")]
    InvalidIdentity { id: String, why: &'static str },
    #[error("cannot read the CA's root certificate {path}: {reason}")]
    RootCa { path: String, reason: String },
    #[error("cannot read the token {path}: {reason}")]
    Token { path: String, reason: String },
    #[error("bad CA address {address:?}: {reason}")]
    CaAddress { address: String, reason: String },
    #[error("cannot make a key and CSR for {id}: {reason}")]
    Csr { id: Identity, reason: String },
    #[error("the CA refused the certificate for {id}: {status}")]
    CaRequest { id: Identity, status: tonic::Status },
    #[error("the CA's answer for {id} is unusable: {reason}")]
    BadCertificate { id: Identity, reason: String },
    #[error("the CA signed {presented} when {requested} was asked for")]
    WrongIdentity { requested: Identity, presented: String },
    #[error("cannot build the TLS configs of {id}'s certificate: {reason}")]
    Tls { id: Identity, reason: String },
    #[error("the certificate of {0} was forgotten while it was being fetched")]
    Forgotten(Identity),
    #[error("no workload certificate in the `default` and `ROOTCA` secrets yet: {0}")]
    NoCertificateSecret(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_parse_and_print() {
        let id: Identity = "spiffe://cluster.local/ns/shop/sa/cart".parse().unwrap();
        assert_eq!(id, Identity::new("cluster.local", "shop", "cart"));
        assert_eq!(id.to_string(), "spiffe://cluster.local/ns/shop/sa/cart");
        for bad in [
            "",
            "spiffe://",
            "https://cluster.local/ns/shop/sa/cart",
            "spiffe://cluster.local/ns/shop/sa/",
            "spiffe:///ns/shop/sa/cart",
            "spiffe://cluster.local/ns/shop/sa/cart/extra",
            "spiffe://cluster.local/sa/cart/ns/shop",
            "spiffe://clus ter/ns/shop/sa/cart",
        ] {
            let err = bad.parse::<Identity>().unwrap_err();
            assert!(matches!(err, Error::InvalidIdentity { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn trust_domains() {
        assert_eq!(trust_domain("spiffe://cluster.local/ns/a/sa/b"), Some("cluster.local"));
        assert_eq!(trust_domain("spiffe://cluster.local"), Some("cluster.local"));
        assert_eq!(trust_domain("spiffe:///ns/a"), None);
        assert_eq!(trust_domain("https://cluster.local/ns/a"), None);
    }
}
