//! The proxy's config model built by hand, for the tests that publish a
//! snapshot directly instead of going through xDS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use meshperf_proxy::state::*;

pub fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint {
        address: EndpointAddress::Socket(addr),
        tls_mode: TlsMode::Disabled,
        weight: 1,
        healthy: true,
        priority: 0,
    }
}

/// A STATIC, round-robin, plain-text HTTP/1.1 cluster over `endpoints`, 1 s
/// connect timeout.
pub fn cluster(name: &str, endpoints: &[SocketAddr]) -> Arc<Cluster> {
    Arc::new(Cluster {
        name: name.into(),
        connect_timeout: Duration::from_secs(1),
        load_assignment: Some(ClusterEndpoints {
            cluster_name: name.into(),
            endpoints: endpoints.iter().copied().map(endpoint).collect(),
        }),
        ..Default::default()
    })
}

pub fn passthrough_cluster() -> Arc<Cluster> {
    let mut c = Arc::try_unwrap(cluster("PassthroughCluster", &[])).unwrap();
    c.discovery = DiscoveryType::OriginalDst;
    c.lb_policy = LbPolicy::ClusterProvided;
    c.load_assignment = None;
    Arc::new(c)
}

pub fn tcp_chain(name: &str, port: Option<u16>, cluster: &str) -> FilterChain {
    let target = ClusterTarget::Cluster(cluster.into());
    chain(
        name,
        port,
        Handler::Tcp(TcpHandler { stat_prefix: cluster.into(), target, tunnel: None, idle_timeout: None }),
    )
}

pub fn http_chain(name: &str, port: Option<u16>, routes: RouteSource) -> FilterChain {
    let handler =
        HttpHandler { stat_prefix: name.into(), routes, connect: false, fault_filter: true, idle_timeout: None };
    chain(name, port, Handler::Http(handler))
}

fn chain(name: &str, port: Option<u16>, handler: Handler) -> FilterChain {
    FilterChain {
        name: name.into(),
        matcher: ChainMatch { destination_port: port, ..Default::default() },
        tls: None,
        handler,
    }
}

pub fn listener(
    name: &str,
    kind: ListenerKind,
    port: u16,
    chains: Vec<FilterChain>,
    default: Option<FilterChain>,
) -> Arc<Listener> {
    Arc::new(Listener {
        name: name.into(),
        address: SocketAddr::from(([0, 0, 0, 0], port)),
        bind_to_port: kind != ListenerKind::Outbound,
        use_original_dst: matches!(kind, ListenerKind::VirtualInbound | ListenerKind::VirtualOutbound),
        direction: if kind == ListenerKind::VirtualInbound {
            TrafficDirection::Inbound
        } else {
            TrafficDirection::Outbound
        },
        kind,
        tls_inspector: kind == ListenerKind::VirtualInbound,
        filter_chains: chains,
        default_filter_chain: default,
    })
}

/// A capture listener for outbound traffic (15001) whose catch-all chain
/// sends what no per-port listener takes to `catch_all` (PassthroughCluster,
/// BlackHoleCluster).
pub fn virtual_outbound(name: &str, catch_all: &str) -> Arc<Listener> {
    listener(name, ListenerKind::VirtualOutbound, 15001, vec![], Some(tcp_chain(catch_all, None, catch_all)))
}

pub fn route(name: &str, path: PathMatch, action: RouteAction) -> Route {
    Route {
        name: name.into(),
        matcher: RouteMatch { path, case_sensitive: true, headers: vec![] },
        action,
        fault: None,
    }
}

pub fn forward(target: ClusterTarget) -> Forward {
    Forward {
        target,
        timeout: Some(Duration::from_secs(5)),
        retry: None,
        prefix_rewrite: None,
        host_rewrite: None,
        terminate_connect: false,
    }
}

pub fn to(cluster: &str) -> RouteAction {
    RouteAction::Forward(forward(ClusterTarget::Cluster(cluster.into())))
}

/// Inline routes named `name`: every request, whatever its host, to `cluster`.
pub fn routes_to(name: &str, cluster: &str) -> RouteSource {
    RouteSource::Inline(Arc::new(RouteConfig {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: name.into(),
            domains: vec!["*".into()],
            routes: vec![route("default", PathMatch::Prefix("/".into()), to(cluster))],
        }],
    }))
}

/// An HTTP chain on port 80 whose inline routes send every request to `cluster`.
pub fn http_chain_to(cluster: &str) -> FilterChain {
    http_chain("80", Some(80), routes_to("80", cluster))
}

/// A snapshot of these clusters and listeners.
pub fn snapshot(
    clusters: impl IntoIterator<Item = Arc<Cluster>>,
    listeners: impl IntoIterator<Item = Arc<Listener>>,
) -> Snapshot {
    let mut snap = Snapshot::default();
    snap.clusters.extend(clusters.into_iter().map(|c| (c.name.clone(), c)));
    snap.listeners.extend(listeners.into_iter().map(|l| (l.name.clone(), l)));
    snap
}

/// Listener `0.0.0.0_80` sending every request to `cluster`, whose one endpoint is `endpoint`.
pub fn http_to(cluster_name: &str, endpoint: SocketAddr) -> Snapshot {
    let l = listener("0.0.0.0_80", ListenerKind::Outbound, 80, vec![http_chain_to(cluster_name)], None);
    snapshot([cluster(cluster_name, &[endpoint])], [l])
}
