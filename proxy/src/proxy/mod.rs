//! The data path: listeners that accept connections, choose the xDS filter
//! chain that serves each one, and either proxy TCP or run an HTTP server that
//! routes each request to a cluster endpoint.
//!
//! Config is read only through [`State`]: each connection (and each request,
//! and each retry) takes the current snapshot, copies out the few `Arc`s it
//! needs and lets the snapshot go, so a config push never waits on traffic and
//! traffic always sees a consistent set of resources. Telemetry is a seam
//! ([`RequestObserver`]) that the metrics module implements; the data path
//! calls it once a response or a TCP connection is finished. `drain` stops
//! the data path as Envoy does when its pod is stopped.

mod body;
mod circuit;
mod connector;
pub mod drain;
mod forward;
#[doc(hidden)]
pub mod fuzzing;
mod http;
mod idle;
mod lb;
mod listener;
pub mod original_dst;
mod outlier;
mod pool;
pub mod route;
mod tcp;
mod upstream;
mod waypoint;
mod workers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::state::State;
use crate::tls::TlsConfigStore;

pub use drain::{Drain, DrainReport, DrainWatch};
pub use lb::LoadBalancers;
pub use listener::{BoundListener, ListenerTarget};
pub use workers::Workers;

/// What can stop the proxy or one of its connections.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot bind {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the original destination of a redirected connection: {0}")]
    OriginalDst(#[source] std::io::Error),
    #[error("listener {0:?} is not in the active config")]
    UnknownListener(String),
    #[error("listener {listener:?} has no filter chain for port {port}")]
    NoFilterChain { listener: String, port: u16 },
    /// The chain terminates TLS but its certificates are unusable (not yet
    /// delivered by SDS, say): the connection is closed.
    #[error("filter chain {chain:?} cannot terminate TLS: {source}")]
    TlsConfig {
        chain: String,
        #[source]
        source: crate::tls::TlsError,
    },
    #[error("TLS handshake with {peer} failed: {source}")]
    TlsHandshake {
        peer: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("route config {0:?} is not in the active config")]
    UnknownRoutes(String),
    #[error("cluster {0:?} is not in the active config")]
    UnknownCluster(String),
    #[error("no healthy endpoint in cluster {0:?}")]
    NoHealthyUpstream(String),
    #[error("cannot connect to {address} (cluster {cluster:?}): {source}")]
    Connect {
        cluster: String,
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("connection to {0} timed out")]
    ConnectTimeout(String),
    #[error("internal listener {0:?} is not a tunnel (a tcp_proxy with tunneling_config to an ORIGINAL_DST cluster)")]
    NotATunnel(String),
    #[error("cluster {0:?} tunnels without the SDS default/ROOTCA mesh TLS that HBONE needs")]
    TunnelTls(String),
    // Boxed: these are large, and every connection's result carries the enum.
    #[error("HBONE: {0}")]
    Hbone(Box<crate::hbone::Error>),
    #[error("workload certificate: {0}")]
    Certificate(Box<crate::identity::Error>),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl From<crate::hbone::Error> for ProxyError {
    fn from(e: crate::hbone::Error) -> ProxyError {
        ProxyError::Hbone(Box::new(e))
    }
}

impl From<crate::identity::Error> for ProxyError {
    fn from(e: crate::identity::Error) -> ProxyError {
        ProxyError::Certificate(Box::new(e))
    }
}

/// Which side of the workload the proxy was on for a request, Istio's
/// `reporter` label: `source` (outbound, client side), `destination`
/// (inbound, server side), or `waypoint` (between the two: the client is the
/// HBONE peer, the server the upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reporter {
    Source,
    Destination,
    Waypoint,
}

/// Istio's `connection_security_policy` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityPolicy {
    None,
    MutualTls,
}

/// The request's protocol: HTTP/1.x, HTTP/2, or gRPC (any HTTP/2 request
/// whose content-type is `application/grpc...`, as Envoy tells them apart),
/// which Istio's `request_protocol` label reports as `http` or `grpc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestProtocol {
    Http,
    Http2,
    Grpc,
    Tcp,
}

/// One finished HTTP request, as the telemetry module needs it. The local
/// workload (source when outbound, destination when inbound) is the proxy's
/// own node identity from [`Config`]; the other side is what the data path
/// knows: the cluster (whose Istio name carries the destination service) and,
/// with mTLS, the peer's principal.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub reporter: Reporter,
    /// Shared with the connection: a request's report copies no name.
    pub listener: Arc<str>,
    /// The cluster the request was sent to; None when it was not routed.
    /// Its destination service host, when it is an Istio cluster name, is
    /// [`destination_service`]'s, taken by the observer when it needs it.
    pub cluster: Option<String>,
    pub upstream: Option<SocketAddr>,
    pub downstream_peer: SocketAddr,
    pub original_dst: SocketAddr,
    pub protocol: RequestProtocol,
    pub method: hyper::Method,
    pub authority: String,
    pub response_code: u16,
    /// Envoy's short flags (`UF`, `UH`, `UT`, `NR`, `FI`, `DI`, `UC`, `UPE`), comma
    /// separated; empty when none (Istio shows `-`).
    pub response_flags: String,
    pub duration: Duration,
    /// Body bytes received from the client and sent back to it.
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub security_policy: SecurityPolicy,
    /// The peer's SPIFFE identity when the connection was mTLS: the
    /// server's as `source`, the client's as `destination` and `waypoint`.
    pub peer_principal: Option<String>,
    /// As `waypoint`, the server's identity too (its HBONE certificate's).
    pub upstream_principal: Option<String>,
}

/// One finished TCP-proxied connection.
#[derive(Debug, Clone)]
pub struct TcpInfo {
    pub reporter: Reporter,
    pub listener: String,
    pub cluster: String,
    pub destination_service: Option<String>,
    pub upstream: Option<SocketAddr>,
    pub downstream_peer: SocketAddr,
    pub original_dst: SocketAddr,
    /// Bytes from the client to the upstream, and back.
    pub received_bytes: u64,
    pub sent_bytes: u64,
    pub duration: Duration,
    pub response_flags: String,
    pub security_policy: SecurityPolicy,
    /// As in [`RequestInfo`].
    pub peer_principal: Option<String>,
    pub upstream_principal: Option<String>,
}

/// One of a cluster's counters or gauges, by Envoy's stat name under
/// `cluster.<name>.` (`upstream_cx_overflow`, `outlier_detection.ejections_active`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ClusterStat {
    pub cluster: String,
    pub stat: &'static str,
    pub value: u64,
}

impl ClusterStat {
    /// Envoy's full name, `cluster.<name>.<stat>`.
    pub fn name(&self) -> String {
        format!("cluster.{}.{}", self.cluster, self.stat)
    }
}

/// The telemetry seam: called on the worker thread once a response has been
/// sent (or the client went away) and once a TCP connection closes. Keep
/// implementations cheap; push heavy work elsewhere.
pub trait RequestObserver: Send + Sync + 'static {
    fn on_request(&self, info: RequestInfo);
    fn on_tcp_open(&self, _reporter: Reporter, _cluster: &str) {}
    fn on_tcp_close(&self, info: TcpInfo);
}

/// What every connection task shares.
pub(crate) struct Shared {
    pub config: Arc<Config>,
    pub state: Arc<State>,
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// Shared by every worker, as Envoy's outlier detection and circuit
    /// breakers are per cluster, not per worker.
    pub lb: Arc<LoadBalancers>,
    /// Circuit-breaker counters per cluster (see `circuit`).
    pub circuits: Arc<circuit::CircuitBreakers>,
    /// This worker's upstream connections: each worker has its own pools, so
    /// a request and the connection carrying it run on the same thread.
    pub upstreams: upstream::Pools,
    /// TLS configs for the current SDS secrets, shared with the upstream connectors.
    pub tls: Arc<TlsConfigStore>,
    /// HBONE in and out, used when the config has a waypoint's listeners.
    pub waypoint: Arc<waypoint::Waypoint>,
}

/// The proxy's data path: bind with [`Proxy::bind`], then [`Proxy::serve`].
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl Proxy {
    pub fn new(config: Arc<Config>, state: Arc<State>, observer: Option<Arc<dyn RequestObserver>>) -> Proxy {
        let tls = Arc::new(TlsConfigStore::new());
        let certs = Arc::new(waypoint::SecretCertificates::new(state.clone()));
        let own_address = SocketAddr::new(
            config.node.instance_ips.first().copied().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()),
            0,
        );
        let waypoint = Arc::new(waypoint::Waypoint::new(state.clone(), certs, own_address));
        Proxy {
            shared: Arc::new(Shared {
                config,
                upstreams: upstream::Pools::new(state.clone(), tls.clone(), waypoint.clone()),
                state,
                observer,
                lb: Arc::default(),
                circuits: Arc::default(),
                tls,
                waypoint,
            }),
        }
    }

    /// The same proxy with upstream pools of its own, for another worker thread.
    pub(crate) fn for_worker(&self) -> Proxy {
        let s = &self.shared;
        let waypoint = Arc::new(s.waypoint.for_worker());
        Proxy {
            shared: Arc::new(Shared {
                config: s.config.clone(),
                state: s.state.clone(),
                observer: s.observer.clone(),
                lb: s.lb.clone(),
                circuits: s.circuits.clone(),
                upstreams: upstream::Pools::new(s.state.clone(), s.tls.clone(), waypoint.clone()),
                tls: s.tls.clone(),
                waypoint,
            }),
        }
    }

    /// Binds the listeners of the config's capture mode: 15001 and 15006 with
    /// iptables, the `--listen` bindings without.
    pub async fn bind(&self) -> Result<Vec<BoundListener>, ProxyError> {
        listener::bind_all(&self.shared.config).await
    }

    /// The per-cluster counters in Envoy's names, for the admin endpoint:
    /// circuit-breaker overflows and outlier ejections.
    pub fn cluster_stats(&self) -> Vec<ClusterStat> {
        let mut stats = self.shared.circuits.stats();
        stats.extend(self.shared.lb.outlier_stats());
        stats.sort();
        stats
    }

    /// Serves the listeners on the current runtime until the drain starts,
    /// then closes them; the connections are served until the drain is over.
    /// The listeners are counted for the drain when this is called, not when
    /// the returned future first runs.
    pub fn serve(
        &self,
        listeners: Vec<BoundListener>,
        drain: &DrainWatch,
    ) -> impl Future<Output = ()> + Send + 'static {
        listener::serve_all(self.shared.clone(), listeners, None, drain.listeners_open())
    }
}

/// The service host of an Istio cluster name, `outbound|9080|v1|reviews.ns.svc.cluster.local`.
pub fn destination_service(cluster: &str) -> Option<&str> {
    // By bytes: this runs for every request, and splitting by char cost more
    // than the rest of the label work.
    let mut bars = cluster.bytes().enumerate().filter(|(_, c)| *c == b'|').map(|(i, _)| i);
    let (_, _, third) = (bars.next()?, bars.next()?, bars.next()?);
    let host = &cluster[third + 1..bars.next().unwrap_or(cluster.len())];
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    #[test]
    fn destination_service_is_the_host_part_of_an_istio_cluster_name() {
        let cases = [
            ("outbound|9080|v1|reviews.ns.svc.cluster.local", Some("reviews.ns.svc.cluster.local")),
            ("outbound|80||a", Some("a")),
            ("a|b|c|d|e", Some("d")),
            ("inbound|8080||", None),
            ("a|b|c", None),
            ("PassthroughCluster", None),
        ];
        for (cluster, want) in cases {
            assert_eq!(super::destination_service(cluster), want, "{cluster}");
        }
    }
}
