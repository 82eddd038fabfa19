//! A waypoint's configuration as meshperf pilot sends it (the contract in
//! the project's waypoint xDS brief, Istio's waypoint structure): the
//! `connect_terminate` listener (HBONE in), the `main_internal` internal
//! listener (one chain per service VIP and port), the `connect_originate`
//! internal listener (HBONE out), and their clusters and endpoints.

use std::net::SocketAddr;

use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as ev3;
use envoy_types::pb::envoy::config::listener::v3 as lv3;
use envoy_types::pb::envoy::config::route::v3 as rv3;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
use envoy_types::pb::envoy::extensions::transport_sockets::internal_upstream::v3 as internal_upstream;
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3 as raw_buffer;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::envoy::extensions::upstreams::http::v3 as upstream_http;
use envoy_types::pb::envoy::r#type::matcher::v3 as matcher;
use envoy_types::pb::google::protobuf::{self, Any, BoolValue, Struct, Value};

use super::envoy::{any, u32v};

/// One service port the waypoint serves.
pub struct ServicePort {
    pub host: &'static str,
    pub vip: &'static str,
    pub port: u16,
    /// HTTP (an HCM chain) or TCP (tcp_proxy).
    pub http: bool,
}

impl ServicePort {
    pub fn chain_name(&self) -> String {
        let proto = if self.http { "http" } else { "tcp" };
        format!("inbound-vip|{}|{proto}|{}", self.port, self.host)
    }
    pub fn cluster(&self, subset: &str) -> String {
        format!("outbound|{}|{subset}|{}", self.port, self.host)
    }
}

fn sds(name: &str) -> tls::SdsSecretConfig {
    tls::SdsSecretConfig {
        name: name.into(),
        sds_config: Some(core::ConfigSource {
            config_source_specifier: Some(core::config_source::ConfigSourceSpecifier::Ads(Default::default())),
            ..Default::default()
        }),
    }
}

/// Istio's mesh TLS context: `default` and `ROOTCA` by SDS, h2, TLS 1.3.
fn common_tls() -> tls::CommonTlsContext {
    tls::CommonTlsContext {
        tls_certificate_sds_secret_configs: vec![sds("default")],
        validation_context_type: Some(tls::common_tls_context::ValidationContextType::CombinedValidationContext(
            tls::common_tls_context::CombinedCertificateValidationContext {
                default_validation_context: Some(Default::default()),
                validation_context_sds_secret_config: Some(sds("ROOTCA")),
                ..Default::default()
            },
        )),
        alpn_protocols: vec!["h2".into()],
        tls_params: Some(tls::TlsParameters {
            tls_minimum_protocol_version: tls::tls_parameters::TlsProtocol::TlSv13 as i32,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn transport_socket(name: &str, config: Any) -> core::TransportSocket {
    core::TransportSocket {
        name: name.into(),
        config_type: Some(core::transport_socket::ConfigType::TypedConfig(config)),
    }
}

fn filter(name: &str, config: Any) -> lv3::Filter {
    lv3::Filter { name: name.into(), config_type: Some(lv3::filter::ConfigType::TypedConfig(config)) }
}

fn router() -> hcm::HttpFilter {
    hcm::HttpFilter {
        name: "envoy.filters.http.router".into(),
        config_type: Some(hcm::http_filter::ConfigType::TypedConfig(Any {
            type_url: "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router".into(),
            value: Vec::new(),
        })),
        ..Default::default()
    }
}

fn connect_upgrade() -> hcm::http_connection_manager::UpgradeConfig {
    hcm::http_connection_manager::UpgradeConfig { upgrade_type: "CONNECT".into(), ..Default::default() }
}

/// Listener 1: `connect_terminate` on `address` (0.0.0.0:15008 in a pod).
pub fn connect_terminate(address: SocketAddr) -> Any {
    let route = rv3::Route {
        r#match: Some(rv3::RouteMatch {
            path_specifier: Some(rv3::route_match::PathSpecifier::ConnectMatcher(Default::default())),
            ..Default::default()
        }),
        action: Some(rv3::route::Action::Route(rv3::RouteAction {
            cluster_specifier: Some(rv3::route_action::ClusterSpecifier::Cluster("main_internal".into())),
            upgrade_configs: vec![rv3::route_action::UpgradeConfig {
                upgrade_type: "CONNECT".into(),
                connect_config: Some(Default::default()),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    };
    let manager = hcm::HttpConnectionManager {
        stat_prefix: "connect_terminate".into(),
        codec_type: hcm::http_connection_manager::CodecType::Http2 as i32,
        http2_protocol_options: Some(core::Http2ProtocolOptions {
            allow_connect: true,
            initial_stream_window_size: u32v(4194304),
            initial_connection_window_size: u32v(16777216),
            ..Default::default()
        }),
        upgrade_configs: vec![connect_upgrade()],
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::RouteConfig(rv3::RouteConfiguration {
            name: "connect_terminate".into(),
            virtual_hosts: vec![rv3::VirtualHost {
                name: "connect_terminate".into(),
                domains: vec!["*".into()],
                routes: vec![route],
                ..Default::default()
            }],
            ..Default::default()
        })),
        http_filters: vec![router()],
        ..Default::default()
    };
    let downstream_tls = tls::DownstreamTlsContext {
        require_client_certificate: Some(BoolValue { value: true }),
        common_tls_context: Some(common_tls()),
        ..Default::default()
    };
    any(&lv3::Listener {
        name: "connect_terminate".into(),
        address: Some(socket(address)),
        filter_chains: vec![lv3::FilterChain {
            transport_socket: Some(transport_socket("envoy.transport_sockets.tls", any(&downstream_tls))),
            filters: vec![filter("envoy.filters.network.http_connection_manager", any(&manager))],
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn socket(a: SocketAddr) -> core::Address {
    core::Address {
        address: Some(core::address::Address::SocketAddress(core::SocketAddress {
            address: a.ip().to_string(),
            port_specifier: Some(core::socket_address::PortSpecifier::PortValue(u32::from(a.port()))),
            ..Default::default()
        })),
    }
}

fn internal_listener(name: &str, chains: Vec<lv3::FilterChain>, original_dst: bool) -> lv3::Listener {
    lv3::Listener {
        name: name.into(),
        listener_specifier: Some(lv3::listener::ListenerSpecifier::InternalListener(Default::default())),
        use_original_dst: original_dst.then_some(BoolValue { value: true }),
        traffic_direction: if original_dst { core::TrafficDirection::Inbound as i32 } else { 0 },
        filter_chains: chains,
        ..Default::default()
    }
}

/// Listener 2: `main_internal`, one chain per service port; an HTTP chain
/// routes by `routes` (the service's VirtualService) with the default route
/// to the service's cluster last.
pub fn main_internal(services: &[(ServicePort, Vec<rv3::Route>)]) -> Any {
    let chains = services
        .iter()
        .map(|(svc, routes)| {
            let name = svc.chain_name();
            let network_filter = if svc.http {
                let mut routes = routes.clone();
                routes.push(route_to(rv3::RouteMatch::default(), &svc.cluster("")));
                let manager = hcm::HttpConnectionManager {
                    stat_prefix: name.clone(),
                    route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::RouteConfig(
                        rv3::RouteConfiguration {
                            name: name.clone(),
                            virtual_hosts: vec![rv3::VirtualHost {
                                name: format!("{}:{}", svc.host, svc.port),
                                domains: vec!["*".into()],
                                routes,
                                ..Default::default()
                            }],
                            ..Default::default()
                        },
                    )),
                    http_filters: vec![router()],
                    ..Default::default()
                };
                filter("envoy.filters.network.http_connection_manager", any(&manager))
            } else {
                let proxy = tcp::TcpProxy {
                    stat_prefix: name.clone(),
                    cluster_specifier: Some(tcp::tcp_proxy::ClusterSpecifier::Cluster(svc.cluster(""))),
                    ..Default::default()
                };
                filter("envoy.filters.network.tcp_proxy", any(&proxy))
            };
            lv3::FilterChain {
                name,
                filter_chain_match: Some(lv3::FilterChainMatch {
                    prefix_ranges: vec![core::CidrRange { address_prefix: svc.vip.into(), prefix_len: u32v(32) }],
                    destination_port: u32v(u32::from(svc.port)),
                    ..Default::default()
                }),
                filters: vec![network_filter],
                ..Default::default()
            }
        })
        .collect();
    any(&internal_listener("main_internal", chains, true))
}

/// A route whose match is `m`, to `cluster`.
pub fn route_to(m: rv3::RouteMatch, cluster: &str) -> rv3::Route {
    let m = rv3::RouteMatch {
        path_specifier: m.path_specifier.or(Some(rv3::route_match::PathSpecifier::Prefix("/".into()))),
        ..m
    };
    rv3::Route {
        r#match: Some(m),
        action: Some(rv3::route::Action::Route(rv3::RouteAction {
            cluster_specifier: Some(rv3::route_action::ClusterSpecifier::Cluster(cluster.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// A VirtualService-like route: header `name` equal to `value` goes to `cluster`.
pub fn header_route(name: &str, value: &str, cluster: &str) -> rv3::Route {
    route_to(
        rv3::RouteMatch {
            headers: vec![rv3::HeaderMatcher {
                name: name.into(),
                header_match_specifier: Some(rv3::header_matcher::HeaderMatchSpecifier::StringMatch(
                    matcher::StringMatcher {
                        match_pattern: Some(matcher::string_matcher::MatchPattern::Exact(value.into())),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }],
            ..Default::default()
        },
        cluster,
    )
}

/// Listener 3: `connect_originate`, the tunnel out.
pub fn connect_originate() -> Any {
    let proxy = tcp::TcpProxy {
        stat_prefix: "connect_originate".into(),
        cluster_specifier: Some(tcp::tcp_proxy::ClusterSpecifier::Cluster("connect_originate".into())),
        tunneling_config: Some(tcp::tcp_proxy::TunnelingConfig {
            hostname: "%DOWNSTREAM_LOCAL_ADDRESS%".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let chain = lv3::FilterChain {
        filters: vec![filter("envoy.filters.network.tcp_proxy", any(&proxy))],
        ..Default::default()
    };
    any(&internal_listener("connect_originate", vec![chain], false))
}

fn internal_address(listener: &str, endpoint_id: &str) -> core::Address {
    core::Address {
        address: Some(core::address::Address::EnvoyInternalAddress(core::EnvoyInternalAddress {
            endpoint_id: endpoint_id.into(),
            address_name_specifier: Some(core::envoy_internal_address::AddressNameSpecifier::ServerListenerName(
                listener.into(),
            )),
        })),
    }
}

fn internal_endpoint(listener: &str, endpoint_id: &str, tunnel: Option<&str>) -> ev3::LbEndpoint {
    let metadata = tunnel.map(|destination| core::Metadata {
        filter_metadata: [(
            "tunnel".to_string(),
            Struct {
                fields: [(
                    "destination".to_string(),
                    Value { kind: Some(protobuf::value::Kind::StringValue(destination.into())) },
                )]
                .into(),
            },
        )]
        .into(),
        ..Default::default()
    });
    ev3::LbEndpoint {
        host_identifier: Some(ev3::lb_endpoint::HostIdentifier::Endpoint(ev3::Endpoint {
            address: Some(internal_address(listener, endpoint_id)),
            ..Default::default()
        })),
        metadata,
        ..Default::default()
    }
}

fn discovery(t: cv3::cluster::DiscoveryType) -> Option<cv3::cluster::ClusterDiscoveryType> {
    Some(cv3::cluster::ClusterDiscoveryType::Type(t as i32))
}

/// Cluster `main_internal`: STATIC, to the internal listener of that name.
pub fn main_internal_cluster() -> Any {
    any(&cv3::Cluster {
        name: "main_internal".into(),
        cluster_discovery_type: discovery(cv3::cluster::DiscoveryType::Static),
        load_assignment: Some(ev3::ClusterLoadAssignment {
            cluster_name: "main_internal".into(),
            endpoints: vec![ev3::LocalityLbEndpoints {
                lb_endpoints: vec![internal_endpoint("main_internal", "", None)],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A service cluster `outbound|PORT|SUBSET|HOST`: EDS, over `internal_upstream`.
pub fn service_cluster(name: &str) -> Any {
    let raw = transport_socket("envoy.transport_sockets.raw_buffer", any(&raw_buffer::RawBuffer {}));
    let internal = internal_upstream::InternalUpstreamTransport {
        passthrough_metadata: vec![internal_upstream::internal_upstream_transport::MetadataValueSource {
            name: "tunnel".into(),
            ..Default::default()
        }],
        transport_socket: Some(raw),
    };
    any(&cv3::Cluster {
        name: name.into(),
        cluster_discovery_type: discovery(cv3::cluster::DiscoveryType::Eds),
        eds_cluster_config: Some(cv3::cluster::EdsClusterConfig {
            eds_config: Some(core::ConfigSource {
                config_source_specifier: Some(core::config_source::ConfigSourceSpecifier::Ads(Default::default())),
                ..Default::default()
            }),
            service_name: name.into(),
        }),
        transport_socket: Some(transport_socket("envoy.transport_sockets.internal_upstream", any(&internal))),
        ..Default::default()
    })
}

/// The EDS of a service cluster: one internal endpoint per workload `IP:TARGETPORT`.
pub fn service_endpoints(name: &str, workloads: &[SocketAddr]) -> Any {
    let lb_endpoints = workloads
        .iter()
        .map(|w| internal_endpoint("connect_originate", &w.to_string(), Some(&w.to_string())))
        .collect();
    any(&ev3::ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: vec![ev3::LocalityLbEndpoints { lb_endpoints, ..Default::default() }],
        ..Default::default()
    })
}

/// Cluster `connect_originate`: ORIGINAL_DST to port 15008 (or `hbone_port`), mesh TLS, HTTP/2.
pub fn connect_originate_cluster(hbone_port: u16) -> Any {
    let upstream_tls = tls::UpstreamTlsContext { common_tls_context: Some(common_tls()), ..Default::default() };
    let options = upstream_http::HttpProtocolOptions {
        upstream_protocol_options: Some(upstream_http::http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
            upstream_http::http_protocol_options::ExplicitHttpConfig {
                protocol_config: Some(
                    upstream_http::http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                        core::Http2ProtocolOptions {
                            initial_stream_window_size: u32v(4194304),
                            initial_connection_window_size: u32v(16777216),
                            ..Default::default()
                        },
                    ),
                ),
            },
        )),
        ..Default::default()
    };
    any(&cv3::Cluster {
        name: "connect_originate".into(),
        cluster_discovery_type: discovery(cv3::cluster::DiscoveryType::OriginalDst),
        lb_policy: cv3::cluster::LbPolicy::ClusterProvided as i32,
        lb_config: Some(cv3::cluster::LbConfig::OriginalDstLbConfig(cv3::cluster::OriginalDstLbConfig {
            upstream_port_override: u32v(u32::from(hbone_port)),
            ..Default::default()
        })),
        transport_socket: Some(transport_socket("envoy.transport_sockets.tls", any(&upstream_tls))),
        typed_extension_protocol_options: [(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_string(),
            any(&options),
        )]
        .into(),
        ..Default::default()
    })
}
