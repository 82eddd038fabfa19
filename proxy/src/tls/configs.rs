//! The TLS configs of one set of SDS secrets, and the store that replaces
//! them when the secrets rotate.
//!
//! A rustls config owns its certificate and roots, and a connection keeps the
//! config it was made with, so rotation is only a matter of handing new
//! handshakes a new config: [`TlsConfigStore::for_snapshot`] compares the
//! snapshot's secrets with those of the current [`TlsConfigs`] (by `Arc`
//! identity: the xDS store makes a new `Arc` only for a secret that changed)
//! and swaps in a fresh, empty set when they differ. Configs are built on
//! first use and cached, so a rotation costs one build per config in use, on
//! the first handshake after it, not a rebuild of every cluster's config.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use rustls::pki_types::{DnsName, ServerName};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, ServerConfig};

use super::TlsError;
use super::build::{AppProtocol, certified_key, client_config_with, server_config_with};
use super::identity::{PeerIdentities, spiffe_id};
use crate::identity::trust_domain;
use crate::state::{
    CertificateSecret, Cluster, DownstreamTls, ROOT_SECRET, Secret, Snapshot, TlsMode, UpstreamTls, UpstreamTransport,
    ValidationSecret, WORKLOAD_SECRET,
};

/// The ALPN of Istio's inbound mesh mTLS, for [`TlsConfigs::mesh_server`].
const SERVER_ALPN: [&str; 2] = ["h2", "http/1.1"];

/// The TLS configs for one set of secrets; built lazily, then shared.
#[derive(Default)]
pub struct TlsConfigs {
    secrets: BTreeMap<String, Arc<Secret>>,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    keys: HashMap<String, Arc<CertifiedKey>>,
    clients: HashMap<ClientKey, Arc<ClientConfig>>,
    servers: HashMap<ServerKey, Arc<ServerConfig>>,
}

#[derive(PartialEq, Eq, Hash)]
struct ClientKey {
    cert: String,
    roots: String,
    sans: Vec<String>,
    alpn: Vec<String>,
    app: AppProtocol,
}

#[derive(PartialEq, Eq, Hash)]
struct ServerKey {
    cert: String,
    roots: Option<String>,
    require_client_cert: bool,
    alpn: Vec<String>,
}

impl TlsConfigs {
    /// Configs for these secrets (the snapshot's `secrets`); nothing is built yet.
    pub fn new(secrets: &BTreeMap<String, Arc<Secret>>) -> TlsConfigs {
        TlsConfigs { secrets: secrets.clone(), cache: Mutex::default() }
    }

    /// The client config for an upstream connection to an endpoint of
    /// `cluster` with the endpoint's `tlsMode`; None: connect in plain text.
    pub fn client_for(
        &self,
        cluster: &Cluster,
        endpoint: TlsMode,
        app: AppProtocol,
    ) -> Result<Option<Arc<ClientConfig>>, TlsError> {
        upstream_tls(cluster, endpoint).map(|tls| self.client_for_tls(tls, app)).transpose()
    }

    /// The client config for one upstream TLS context. The server must chain
    /// to the context's roots and be one of its `subject_alt_names`, or, when
    /// it names none, any SPIFFE ID of our own trust domain.
    pub fn client_for_tls(&self, tls: &UpstreamTls, app: AppProtocol) -> Result<Arc<ClientConfig>, TlsError> {
        let cert = tls.certificate_secret.as_deref().ok_or(TlsError::NoClientCertificate)?;
        let roots = tls.validation_secret.as_deref().ok_or(TlsError::NoValidation)?;
        let key = ClientKey {
            cert: cert.to_string(),
            roots: roots.to_string(),
            sans: tls.subject_alt_names.clone(),
            alpn: tls.alpn.clone(),
            app,
        };
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = cache.clients.get(&key) {
            return Ok(Arc::clone(c));
        }
        let certificate = self.certificate(cert)?;
        let accept = if tls.subject_alt_names.is_empty() {
            let own = certificate.chain.first().and_then(spiffe_id).ok_or(TlsError::NoTrustDomain)?;
            PeerIdentities::TrustDomain(trust_domain(&own).ok_or(TlsError::NoTrustDomain)?.to_string())
        } else {
            PeerIdentities::AnyOf(tls.subject_alt_names.clone())
        };
        let roots = Arc::clone(&self.validation(roots)?.roots);
        let signing = self.key(&mut cache, cert, certificate)?;
        let config = Arc::new(client_config_with(signing, roots, accept, &tls.alpn, app)?);
        cache.clients.insert(key, Arc::clone(&config));
        Ok(config)
    }

    /// The server config for an inbound chain's TLS context.
    pub fn server_for(&self, tls: &DownstreamTls) -> Result<Arc<ServerConfig>, TlsError> {
        self.server(
            &tls.certificate_secret,
            tls.validation_secret.as_deref(),
            tls.require_client_certificate,
            &tls.alpn,
        )
    }

    /// The server side of Istio's mesh mTLS (`default` + `ROOTCA`, client
    /// certificate required, `h2`/`http/1.1`), what every inbound mTLS chain
    /// of `meshperf pilot` asks for.
    pub fn mesh_server(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let alpn = SERVER_ALPN.map(String::from);
        self.server(WORKLOAD_SECRET, Some(ROOT_SECRET), true, &alpn)
    }

    fn server(
        &self,
        cert: &str,
        roots: Option<&str>,
        require_client_cert: bool,
        alpn: &[String],
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let key = ServerKey {
            cert: cert.to_string(),
            roots: roots.map(String::from),
            require_client_cert,
            alpn: alpn.to_vec(),
        };
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = cache.servers.get(&key) {
            return Ok(Arc::clone(c));
        }
        let certificate = self.certificate(cert)?;
        let roots = roots.map(|r| self.validation(r).map(|v| Arc::clone(&v.roots))).transpose()?;
        let signing = self.key(&mut cache, cert, certificate)?;
        let config = Arc::new(server_config_with(signing, roots, require_client_cert, alpn)?);
        cache.servers.insert(key, Arc::clone(&config));
        Ok(config)
    }

    /// True when these configs were made from exactly these secrets.
    pub fn is_for(&self, secrets: &BTreeMap<String, Arc<Secret>>) -> bool {
        self.secrets.len() == secrets.len()
            && self.secrets.iter().zip(secrets).all(|((n1, s1), (n2, s2))| n1 == n2 && Arc::ptr_eq(s1, s2))
    }

    fn key(&self, cache: &mut Cache, name: &str, cert: &CertificateSecret) -> Result<Arc<CertifiedKey>, TlsError> {
        if let Some(k) = cache.keys.get(name) {
            return Ok(Arc::clone(k));
        }
        let k = certified_key(cert)?;
        cache.keys.insert(name.to_string(), Arc::clone(&k));
        Ok(k)
    }

    fn certificate(&self, name: &str) -> Result<&CertificateSecret, TlsError> {
        match self.secrets.get(name).map(|s| &**s) {
            Some(Secret::Certificate(c)) => Ok(c),
            Some(_) => Err(TlsError::WrongSecretType { name: name.to_string(), want: "tls_certificate" }),
            None => Err(TlsError::MissingSecret { name: name.to_string() }),
        }
    }

    fn validation(&self, name: &str) -> Result<&ValidationSecret, TlsError> {
        match self.secrets.get(name).map(|s| &**s) {
            Some(Secret::Validation(v)) => Ok(v),
            Some(_) => Err(TlsError::WrongSecretType { name: name.to_string(), want: "validation_context" }),
            None => Err(TlsError::MissingSecret { name: name.to_string() }),
        }
    }
}

/// The current [`TlsConfigs`], replaced when the snapshot's secrets change.
/// Reads are one atomic load and a comparison of a few pointers.
#[derive(Default)]
pub struct TlsConfigStore {
    current: ArcSwap<TlsConfigs>,
}

impl TlsConfigStore {
    pub fn new() -> TlsConfigStore {
        TlsConfigStore::default()
    }

    /// The configs for this snapshot's secrets: the cached ones if the
    /// secrets are unchanged, else a new set (existing connections keep the
    /// configs they hold).
    pub fn for_snapshot(&self, snapshot: &Snapshot) -> Arc<TlsConfigs> {
        let current = self.current.load();
        if current.is_for(&snapshot.secrets) {
            return Arc::clone(&current);
        }
        // Two workers may both see the change and both build: harmless, each
        // gets configs that match its snapshot.
        let fresh = Arc::new(TlsConfigs::new(&snapshot.secrets));
        self.current.store(Arc::clone(&fresh));
        tracing::info!(
            secrets = snapshot.secrets.len(),
            "TLS secrets changed: new handshakes use the new certificates"
        );
        fresh
    }
}

/// The TLS context for an endpoint of `cluster`, if it gets TLS: always for a
/// TLS cluster, per the endpoint's `tlsMode` for Istio's auto mTLS.
pub fn upstream_tls(cluster: &Cluster, endpoint: TlsMode) -> Option<&UpstreamTls> {
    match &cluster.transport {
        UpstreamTransport::Plain => None,
        UpstreamTransport::Tls(t) => Some(t),
        UpstreamTransport::Auto(t) => (endpoint == TlsMode::Istio).then_some(t),
    }
}

/// The name to pass to `TlsConnector::connect`: the context's SNI (Istio's
/// `outbound_.PORT_._.HOST`) when it is a valid DNS name, else the endpoint's
/// IP, for which rustls sends no SNI. Verification ignores it either way.
pub fn server_name(tls: &UpstreamTls, endpoint: IpAddr) -> ServerName<'static> {
    match tls.sni.as_deref().map(|s| DnsName::try_from(s.to_string())) {
        Some(Ok(name)) => ServerName::DnsName(name),
        _ => ServerName::IpAddress(endpoint.into()),
    }
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    use super::*;
    use crate::state::DiscoveryType;

    fn pem(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/testdata/tls/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn secrets(with_root: bool) -> BTreeMap<String, Arc<Secret>> {
        let chain = CertificateDer::pem_slice_iter(&pem("cart-cert.pem")).collect::<Result<_, _>>().unwrap();
        let key = Arc::new(PrivateKeyDer::from_pem_slice(&pem("cart-key.pem")).unwrap());
        let mut out = BTreeMap::new();
        out.insert("default".to_string(), Arc::new(Secret::Certificate(CertificateSecret { chain, key })));
        if with_root {
            let root = CertificateDer::from_pem_slice(&pem("root-cert.pem")).unwrap();
            let mut store = rustls::RootCertStore::empty();
            store.add(root.clone()).unwrap();
            let v = ValidationSecret { roots: Arc::new(store), certificates: vec![root] };
            out.insert("ROOTCA".to_string(), Arc::new(Secret::Validation(v)));
        }
        out
    }

    fn mesh_tls() -> UpstreamTls {
        UpstreamTls {
            sni: Some("outbound_.8080_._.catalog.shop.svc.cluster.local".into()),
            certificate_secret: Some("default".into()),
            validation_secret: Some("ROOTCA".into()),
            alpn: vec!["istio-peer-exchange".into(), "istio".into()],
            subject_alt_names: vec![],
        }
    }

    fn cluster(transport: UpstreamTransport) -> Cluster {
        Cluster {
            name: "outbound|8080||catalog.shop.svc.cluster.local".into(),
            discovery: DiscoveryType::Eds,
            transport,
            ..Default::default()
        }
    }

    #[test]
    fn auto_mtls_follows_the_endpoint_tls_mode() {
        let configs = TlsConfigs::new(&secrets(true));
        let auto = cluster(UpstreamTransport::Auto(mesh_tls()));
        assert!(configs.client_for(&auto, TlsMode::Disabled, AppProtocol::Http1).unwrap().is_none());
        let a = configs.client_for(&auto, TlsMode::Istio, AppProtocol::Http1).unwrap().unwrap();
        let b = configs.client_for(&auto, TlsMode::Istio, AppProtocol::Http1).unwrap().unwrap();
        assert!(Arc::ptr_eq(&a, &b), "built once, then cached");
        assert_eq!(a.alpn_protocols, [&b"istio-peer-exchange"[..], b"istio", b"http/1.1"]);
        let h2 = configs.client_for(&auto, TlsMode::Istio, AppProtocol::Http2).unwrap().unwrap();
        assert_eq!(h2.alpn_protocols.last().map(Vec::as_slice), Some(&b"h2"[..]));
        let tls = cluster(UpstreamTransport::Tls(mesh_tls()));
        assert!(configs.client_for(&tls, TlsMode::Disabled, AppProtocol::Tcp).unwrap().is_some());
        let plain = cluster(UpstreamTransport::Plain);
        assert!(configs.client_for(&plain, TlsMode::Istio, AppProtocol::Tcp).unwrap().is_none());
    }

    #[test]
    fn missing_and_mistyped_secrets_are_errors() {
        let configs = TlsConfigs::new(&secrets(false));
        let err = configs.client_for_tls(&mesh_tls(), AppProtocol::Tcp).unwrap_err();
        assert!(matches!(err, TlsError::MissingSecret { ref name } if name == "ROOTCA"), "{err}");
        assert!(matches!(configs.mesh_server(), Err(TlsError::MissingSecret { .. })));

        let swapped = UpstreamTls { validation_secret: Some("default".into()), ..mesh_tls() };
        let err = configs.client_for_tls(&swapped, AppProtocol::Tcp).unwrap_err();
        assert!(matches!(err, TlsError::WrongSecretType { want: "validation_context", .. }), "{err}");

        let unverified = UpstreamTls { validation_secret: None, ..mesh_tls() };
        assert!(matches!(configs.client_for_tls(&unverified, AppProtocol::Tcp), Err(TlsError::NoValidation)));
    }

    #[test]
    fn configs_know_their_secrets() {
        let s = secrets(true);
        let configs = TlsConfigs::new(&s);
        assert!(configs.is_for(&s));
        let mut changed = s.clone();
        changed.insert("ROOTCA".into(), Arc::clone(&secrets(true)["ROOTCA"]));
        assert!(!configs.is_for(&changed), "same content, new Arc: a new SDS push");
        assert!(!configs.is_for(&secrets(false)));
        assert!(configs.mesh_server().is_ok());
    }

    #[test]
    fn server_name_is_the_sni_or_the_ip() {
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        assert!(matches!(server_name(&mesh_tls(), ip), ServerName::DnsName(_)));
        let no_sni = UpstreamTls { sni: None, ..mesh_tls() };
        assert_eq!(server_name(&no_sni, ip), ServerName::IpAddress(ip.into()));
        let bad = UpstreamTls { sni: Some("not a name!".into()), ..mesh_tls() };
        assert_eq!(server_name(&bad, ip), ServerName::IpAddress(ip.into()));
    }
}
