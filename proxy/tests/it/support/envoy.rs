//! Envoy resources as a control plane sends them, for the tests that go
//! through a real ADS stream: the `web` mesh (an EDS cluster `web`, listener
//! `0.0.0.0_80` routing by RDS `80`), STATIC clusters with circuit breakers,
//! routes with retries, and a tcp_proxy listener.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as ev3;
use envoy_types::pb::envoy::config::listener::v3 as lv3;
use envoy_types::pb::envoy::config::route::v3 as rv3;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration, UInt32Value};

pub fn any<M: prost::Message + prost::Name>(m: &M) -> Any {
    Any { type_url: M::type_url(), value: m.encode_to_vec() }
}

pub fn pb_duration(d: Duration) -> Option<PbDuration> {
    Some(PbDuration { seconds: d.as_secs() as i64, nanos: d.subsec_nanos() as i32 })
}

pub fn u32v(v: u32) -> Option<UInt32Value> {
    Some(UInt32Value { value: v })
}

fn socket(ip: &str, port: u32) -> Option<core::Address> {
    Some(core::Address {
        address: Some(core::address::Address::SocketAddress(core::SocketAddress {
            address: ip.into(),
            port_specifier: Some(core::socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    })
}

fn lb_endpoint(ip: &str, port: u32) -> ev3::LbEndpoint {
    ev3::LbEndpoint {
        host_identifier: Some(ev3::lb_endpoint::HostIdentifier::Endpoint(ev3::Endpoint {
            address: socket(ip, port),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The EDS cluster `web`.
pub fn cluster() -> Any {
    any(&cv3::Cluster {
        name: "web".into(),
        cluster_discovery_type: Some(cv3::cluster::ClusterDiscoveryType::Type(cv3::cluster::DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(cv3::cluster::EdsClusterConfig { service_name: "web".into(), ..Default::default() }),
        ..Default::default()
    })
}

/// `web`'s endpoints: one, `ip`:8080.
pub fn endpoints(ip: &str) -> Any {
    any(&ev3::ClusterLoadAssignment {
        cluster_name: "web".into(),
        endpoints: vec![ev3::LocalityLbEndpoints { lb_endpoints: vec![lb_endpoint(ip, 8080)], ..Default::default() }],
        ..Default::default()
    })
}

/// Outbound HTTP listener `0.0.0.0_80`, its routes from RDS `80`.
pub fn listener() -> Any {
    let manager = hcm::HttpConnectionManager {
        stat_prefix: "outbound_0.0.0.0_80".into(),
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::Rds(hcm::Rds {
            route_config_name: "80".into(),
            ..Default::default()
        })),
        http_filters: vec![hcm::HttpFilter { name: "envoy.filters.http.router".into(), ..Default::default() }],
        ..Default::default()
    };
    listener_with("0.0.0.0_80", 80, "envoy.filters.network.http_connection_manager", any(&manager))
}

/// Outbound TCP listener `0.0.0.0_PORT`, proxying to `cluster`.
pub fn tcp_listener(port: u16, cluster: &str) -> Any {
    let proxy = tcp::TcpProxy {
        stat_prefix: cluster.into(),
        cluster_specifier: Some(tcp::tcp_proxy::ClusterSpecifier::Cluster(cluster.into())),
        ..Default::default()
    };
    listener_with(&format!("0.0.0.0_{port}"), port, "envoy.filters.network.tcp_proxy", any(&proxy))
}

fn listener_with(name: &str, port: u16, filter: &str, config: Any) -> Any {
    any(&lv3::Listener {
        name: name.into(),
        address: socket("0.0.0.0", u32::from(port)),
        filter_chains: vec![lv3::FilterChain {
            filters: vec![lv3::Filter {
                name: filter.into(),
                config_type: Some(lv3::filter::ConfigType::TypedConfig(config)),
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// Route config `80` with one route to `web`: by prefix `path`, or, with
/// `regex`, by a safe_regex of it.
pub fn routes(path: &str, regex: bool) -> Any {
    let route = if regex {
        route_regex(path, "web")
    } else {
        route_to(rv3::route_match::PathSpecifier::Prefix(path.into()), "web")
    };
    route_config(vec![route])
}

/// A route to `cluster` for the paths that match the safe_regex `regex`.
pub fn route_regex(regex: &str, cluster: &str) -> rv3::Route {
    let path = matcher::RegexMatcher { regex: regex.into(), ..Default::default() };
    route_to(rv3::route_match::PathSpecifier::SafeRegex(path), cluster)
}

/// Route config `80`: one virtual host for every domain, with `routes`.
pub fn route_config(routes: Vec<rv3::Route>) -> Any {
    any(&rv3::RouteConfiguration {
        name: "80".into(),
        virtual_hosts: vec![rv3::VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// A route on `prefix` to `cluster` with a 10 s timeout and an optional
/// retry policy (`retry_on`, retries).
pub fn route(prefix: &str, cluster: &str, retry: Option<(&str, u32)>) -> rv3::Route {
    let mut r = route_to(rv3::route_match::PathSpecifier::Prefix(prefix.into()), cluster);
    if let Some(rv3::route::Action::Route(action)) = &mut r.action {
        action.timeout = pb_duration(Duration::from_secs(10));
        action.retry_policy =
            retry.map(|(on, n)| rv3::RetryPolicy { retry_on: on.into(), num_retries: u32v(n), ..Default::default() });
    }
    r
}

/// A route to `cluster` with Envoy's defaults (15 s timeout, no retries).
fn route_to(path: rv3::route_match::PathSpecifier, cluster: &str) -> rv3::Route {
    rv3::Route {
        r#match: Some(rv3::RouteMatch { path_specifier: Some(path), ..Default::default() }),
        action: Some(rv3::route::Action::Route(rv3::RouteAction {
            cluster_specifier: Some(rv3::route_action::ClusterSpecifier::Cluster(cluster.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A STATIC cluster over `endpoints`, round robin, 1 s connect timeout.
pub fn static_cluster(name: &str, endpoints: &[SocketAddr]) -> cv3::Cluster {
    let lb_endpoints = endpoints.iter().map(|a| lb_endpoint(&a.ip().to_string(), u32::from(a.port()))).collect();
    cv3::Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cv3::cluster::ClusterDiscoveryType::Type(
            cv3::cluster::DiscoveryType::Static as i32,
        )),
        connect_timeout: pb_duration(Duration::from_secs(1)),
        load_assignment: Some(ev3::ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![ev3::LocalityLbEndpoints { lb_endpoints, ..Default::default() }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// DEFAULT-priority thresholds, as Istio writes a DestinationRule's connectionPool.
pub fn thresholds(max_connections: u32, max_pending: u32, max_requests: u32, max_retries: u32) -> cv3::CircuitBreakers {
    cv3::CircuitBreakers {
        thresholds: vec![cv3::circuit_breakers::Thresholds {
            max_connections: u32v(max_connections),
            max_pending_requests: u32v(max_pending),
            max_requests: u32v(max_requests),
            max_retries: u32v(max_retries),
            ..Default::default()
        }],
        ..Default::default()
    }
}
