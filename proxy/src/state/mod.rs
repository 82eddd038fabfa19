//! The compact internal model of the proxy's configuration.
//!
//! Envoy resources are converted into these plain structs when they arrive and
//! the protobufs are dropped, so memory follows what the data path needs rather
//! than what the control plane sent. A [`Snapshot`] holds one consistent set of
//! resources; [`State`] publishes it through an `ArcSwap`, so a worker thread
//! takes the current snapshot with one atomic load and never waits on the xDS
//! client. Conversion errors name the resource: they become a NACK's
//! `error_detail`.

mod cluster;
#[cfg(test)]
mod convert_tests;
mod endpoint;
#[cfg(test)]
mod golden_tests;
mod listener;
mod route;
mod secret;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::google::protobuf;
use serde::Serialize;

pub use cluster::{
    CircuitBreakers, Cluster, DiscoveryType, LbPolicy, OutlierDetection, UpstreamProtocol, UpstreamTls,
    UpstreamTransport,
};
pub use endpoint::{ClusterEndpoints, Endpoint, EndpointAddress, TlsMode};
pub use listener::{
    ChainMatch, CidrRange, DownstreamTls, FilterChain, Handler, HttpHandler, Listener, ListenerKind, RouteSource,
    TcpHandler, TrafficDirection, TransportProtocol, Tunnel,
};
pub use route::{
    ClusterTarget, Fault, FaultAbort, FaultDelay, Forward, HeaderMatch, HeaderValueMatch, PathMatch, Redirect, RetryOn,
    RetryPolicy, Route, RouteAction, RouteConfig, RouteMatch, VirtualHost, WeightedCluster,
};
pub use secret::{CertificateSecret, ROOT_SECRET, Secret, ValidationSecret, WORKLOAD_SECRET};

/// Why a resource could not be converted. The message names the resource type
/// and name and the field that was wrong; it is sent back as the NACK's detail.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("{kind}: cannot decode {type_url}: {source}")]
    Decode {
        kind: &'static str,
        type_url: String,
        #[source]
        source: prost::DecodeError,
    },
    #[error("{kind}: got a resource of type {got}")]
    WrongType { kind: &'static str, got: String },
    #[error("{kind} {name:?}: {detail}")]
    Invalid { kind: &'static str, name: String, detail: String },
}

/// A field-level problem inside one resource, before the resource's name is
/// known to the caller; `at` prefixes the path of the field.
#[derive(Debug)]
pub(crate) struct Bad(String);

impl Bad {
    pub(crate) fn new(msg: impl Into<String>) -> Bad {
        Bad(msg.into())
    }
    pub(crate) fn at(self, field: impl std::fmt::Display) -> Bad {
        Bad(format!("{field}: {}", self.0))
    }
    pub(crate) fn into_error(self, kind: &'static str, name: &str) -> ConvertError {
        ConvertError::Invalid { kind, name: name.to_string(), detail: self.0 }
    }
}

/// Adds a field path to an error, as in `.map_err(at("routes[2]"))`.
pub(crate) fn at(field: impl std::fmt::Display) -> impl FnOnce(Bad) -> Bad {
    move |b| b.at(field)
}

/// Decodes a typed config of the expected message type.
pub(crate) fn decode_any<M: prost::Message + prost::Name + Default>(any: &protobuf::Any) -> Result<M, Bad> {
    let want = M::full_name();
    let got = any.type_url.rsplit('/').next().unwrap_or_default();
    if got != want {
        return Err(Bad::new(format!("typed_config is {got}, want {want}")));
    }
    M::decode(any.value.as_slice()).map_err(|e| Bad::new(format!("cannot decode {want}: {e}")))
}

/// Decodes a top-level resource: the type must be the one the stream carries.
pub(crate) fn decode_resource<M: prost::Message + prost::Name + Default>(
    kind: &'static str,
    any: &protobuf::Any,
) -> Result<M, ConvertError> {
    let want = M::full_name();
    let got = any.type_url.rsplit('/').next().unwrap_or_default();
    if got != want {
        return Err(ConvertError::WrongType { kind, got: any.type_url.clone() });
    }
    M::decode(any.value.as_slice()).map_err(|source| ConvertError::Decode {
        kind,
        type_url: any.type_url.clone(),
        source,
    })
}

pub(crate) fn duration(d: &protobuf::Duration) -> Result<Duration, Bad> {
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 {
        return Err(Bad::new(format!("invalid duration {}s {}ns", d.seconds, d.nanos)));
    }
    Ok(Duration::new(d.seconds as u64, d.nanos as u32))
}

pub(crate) fn opt_duration(d: Option<&protobuf::Duration>, default: Duration) -> Result<Duration, Bad> {
    d.map_or(Ok(default), duration)
}

/// The IP and port of a socket address; names (DNS) are not accepted here.
pub(crate) fn socket_address(a: Option<&core::Address>) -> Result<SocketAddr, Bad> {
    let (host, port) = host_port(a)?;
    let ip: IpAddr = host.parse().map_err(|_| Bad::new(format!("address {host:?} is not an IP address")))?;
    Ok(SocketAddr::new(ip, port))
}

/// The host (IP or name) and port of a socket address.
pub(crate) fn host_port(a: Option<&core::Address>) -> Result<(&str, u16), Bad> {
    use core::address::Address as A;
    use core::socket_address::PortSpecifier as P;
    let Some(A::SocketAddress(sa)) = a.and_then(|a| a.address.as_ref()) else {
        return Err(Bad::new("address: want a socket address"));
    };
    let port = match sa.port_specifier {
        Some(P::PortValue(p)) => u16::try_from(p).map_err(|_| Bad::new(format!("port {p} out of range")))?,
        Some(P::NamedPort(ref n)) => return Err(Bad::new(format!("named port {n:?} is not supported"))),
        None => 0,
    };
    Ok((sa.address.as_str(), port))
}

/// Durations in the dump read as Envoy writes them: `10s`, `0.250s`.
pub(crate) fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    if d.subsec_nanos() == 0 {
        s.collect_str(&format_args!("{}s", d.as_secs()))
    } else {
        s.collect_str(&format_args!("{:.3}s", d.as_secs_f64()))
    }
}

pub(crate) fn ser_opt_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}

/// Every resource the proxy holds, one consistent set. Resources are behind
/// `Arc`s so a new snapshot that changes one cluster shares all the others.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Snapshot {
    pub clusters: BTreeMap<String, Arc<Cluster>>,
    pub endpoints: BTreeMap<String, Arc<ClusterEndpoints>>,
    pub listeners: BTreeMap<String, Arc<Listener>>,
    pub routes: BTreeMap<String, Arc<RouteConfig>>,
    pub secrets: BTreeMap<String, Arc<Secret>>,
    /// The last applied version of each type, by short name (cds, eds, ...).
    pub versions: BTreeMap<&'static str, String>,
}

/// The currently active [`Snapshot`]; readers never block. The xDS client
/// publishes everything but the local secrets: secrets the proxy gets
/// itself (a sidecar's own certificate from the CA), which every published
/// snapshot carries and which the xDS client does not ask SDS for.
#[derive(Debug, Default)]
pub struct State {
    current: ArcSwap<Snapshot>,
    local_names: BTreeSet<String>,
    /// Held while publishing, so an xDS snapshot and a new local secret
    /// never overwrite each other.
    local: Mutex<BTreeMap<String, Arc<Secret>>>,
}

impl State {
    pub fn new() -> State {
        State::default()
    }

    /// A state whose secrets `names` come from the proxy itself
    /// ([`State::set_local_secrets`]), not from SDS.
    pub fn with_local_secrets<'a>(names: impl IntoIterator<Item = &'a str>) -> State {
        State { local_names: names.into_iter().map(str::to_string).collect(), ..State::default() }
    }

    /// True for a secret the proxy gets itself: the xDS client leaves it out
    /// of its SDS subscription.
    pub fn is_local_secret(&self, name: &str) -> bool {
        self.local_names.contains(name)
    }

    /// Installs the local secrets (only names given to
    /// [`State::with_local_secrets`]) in the current snapshot and every later one.
    pub fn set_local_secrets(&self, secrets: impl IntoIterator<Item = (String, Secret)>) {
        let mut local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, secret) in secrets {
            if self.local_names.contains(&name) {
                local.insert(name, Arc::new(secret));
            }
        }
        let mut snapshot = (*self.current.load_full()).clone();
        snapshot.secrets.extend(local.iter().map(|(k, v)| (k.clone(), Arc::clone(v))));
        self.current.store(Arc::new(snapshot));
    }
    /// The active snapshot; cheap, lock free.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }
    /// Publishes a new snapshot; readers holding the old one keep it until they drop it.
    pub fn publish(&self, mut snapshot: Snapshot) {
        let local = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        snapshot.secrets.extend(local.iter().map(|(k, v)| (k.clone(), Arc::clone(v))));
        self.current.store(Arc::new(snapshot));
    }
}

#[cfg(test)]
mod local_secret_tests {
    use super::*;

    fn roots() -> Secret {
        Secret::Validation(ValidationSecret { roots: Arc::new(rustls::RootCertStore::empty()), certificates: vec![] })
    }

    #[test]
    fn local_secrets_outlive_every_xds_snapshot() {
        let state = State::with_local_secrets([ROOT_SECRET]);
        assert!(state.is_local_secret(ROOT_SECRET) && !state.is_local_secret(WORKLOAD_SECRET));
        state.set_local_secrets([(ROOT_SECRET.to_string(), roots()), ("other".to_string(), roots())]);
        assert_eq!(state.snapshot().secrets.keys().collect::<Vec<_>>(), [ROOT_SECRET], "only declared names");
        // An xDS snapshot without it, or with SDS's own: the local one stays.
        let mine = Arc::clone(&state.snapshot().secrets[ROOT_SECRET]);
        let mut from_xds = Snapshot::default();
        from_xds.secrets.insert(ROOT_SECRET.to_string(), Arc::new(roots()));
        state.publish(from_xds);
        assert!(Arc::ptr_eq(&state.snapshot().secrets[ROOT_SECRET], &mine));
        state.publish(Snapshot::default());
        assert!(Arc::ptr_eq(&state.snapshot().secrets[ROOT_SECRET], &mine));
        // Without local secrets, nothing is added.
        let plain = State::new();
        plain.set_local_secrets([(ROOT_SECRET.to_string(), roots())]);
        assert!(plain.snapshot().secrets.is_empty());
    }
}
