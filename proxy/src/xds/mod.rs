//! The ADS client: one gRPC stream to the control plane carrying CDS, EDS,
//! LDS, RDS and SDS for a sidecar, or workload discovery (Address,
//! Authorization) for the node proxy; delta by default or state of the world,
//! plain text or TLS.
//!
//! What a response does is up to an [`XdsStore`]: `store` turns Envoy
//! resources into [`crate::state::Snapshot`]s (convert all, then swap, or NACK
//! and keep the last good one) and works out which EDS, RDS and SDS names the
//! clusters and listeners need; the node proxy's store is
//! `crate::node::WorkloadStore`. `delta` and `sotw` speak the two protocol
//! variants over one stream for any store; `client` keeps a stream up,
//! reconnecting with jittered exponential backoff while the last good config
//! keeps serving. Everything here runs on the control-plane runtime.

mod client;
mod delta;
mod metrics;
mod sotw;
mod store;

use std::fmt;

pub use client::{XdsClient, XdsConfig};
pub use metrics::XdsMetrics;
pub use store::{Readiness, Update, versions_of};

/// What one ADS stream fills. The stream subscribes to the wildcard types at
/// its start and to what [`XdsStore::wanted`] names of the named types after
/// each response, and ACKs a response that [`XdsStore::apply`] accepts (NACKs
/// with its message otherwise).
pub trait XdsStore: Send + Sync {
    /// Types subscribed by wildcard, in the order they are first asked for.
    fn wildcard_types(&self) -> &'static [ResourceType];
    /// Types asked for by name.
    fn named_types(&self) -> &'static [ResourceType] {
        &[]
    }
    /// The names of a named type the store needs now.
    fn wanted(&self, _t: ResourceType) -> std::collections::BTreeSet<String> {
        Default::default()
    }
    /// Delta resource versions held, for `initial_resource_versions` on reconnect.
    fn resource_versions(&self, t: ResourceType) -> std::collections::HashMap<String, String>;
    /// The last applied version of a type (SotW `version_info`).
    fn version(&self, t: ResourceType) -> String;
    /// Applies one response; an error is the NACK's detail.
    fn apply(&mut self, t: ResourceType, update: Update) -> Result<(), String>;
}

/// Errors that end one ADS stream; the client logs them and reconnects.
#[derive(Debug, thiserror::Error)]
pub enum XdsError {
    #[error("invalid xDS address {0:?}: want HOST:PORT")]
    Address(String),
    #[error("TLS to the control plane: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("cannot connect to the control plane: {}", causes(.0))]
    Connect(#[from] tonic::transport::Error),
    #[error("ADS stream failed: {0}")]
    Stream(#[from] tonic::Status),
    #[error("ADS request queue closed")]
    RequestQueueClosed,
    #[error("the xDS token: {0}")]
    Token(#[from] crate::identity::Error),
}

/// An error and its causes on one line; tonic's transport errors say only
/// "transport error" at the top.
fn causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// The resource types: Envoy's five, in the order Envoy applies them, then
/// workload discovery's two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Cluster,
    Endpoint,
    Listener,
    Route,
    Secret,
    /// `istio.workload.Address`: workloads and services (node proxy).
    Address,
    /// `istio.security.Authorization`: L4 policies (node proxy).
    Authorization,
}

impl ResourceType {
    pub const ALL: [ResourceType; 7] = [
        ResourceType::Cluster,
        ResourceType::Endpoint,
        ResourceType::Listener,
        ResourceType::Route,
        ResourceType::Secret,
        ResourceType::Address,
        ResourceType::Authorization,
    ];
    /// What a sidecar subscribes to.
    pub const ENVOY: [ResourceType; 5] = [
        ResourceType::Cluster,
        ResourceType::Endpoint,
        ResourceType::Listener,
        ResourceType::Route,
        ResourceType::Secret,
    ];
    /// What the node proxy subscribes to, both by wildcard.
    pub const WORKLOAD: [ResourceType; 2] = [ResourceType::Address, ResourceType::Authorization];
    /// The types asked for by name, driven by what clusters and listeners reference.
    pub const NAMED: [ResourceType; 3] = [ResourceType::Endpoint, ResourceType::Route, ResourceType::Secret];

    pub fn type_url(self) -> &'static str {
        match self {
            ResourceType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            ResourceType::Endpoint => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            ResourceType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            ResourceType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            ResourceType::Secret => "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
            ResourceType::Address => crate::proto::ADDRESS_TYPE,
            ResourceType::Authorization => crate::proto::AUTHORIZATION_TYPE,
        }
    }

    pub fn from_type_url(url: &str) -> Option<ResourceType> {
        ResourceType::ALL.into_iter().find(|t| t.type_url() == url)
    }

    /// Envoy's short name, used in metrics labels and the dump's versions.
    pub fn short(self) -> &'static str {
        match self {
            ResourceType::Cluster => "cds",
            ResourceType::Endpoint => "eds",
            ResourceType::Listener => "lds",
            ResourceType::Route => "rds",
            ResourceType::Secret => "sds",
            ResourceType::Address => "address",
            ResourceType::Authorization => "authorization",
        }
    }

    /// CDS, LDS and workload discovery's types are wildcard subscriptions;
    /// the others are asked by name.
    pub fn is_wildcard(self) -> bool {
        !matches!(self, ResourceType::Endpoint | ResourceType::Route | ResourceType::Secret)
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short())
    }
}

/// The stream's request: the client's messages and, when the proxy has a
/// token, `authorization: Bearer TOKEN`, which the control plane checks
/// before it registers the proxy.
fn stream_request<T>(messages: T, auth: Option<tonic::metadata::AsciiMetadataValue>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(messages);
    if let Some(value) = auth {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// Largest response accepted from the control plane; a sidecar's whole config
/// is a few MB even in large meshes, so this only stops a runaway peer.
const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// google.rpc.Code INVALID_ARGUMENT, the code of a NACK's error_detail.
const INVALID_ARGUMENT: i32 = 3;

fn nack_status(detail: &str) -> envoy_types::pb::google::rpc::Status {
    envoy_types::pb::google::rpc::Status { code: INVALID_ARGUMENT, message: detail.to_string(), details: Vec::new() }
}
