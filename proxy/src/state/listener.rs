//! Listeners: where connections arrive and which filter chain serves them.
//!
//! A sidecar has two capture listeners (`virtualOutbound` 15001 and
//! `virtualInbound` 15006, both with `use_original_dst`) and per-port outbound
//! listeners that are not bound (`bind_to_port: false`) but give the chain for
//! a destination port. A listener without a matching chain falls back to its
//! catch-all chain: TCP to `PassthroughCluster` (ORIGINAL_DST) or to
//! `BlackHoleCluster` (no endpoints), which is how REGISTRY_ONLY blocks.
//!
//! A waypoint adds internal listeners (`internal_listener {}`, no address):
//! Envoy's user-space listeners that a cluster endpoint names
//! (`envoy_internal_address`) instead of a socket. They are kept by name, and
//! their chains are chosen by the destination's address (`prefix_ranges`)
//! and port.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::listener::v3 as lv3;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::google::protobuf;
use serde::Serialize;

use super::route::{ClusterTarget, RouteConfig, cluster_target};
use super::{Bad, ConvertError, at, decode_any, decode_resource, socket_address};

const KIND: &str = "listener";
const HCM: &str = "envoy.filters.network.http_connection_manager";
const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
const HTTP_INSPECTOR: &str = "envoy.filters.listener.http_inspector";
const ORIGINAL_DST: &str = "envoy.filters.listener.original_dst";
const FAULT_FILTER: &str = "envoy.filters.http.fault";
const ROUTER_FILTER: &str = "envoy.filters.http.router";

#[derive(Debug, Serialize)]
pub struct Listener {
    pub name: String,
    /// Where it is bound; an internal listener has none (unspecified, port 0)
    /// and is reached only through a cluster's internal endpoint.
    pub address: SocketAddr,
    /// False for the per-port outbound listeners: they exist only to be chosen
    /// by `virtualOutbound` for their port.
    pub bind_to_port: bool,
    pub use_original_dst: bool,
    pub direction: TrafficDirection,
    pub kind: ListenerKind,
    /// A listener filter detects TLS (and SNI/ALPN) before a chain is chosen.
    pub tls_inspector: bool,
    pub filter_chains: Vec<FilterChain>,
    pub default_filter_chain: Option<FilterChain>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficDirection {
    Unspecified,
    Inbound,
    Outbound,
}

/// What the data path does with the listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenerKind {
    /// 15001: dispatches by original destination to the per-port listener.
    VirtualOutbound,
    /// 15006: chooses an inbound chain by original destination port and TLS.
    VirtualInbound,
    /// A per-port outbound listener (`0.0.0.0_PORT`, not bound).
    Outbound,
    /// Any other bound listener (a gateway's, or an explicit one).
    Bound,
    /// An internal listener: no socket, served when a cluster's endpoint
    /// names it (a waypoint's `main_internal`, `connect_originate`).
    Internal,
}

#[derive(Debug, Serialize)]
pub struct FilterChain {
    pub name: String,
    #[serde(rename = "filter_chain_match")]
    pub matcher: ChainMatch,
    /// Terminate TLS on this chain (mTLS when a client certificate is required).
    pub tls: Option<DownstreamTls>,
    pub handler: Handler,
}

/// The subset of Envoy's FilterChainMatch that the control plane uses; an
/// empty field matches anything.
#[derive(Debug, Default, Serialize)]
pub struct ChainMatch {
    pub destination_port: Option<u16>,
    /// The destination address is in one of these (`prefix_ranges`).
    pub destination_prefixes: Vec<CidrRange>,
    pub transport_protocol: Option<TransportProtocol>,
    pub server_names: Vec<String>,
    pub application_protocols: Vec<String>,
}

/// An address prefix, `10.0.0.0/8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CidrRange {
    pub address: IpAddr,
    pub prefix_len: u8,
}

impl CidrRange {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.address, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix_len)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix_len)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportProtocol {
    Tls,
    RawBuffer,
}

#[derive(Debug, Clone, Serialize)]
pub struct DownstreamTls {
    /// SDS name of the certificate to present (`default` for a sidecar).
    pub certificate_secret: String,
    /// SDS name of the roots that verify client certificates (`ROOTCA`).
    pub validation_secret: Option<String>,
    pub require_client_certificate: bool,
    pub alpn: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Handler {
    Http(HttpHandler),
    Tcp(TcpHandler),
}

#[derive(Debug, Serialize)]
pub struct HttpHandler {
    pub stat_prefix: String,
    pub routes: RouteSource,
    /// The connection manager accepts CONNECT (`upgrade_configs` CONNECT):
    /// a waypoint's `connect_terminate`, whose CONNECT routes terminate HBONE.
    pub connect: bool,
    /// The fault filter is in the chain, so per-route faults apply.
    pub fault_filter: bool,
    /// A connection with no bytes either way for this long is closed; None: never.
    #[serde(serialize_with = "super::ser_opt_duration")]
    pub idle_timeout: Option<Duration>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteSource {
    /// A RouteConfiguration delivered over RDS, by name.
    Rds(String),
    Inline(Arc<RouteConfig>),
}

#[derive(Debug, Serialize)]
pub struct TcpHandler {
    pub stat_prefix: String,
    pub target: ClusterTarget,
    /// `tunneling_config`: the connection is carried as an HTTP/2 CONNECT
    /// stream (HBONE) to the cluster's endpoint, not as TCP.
    pub tunnel: Option<Tunnel>,
    #[serde(serialize_with = "super::ser_opt_duration")]
    pub idle_timeout: Option<std::time::Duration>,
}

/// The CONNECT authority of a tunneling tcp_proxy; the one value Istio
/// sends, `%DOWNSTREAM_LOCAL_ADDRESS%`: the address the connection was made
/// to (for an internal listener, its endpoint's destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tunnel {
    DownstreamLocalAddress,
}

impl Listener {
    /// Converts one LDS resource.
    pub fn from_any(any: &protobuf::Any) -> Result<Listener, ConvertError> {
        let l: lv3::Listener = decode_resource(KIND, any)?;
        convert(&l).map_err(|b| b.into_error(KIND, &l.name))
    }

    /// RDS names this listener's HTTP chains need.
    pub fn route_names(&self) -> impl Iterator<Item = &str> {
        self.chains().filter_map(|c| match &c.handler {
            Handler::Http(HttpHandler { routes: RouteSource::Rds(name), .. }) => Some(name.as_str()),
            _ => None,
        })
    }

    /// SDS names this listener's TLS chains need.
    pub fn secret_names(&self) -> impl Iterator<Item = &str> {
        self.chains()
            .filter_map(|c| c.tls.as_ref())
            .flat_map(|t| std::iter::once(t.certificate_secret.as_str()).chain(t.validation_secret.as_deref()))
    }

    /// All filter chains, the default one last.
    pub fn chains(&self) -> impl Iterator<Item = &FilterChain> {
        self.filter_chains.iter().chain(self.default_filter_chain.as_ref())
    }

    /// Chooses the chain for a connection as Envoy does: the most specific
    /// match wins, criteria in Envoy's order (destination port, destination
    /// address — the longest matching prefix —, server name, transport
    /// protocol, application protocol); no match falls back to the default
    /// chain.
    pub fn select_chain(
        &self,
        dest: SocketAddr,
        server_name: Option<&str>,
        transport: TransportProtocol,
        alpn: &[&str],
    ) -> Option<&FilterChain> {
        let mut candidates: Vec<&FilterChain> = self.filter_chains.iter().collect();
        narrow(&mut candidates, |m| match m.destination_port {
            None => Some(0),
            Some(p) => (p == dest.port()).then_some(1),
        });
        // Specificity is the prefix length + 1, so a /0 still beats no prefix.
        narrow(&mut candidates, |m| {
            if m.destination_prefixes.is_empty() {
                return Some(0);
            }
            let longest = m.destination_prefixes.iter().filter(|r| r.contains(dest.ip())).map(|r| r.prefix_len).max();
            longest.map(|len| u32::from(len) + 1)
        });
        narrow(&mut candidates, |m| {
            if m.server_names.is_empty() {
                return Some(0);
            }
            let sni = server_name?;
            m.server_names.iter().any(|n| server_name_matches(n, sni)).then_some(1)
        });
        narrow(&mut candidates, |m| match m.transport_protocol {
            None => Some(0),
            Some(t) => (t == transport).then_some(1),
        });
        narrow(&mut candidates, |m| {
            if m.application_protocols.is_empty() {
                return Some(0);
            }
            m.application_protocols.iter().any(|p| alpn.contains(&p.as_str())).then_some(1)
        });
        candidates.first().copied().or(self.default_filter_chain.as_ref())
    }
}

/// Keeps the candidates that match one criterion and are the most specific
/// for it: `Some(0)` is a wildcard match, higher is more specific, `None` is
/// no match.
fn narrow(candidates: &mut Vec<&FilterChain>, f: impl Fn(&ChainMatch) -> Option<u32>) {
    let best = candidates.iter().filter_map(|c| f(&c.matcher)).max();
    candidates.retain(|c| f(&c.matcher).is_some() && f(&c.matcher) == best);
}

fn server_name_matches(pattern: &str, sni: &str) -> bool {
    let sni = sni.to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        // `*.example.com` matches `a.example.com`, not `example.com` itself.
        Some(suffix) => sni.strip_suffix(suffix).is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        None => pattern == sni,
    }
}

fn convert(l: &lv3::Listener) -> Result<Listener, Bad> {
    if l.name.is_empty() {
        return Err(Bad::new("listener has no name"));
    }
    let internal = matches!(l.listener_specifier, Some(lv3::listener::ListenerSpecifier::InternalListener(_)));
    let address = match (internal, &l.address) {
        (true, None) => SocketAddr::from(([0, 0, 0, 0], 0)),
        (true, Some(_)) => return Err(Bad::new("an internal listener has no address")),
        (false, a) => socket_address(a.as_ref()).map_err(at("address"))?,
    };
    let use_original_dst = l.use_original_dst.as_ref().is_some_and(|b| b.value);
    let bind_to_port = l.bind_to_port.as_ref().is_none_or(|b| b.value);
    let direction = match l.traffic_direction {
        1 => TrafficDirection::Inbound,
        2 => TrafficDirection::Outbound,
        _ => TrafficDirection::Unspecified,
    };
    let mut tls_inspector = false;
    for (i, f) in l.listener_filters.iter().enumerate() {
        match f.name.as_str() {
            TLS_INSPECTOR => tls_inspector = true,
            HTTP_INSPECTOR | ORIGINAL_DST => {}
            other => {
                return Err(
                    Bad::new(format!("unsupported listener filter {other:?}")).at(format!("listener_filters[{i}]"))
                );
            }
        }
    }
    let kind = match (use_original_dst, direction, bind_to_port) {
        _ if internal => ListenerKind::Internal,
        (true, TrafficDirection::Inbound, _) => ListenerKind::VirtualInbound,
        (true, _, _) => ListenerKind::VirtualOutbound,
        (false, _, false) => ListenerKind::Outbound,
        (false, _, true) => ListenerKind::Bound,
    };
    let filter_chains = l
        .filter_chains
        .iter()
        .enumerate()
        .map(|(i, c)| filter_chain(c).map_err(at(format!("filter_chains[{i}]"))))
        .collect::<Result<Vec<_>, _>>()?;
    let default_filter_chain =
        l.default_filter_chain.as_ref().map(|c| filter_chain(c).map_err(at("default_filter_chain"))).transpose()?;
    if filter_chains.is_empty() && default_filter_chain.is_none() {
        return Err(Bad::new("no filter chains"));
    }
    // As Envoy does: a chain that matches on TLS or SNI needs TLS detection,
    // so the inspector is implied even when the listener does not list it.
    tls_inspector |= filter_chains
        .iter()
        .any(|c| c.matcher.transport_protocol == Some(TransportProtocol::Tls) || !c.matcher.server_names.is_empty());
    Ok(Listener {
        name: l.name.clone(),
        address,
        bind_to_port,
        use_original_dst,
        direction,
        kind,
        tls_inspector,
        filter_chains,
        default_filter_chain,
    })
}

fn filter_chain(c: &lv3::FilterChain) -> Result<FilterChain, Bad> {
    let matcher = chain_match(c.filter_chain_match.as_ref()).map_err(at("filter_chain_match"))?;
    let tls = match &c.transport_socket {
        None => None,
        Some(ts) => downstream_tls(ts).map_err(at("transport_socket"))?,
    };
    let [filter] = c.filters.as_slice() else {
        return Err(Bad::new(format!("want exactly one network filter, got {}", c.filters.len())));
    };
    let Some(lv3::filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
        return Err(Bad::new(format!("filters[0] {:?}: no typed_config", filter.name)));
    };
    let handler = match filter.name.as_str() {
        HCM => decode_any(any).and_then(|h| http_handler(&h)).map(Handler::Http),
        TCP_PROXY => decode_any(any).and_then(|t| tcp_handler(&t)).map(Handler::Tcp),
        other => Err(Bad::new(format!("unsupported network filter {other:?}"))),
    }
    .map_err(at("filters[0]"))?;
    Ok(FilterChain { name: c.name.clone(), matcher, tls, handler })
}

fn chain_match(m: Option<&lv3::FilterChainMatch>) -> Result<ChainMatch, Bad> {
    let Some(m) = m else { return Ok(ChainMatch::default()) };
    if !m.source_prefix_ranges.is_empty() || !m.source_ports.is_empty() || !m.direct_source_prefix_ranges.is_empty() {
        return Err(Bad::new("source matches are not supported"));
    }
    let destination_prefixes = m
        .prefix_ranges
        .iter()
        .enumerate()
        .map(|(i, r)| cidr_range(r).map_err(at(format!("prefix_ranges[{i}]"))))
        .collect::<Result<Vec<_>, _>>()?;
    let destination_port = m
        .destination_port
        .as_ref()
        .map(|p| u16::try_from(p.value).map_err(|_| Bad::new(format!("destination_port {} out of range", p.value))))
        .transpose()?;
    let transport_protocol = match m.transport_protocol.as_str() {
        "" => None,
        "tls" => Some(TransportProtocol::Tls),
        "raw_buffer" => Some(TransportProtocol::RawBuffer),
        other => return Err(Bad::new(format!("unknown transport_protocol {other:?}"))),
    };
    Ok(ChainMatch {
        destination_port,
        destination_prefixes,
        transport_protocol,
        server_names: m.server_names.iter().map(|s| s.to_ascii_lowercase()).collect(),
        application_protocols: m.application_protocols.clone(),
    })
}

fn cidr_range(r: &envoy_types::pb::envoy::config::core::v3::CidrRange) -> Result<CidrRange, Bad> {
    let address: IpAddr = r
        .address_prefix
        .parse()
        .map_err(|_| Bad::new(format!("address_prefix {:?} is not an IP", r.address_prefix)))?;
    let prefix_len = r.prefix_len.as_ref().map_or(if address.is_ipv4() { 32 } else { 128 }, |l| l.value);
    let max = if address.is_ipv4() { 32 } else { 128 };
    if prefix_len > max {
        return Err(Bad::new(format!("prefix_len {prefix_len} is more than {max}")));
    }
    Ok(CidrRange { address, prefix_len: prefix_len as u8 })
}

fn downstream_tls(
    ts: &envoy_types::pb::envoy::config::core::v3::TransportSocket,
) -> Result<Option<DownstreamTls>, Bad> {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    if ts.name == "envoy.transport_sockets.raw_buffer" {
        return Ok(None);
    }
    let Some(ConfigType::TypedConfig(any)) = &ts.config_type else {
        return Err(Bad::new(format!("{:?}: no typed_config", ts.name)));
    };
    let ctx: tls::DownstreamTlsContext = decode_any(any)?;
    let common = ctx.common_tls_context.as_ref().ok_or_else(|| Bad::new("no common_tls_context"))?;
    let (certificate_secret, validation_secret) = super::cluster::sds_names(common)?;
    let certificate_secret = certificate_secret.ok_or_else(|| Bad::new("no tls_certificate_sds_secret_configs"))?;
    Ok(Some(DownstreamTls {
        certificate_secret,
        validation_secret,
        require_client_certificate: ctx.require_client_certificate.as_ref().is_some_and(|b| b.value),
        alpn: common.alpn_protocols.clone(),
    }))
}

fn http_handler(h: &hcm::HttpConnectionManager) -> Result<HttpHandler, Bad> {
    use hcm::http_connection_manager::RouteSpecifier;
    let routes = match &h.route_specifier {
        Some(RouteSpecifier::Rds(rds)) if !rds.route_config_name.is_empty() => {
            RouteSource::Rds(rds.route_config_name.clone())
        }
        Some(RouteSpecifier::RouteConfig(rc)) => {
            RouteSource::Inline(Arc::new(RouteConfig::convert(rc).map_err(at("route_config"))?))
        }
        _ => return Err(Bad::new("want rds.route_config_name or an inline route_config")),
    };
    let mut fault_filter = false;
    let mut router = false;
    for (i, f) in h.http_filters.iter().enumerate() {
        match f.name.as_str() {
            FAULT_FILTER => fault_filter = true,
            ROUTER_FILTER => router = true,
            _ if f.is_optional || f.disabled => {}
            other => {
                return Err(Bad::new(format!("unsupported http filter {other:?}")).at(format!("http_filters[{i}]")));
            }
        }
    }
    if !router {
        return Err(Bad::new(format!("http_filters: no {ROUTER_FILTER}")));
    }
    let idle_timeout = idle_timeout(h.common_http_protocol_options.as_ref().and_then(|o| o.idle_timeout.as_ref()))
        .map_err(at("common_http_protocol_options.idle_timeout"))?;
    // Upgrades: websocket is passed through as any request is; CONNECT is
    // accepted for HBONE termination, which needs HTTP/2 with allow_connect.
    let mut connect = false;
    for (i, u) in h.upgrade_configs.iter().enumerate() {
        if u.enabled.as_ref().is_some_and(|e| !e.value) {
            continue;
        }
        match u.upgrade_type.to_ascii_lowercase().as_str() {
            "websocket" => {}
            "connect" => connect = true,
            other => {
                return Err(Bad::new(format!("unsupported upgrade_type {other:?}")).at(format!("upgrade_configs[{i}]")));
            }
        }
    }
    if connect && !h.http2_protocol_options.as_ref().is_some_and(|o| o.allow_connect) {
        return Err(Bad::new("upgrade_configs CONNECT needs http2_protocol_options.allow_connect"));
    }
    Ok(HttpHandler { stat_prefix: h.stat_prefix.clone(), routes, connect, fault_filter, idle_timeout })
}

/// Envoy's default idle timeout of a downstream connection, for the HTTP
/// connection manager and tcp_proxy alike.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// An `idle_timeout` as Envoy reads it: unset is the default, zero disables.
fn idle_timeout(d: Option<&protobuf::Duration>) -> Result<Option<Duration>, Bad> {
    match d {
        None => Ok(Some(DEFAULT_IDLE_TIMEOUT)),
        Some(d) => Ok(Some(super::duration(d)?).filter(|d| !d.is_zero())),
    }
}

fn tcp_handler(t: &tcp::TcpProxy) -> Result<TcpHandler, Bad> {
    use tcp::tcp_proxy::ClusterSpecifier;
    let target = match &t.cluster_specifier {
        Some(ClusterSpecifier::Cluster(c)) if !c.is_empty() => ClusterTarget::Cluster(c.clone()),
        Some(ClusterSpecifier::WeightedClusters(w)) => {
            let pairs = w.clusters.iter().map(|c| (c.name.as_str(), Some(protobuf::UInt32Value { value: c.weight })));
            cluster_target(pairs)?
        }
        _ => return Err(Bad::new("tcp_proxy names no cluster")),
    };
    let idle_timeout = idle_timeout(t.idle_timeout.as_ref()).map_err(at("idle_timeout"))?;
    let tunnel = t.tunneling_config.as_ref().map(tunnel).transpose().map_err(at("tunneling_config"))?;
    Ok(TcpHandler { stat_prefix: t.stat_prefix.clone(), target, tunnel, idle_timeout })
}

/// Istio's waypoint tunnel: CONNECT over HTTP/2 to the downstream's local
/// address; POST, extra headers and a computed hostname are not implemented.
fn tunnel(t: &tcp::tcp_proxy::TunnelingConfig) -> Result<Tunnel, Bad> {
    if t.use_post || !t.post_path.is_empty() {
        return Err(Bad::new("use_post is not supported"));
    }
    if !t.headers_to_add.is_empty() || t.propagate_response_headers || t.propagate_response_trailers {
        return Err(Bad::new("headers_to_add and response propagation are not supported"));
    }
    match t.hostname.as_str() {
        "%DOWNSTREAM_LOCAL_ADDRESS%" => Ok(Tunnel::DownstreamLocalAddress),
        other => Err(Bad::new(format!("hostname {other:?}: only %DOWNSTREAM_LOCAL_ADDRESS% is supported"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(port: Option<u16>, tp: Option<TransportProtocol>, name: &str) -> FilterChain {
        FilterChain {
            name: name.into(),
            matcher: ChainMatch { destination_port: port, transport_protocol: tp, ..Default::default() },
            tls: None,
            handler: Handler::Tcp(TcpHandler {
                stat_prefix: String::new(),
                target: ClusterTarget::Cluster(name.into()),
                tunnel: None,
                idle_timeout: None,
            }),
        }
    }

    #[test]
    fn select_chain_prefers_specific_port_then_transport() {
        let l = Listener {
            name: "virtualInbound".into(),
            address: "0.0.0.0:15006".parse().unwrap(),
            bind_to_port: true,
            use_original_dst: true,
            direction: TrafficDirection::Inbound,
            kind: ListenerKind::VirtualInbound,
            tls_inspector: true,
            filter_chains: vec![
                chain(Some(8080), Some(TransportProtocol::Tls), "mtls"),
                chain(Some(8080), Some(TransportProtocol::RawBuffer), "plain"),
                chain(Some(9090), None, "any9090"),
                chain(None, None, "catchall"),
            ],
            default_filter_chain: None,
        };
        let pick =
            |port, tp| l.select_chain(SocketAddr::from(([10, 0, 0, 1], port)), None, tp, &[]).map(|c| c.name.as_str());
        assert_eq!(pick(8080, TransportProtocol::Tls), Some("mtls"));
        assert_eq!(pick(8080, TransportProtocol::RawBuffer), Some("plain"));
        assert_eq!(pick(9090, TransportProtocol::Tls), Some("any9090"));
        assert_eq!(pick(7000, TransportProtocol::RawBuffer), Some("catchall"));
    }

    #[test]
    fn idle_timeouts_read_as_envoy_does() {
        let d = |seconds| protobuf::Duration { seconds, nanos: 0 };
        assert_eq!(idle_timeout(None).unwrap(), Some(DEFAULT_IDLE_TIMEOUT));
        assert_eq!(idle_timeout(Some(&d(0))).unwrap(), None, "zero disables");
        assert_eq!(idle_timeout(Some(&d(5))).unwrap(), Some(Duration::from_secs(5)));
        assert!(idle_timeout(Some(&d(-1))).is_err());
    }

    #[test]
    fn wildcard_server_names() {
        assert!(server_name_matches("*.example.com", "a.example.com"));
        assert!(!server_name_matches("*.example.com", "example.com"));
        assert!(!server_name_matches("*.example.com", "aexample.com"));
        assert!(server_name_matches("shop.example.com", "Shop.Example.com"));
    }
}
