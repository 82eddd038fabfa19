//! A certificate authority like istiod's, served in process over TLS (the
//! generated tonic server, signing with rcgen): what the node proxy's
//! `SecretManager` asks for workload certificates in the tests, and SDS
//! secrets of the same mesh (a waypoint's `default` and `ROOTCA`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::google::protobuf::Any;
use meshperf_proxy::identity::{CaClientConfig, Identity, SecretManager};
use meshperf_proxy::proto::ca::istio_certificate_service_server::{
    IstioCertificateService, IstioCertificateServiceServer,
};
use meshperf_proxy::proto::ca::{IstioCertificateRequest, IstioCertificateResponse};
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, SanType,
};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Identity as TlsIdentity, ServerTlsConfig};

use super::envoy::any;
use super::process::TestDir;

pub const TRUST_DOMAIN: &str = "cluster.local";
/// The name in the CA's serving certificate (pilot's, too).
pub const CA_HOSTNAME: &str = "istiod.istio-system.svc";

/// A workload identity in namespace `shop`.
pub fn id(sa: &str) -> Identity {
    Identity::new(TRUST_DOMAIN, "shop", sa)
}

/// What the CA was asked.
#[derive(Debug, Clone)]
pub struct CaRequest {
    pub impersonated: Option<String>,
    pub csr_sans: Vec<String>,
    pub ttl: i64,
    /// The `authorization` metadata sent, if any.
    pub authorization: Option<String>,
}

/// A CA like istiod's: signs the CSR for the impersonated identity (else the
/// CSR's URI SAN) for the asked TTL; answers `[leaf, root]`.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    root_pem: String,
    requests: Mutex<Vec<CaRequest>>,
    /// Identities refused with PERMISSION_DENIED.
    refused: Vec<String>,
}

/// The tonic service of a [`TestCa`] the test keeps a handle on.
struct CaService(Arc<TestCa>);

#[tonic::async_trait]
impl IstioCertificateService for CaService {
    async fn create_certificate(
        &self,
        request: tonic::Request<IstioCertificateRequest>,
    ) -> Result<tonic::Response<IstioCertificateResponse>, tonic::Status> {
        let authorization = request.metadata().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
        let request = request.into_inner();
        let csr = CertificateSigningRequestParams::from_pem(&request.csr)
            .map_err(|e| tonic::Status::invalid_argument(format!("CSR: {e}")))?;
        let csr_sans: Vec<String> = csr
            .params
            .subject_alt_names
            .iter()
            .filter_map(|s| match s {
                SanType::URI(u) => Some(u.as_str().to_string()),
                _ => None,
            })
            .collect();
        let impersonated =
            request.metadata.as_ref().and_then(|m| m.fields.get("ImpersonatedIdentity")).and_then(|v| match &v.kind {
                Some(prost_types::value::Kind::StringValue(s)) => Some(s.clone()),
                _ => None,
            });
        self.0.requests.lock().unwrap().push(CaRequest {
            impersonated: impersonated.clone(),
            csr_sans: csr_sans.clone(),
            ttl: request.validity_duration,
            authorization,
        });
        let identity = impersonated.or_else(|| csr_sans.first().cloned()).unwrap_or_default();
        if self.0.refused.contains(&identity) {
            return Err(tonic::Status::permission_denied(format!("{identity} may not be impersonated")));
        }
        let mut leaf = csr;
        let now = time::OffsetDateTime::now_utc();
        leaf.params.not_before = now - time::Duration::seconds(1);
        leaf.params.not_after = now + time::Duration::seconds(request.validity_duration.max(1));
        leaf.params.subject_alt_names = vec![SanType::URI(identity.try_into().unwrap())];
        leaf.params.extended_key_usages =
            vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let signed = leaf.signed_by(&self.0.issuer).map_err(|e| tonic::Status::internal(e.to_string()))?;
        Ok(tonic::Response::new(IstioCertificateResponse { cert_chain: vec![signed.pem(), self.0.root_pem.clone()] }))
    }
}

/// A running test CA and the config that reaches it.
pub struct RunningCa {
    ca: Arc<TestCa>,
    pub config: CaClientConfig,
    _dir: TestDir,
}

impl RunningCa {
    pub fn requests(&self) -> Vec<CaRequest> {
        self.ca.requests.lock().unwrap().clone()
    }

    pub fn root_pem(&self) -> &str {
        &self.ca.root_pem
    }

    pub fn secrets(&self) -> Arc<SecretManager> {
        Arc::new(SecretManager::new(self.config.clone()).unwrap())
    }
}

pub async fn start_ca(name: &str, ttl: Duration, refused: &[&str]) -> RunningCa {
    let root_key = KeyPair::generate().unwrap();
    let mut root = CertificateParams::new(Vec::<String>::new()).unwrap();
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let root_pem = root.self_signed(&root_key).unwrap().pem();
    let issuer = Issuer::new(root, root_key);
    // The CA's own serving certificate, signed by the same root (as istiod's).
    let serving_key = KeyPair::generate().unwrap();
    let serving =
        CertificateParams::new(vec![CA_HOSTNAME.to_string()]).unwrap().signed_by(&serving_key, &issuer).unwrap();

    let dir = TestDir::new(name);
    std::fs::write(dir.join("root-cert.pem"), &root_pem).unwrap();
    let ca = Arc::new(TestCa {
        issuer,
        root_pem,
        requests: Mutex::default(),
        refused: refused.iter().map(|s| s.to_string()).collect(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tls = ServerTlsConfig::new().identity(TlsIdentity::from_pem(serving.pem(), serving_key.serialize_pem()));
    let service = IstioCertificateServiceServer::new(CaService(Arc::clone(&ca)));
    tokio::spawn(
        tonic::transport::Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let config = CaClientConfig {
        address: format!("https://{addr}"),
        root_ca: dir.join("root-cert.pem"),
        alt_hostname: Some(CA_HOSTNAME.to_string()),
        ttl,
        token: None,
        impersonate: true,
    };
    RunningCa { ca, config, _dir: dir }
}

impl RunningCa {
    /// SDS's `default` (a certificate for `identity` signed by this CA, and
    /// its key) and `ROOTCA` (this CA's root), as a control plane sends them
    /// to a waypoint.
    pub fn sds_resources(&self, identity: &Identity) -> Vec<(String, Any)> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![SanType::URI(identity.to_string().try_into().unwrap())];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let leaf = params.signed_by(&key, &self.ca.issuer).unwrap();
        let inline = |pem: String| {
            Some(core::DataSource {
                specifier: Some(core::data_source::Specifier::InlineString(pem)),
                ..Default::default()
            })
        };
        let default = tls::Secret {
            name: "default".into(),
            r#type: Some(tls::secret::Type::TlsCertificate(tls::TlsCertificate {
                certificate_chain: inline(leaf.pem()),
                private_key: inline(key.serialize_pem()),
                ..Default::default()
            })),
        };
        let root = tls::Secret {
            name: "ROOTCA".into(),
            r#type: Some(tls::secret::Type::ValidationContext(tls::CertificateValidationContext {
                trusted_ca: inline(self.ca.root_pem.clone()),
                ..Default::default()
            })),
        };
        vec![("default".into(), any(&default)), ("ROOTCA".into(), any(&root))]
    }
}
