//! Clusters: how to reach a set of upstream endpoints (discovery, load
//! balancing, limits, outlier detection, and plain or mutual TLS).

use std::collections::BTreeMap;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::transport_sockets::internal_upstream::v3 as internal_upstream;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3 as tls;
use envoy_types::pb::envoy::extensions::upstreams::http::v3 as upstream_http;
use envoy_types::pb::google::protobuf;
use serde::Serialize;

use super::endpoint::{ClusterEndpoints, load_assignment};
use super::{Bad, ConvertError, at, decode_any, decode_resource, opt_duration};

const KIND: &str = "cluster";
/// Envoy's connect_timeout when the cluster sets none.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const HTTP_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
const INTERNAL_UPSTREAM: &str = "envoy.extensions.transport_sockets.internal_upstream.v3.InternalUpstreamTransport";

#[derive(Debug, Serialize)]
pub struct Cluster {
    pub name: String,
    #[serde(rename = "type")]
    pub discovery: DiscoveryType,
    /// The ClusterLoadAssignment name to ask EDS for (EDS clusters only).
    pub eds_service_name: Option<String>,
    pub lb_policy: LbPolicy,
    #[serde(serialize_with = "super::ser_duration")]
    pub connect_timeout: Duration,
    pub circuit_breakers: CircuitBreakers,
    pub outlier_detection: Option<OutlierDetection>,
    pub transport: UpstreamTransport,
    pub protocol: UpstreamProtocol,
    /// Endpoints given in the cluster itself (STATIC and DNS clusters).
    pub load_assignment: Option<ClusterEndpoints>,
    /// ORIGINAL_DST's `upstream_port_override`: connect to the original
    /// destination's IP on this port (a waypoint's HBONE to 15008).
    pub original_dst_port: Option<u16>,
}

/// What Envoy makes of a cluster that sets nothing but its name: STATIC,
/// round robin, plain-text HTTP/1.1, no endpoints.
impl Default for Cluster {
    fn default() -> Cluster {
        Cluster {
            name: String::new(),
            discovery: DiscoveryType::Static,
            eds_service_name: None,
            lb_policy: LbPolicy::RoundRobin,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            circuit_breakers: CircuitBreakers::default(),
            outlier_detection: None,
            transport: UpstreamTransport::Plain,
            protocol: UpstreamProtocol::Http1,
            load_assignment: None,
            original_dst_port: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiscoveryType {
    Static,
    StrictDns,
    LogicalDns,
    Eds,
    OriginalDst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LbPolicy {
    RoundRobin,
    LeastRequest,
    Random,
    /// ORIGINAL_DST clusters: the destination is the connection's own.
    ClusterProvided,
}

/// Envoy's default-priority thresholds; unset fields take Envoy's defaults.
#[derive(Debug, Clone, Serialize)]
pub struct CircuitBreakers {
    pub max_connections: u32,
    pub max_pending_requests: u32,
    pub max_requests: u32,
    pub max_retries: u32,
}

impl Default for CircuitBreakers {
    fn default() -> Self {
        CircuitBreakers { max_connections: 1024, max_pending_requests: 1024, max_requests: 1024, max_retries: 3 }
    }
}

/// Consecutive-error ejection; unset fields take Envoy's defaults.
#[derive(Debug, Clone, Serialize)]
pub struct OutlierDetection {
    pub consecutive_5xx: u32,
    pub consecutive_gateway_failure: Option<u32>,
    #[serde(serialize_with = "super::ser_duration")]
    pub interval: Duration,
    #[serde(serialize_with = "super::ser_duration")]
    pub base_ejection_time: Duration,
    #[serde(serialize_with = "super::ser_duration")]
    pub max_ejection_time: Duration,
    pub max_ejection_percent: u32,
    pub enforcing_consecutive_5xx: u32,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamTransport {
    Plain,
    Tls(UpstreamTls),
    /// Istio's transport_socket_matches: TLS to endpoints whose metadata says
    /// `tlsMode: istio`, plain text to the others.
    Auto(UpstreamTls),
}

#[derive(Debug, Serialize)]
pub struct UpstreamTls {
    pub sni: Option<String>,
    /// SDS name of the client certificate (`default`); None: no client cert.
    pub certificate_secret: Option<String>,
    /// SDS name of the roots (`ROOTCA`); None: trust is not verified by SDS.
    pub validation_secret: Option<String>,
    pub alpn: Vec<String>,
    /// Accepted peer identities (SPIFFE URIs or DNS names); empty: any the roots sign.
    pub subject_alt_names: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamProtocol {
    Http1,
    Http2,
    /// The downstream request's protocol.
    UseDownstream,
}

impl Cluster {
    /// Converts one CDS resource.
    pub fn from_any(any: &protobuf::Any) -> Result<Cluster, ConvertError> {
        let c: cv3::Cluster = decode_resource(KIND, any)?;
        convert(&c).map_err(|b| b.into_error(KIND, &c.name))
    }

    /// SDS names this cluster's TLS needs.
    pub fn secret_names(&self) -> impl Iterator<Item = &str> {
        let tls = match &self.transport {
            UpstreamTransport::Plain => None,
            UpstreamTransport::Tls(t) | UpstreamTransport::Auto(t) => Some(t),
        };
        tls.into_iter().flat_map(|t| t.certificate_secret.as_deref().into_iter().chain(t.validation_secret.as_deref()))
    }
}

fn convert(c: &cv3::Cluster) -> Result<Cluster, Bad> {
    use cv3::cluster::ClusterDiscoveryType as CDT;
    if c.name.is_empty() {
        return Err(Bad::new("cluster has no name"));
    }
    let discovery = match c.cluster_discovery_type {
        None | Some(CDT::Type(0)) => DiscoveryType::Static,
        Some(CDT::Type(1)) => DiscoveryType::StrictDns,
        Some(CDT::Type(2)) => DiscoveryType::LogicalDns,
        Some(CDT::Type(3)) => DiscoveryType::Eds,
        Some(CDT::Type(4)) => DiscoveryType::OriginalDst,
        Some(CDT::Type(t)) => return Err(Bad::new(format!("unknown type {t}"))),
        Some(CDT::ClusterType(_)) => return Err(Bad::new("custom cluster types are not supported")),
    };
    let lb_policy = match c.lb_policy {
        0 => LbPolicy::RoundRobin,
        1 => LbPolicy::LeastRequest,
        3 => LbPolicy::Random,
        6 => LbPolicy::ClusterProvided,
        p => return Err(Bad::new(format!("lb_policy {p} is not supported"))),
    };
    if (discovery == DiscoveryType::OriginalDst) != (lb_policy == LbPolicy::ClusterProvided) {
        return Err(Bad::new("ORIGINAL_DST goes with lb_policy CLUSTER_PROVIDED, and only it"));
    }
    let eds_service_name = (discovery == DiscoveryType::Eds).then(|| {
        c.eds_cluster_config
            .as_ref()
            .map(|e| e.service_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| c.name.clone())
    });
    let load_assignment = match (&c.load_assignment, discovery) {
        (Some(_), DiscoveryType::Eds | DiscoveryType::OriginalDst) => None, // Envoy ignores it there
        (Some(la), d) => Some(load_assignment(la, d != DiscoveryType::Static).map_err(at("load_assignment"))?),
        (None, DiscoveryType::StrictDns | DiscoveryType::LogicalDns) => {
            return Err(Bad::new("DNS clusters need a load_assignment"));
        }
        (None, _) => None,
    };
    let connect_timeout =
        opt_duration(c.connect_timeout.as_ref(), DEFAULT_CONNECT_TIMEOUT).map_err(at("connect_timeout"))?;
    let circuit_breakers = circuit_breakers(c.circuit_breakers.as_ref());
    let outlier_detection = c.outlier_detection.as_ref().map(outlier).transpose().map_err(at("outlier_detection"))?;
    let transport = transport(c).map_err(at("transport_socket"))?;
    let protocol = protocol(c).map_err(at("typed_extension_protocol_options"))?;
    let original_dst_port = original_dst_port(c, discovery).map_err(at("original_dst_lb_config"))?;
    Ok(Cluster {
        name: c.name.clone(),
        discovery,
        eds_service_name,
        lb_policy,
        connect_timeout,
        circuit_breakers,
        outlier_detection,
        transport,
        protocol,
        load_assignment,
        original_dst_port,
    })
}

/// The only original_dst_lb_config the proxy implements: a port override.
fn original_dst_port(c: &cv3::Cluster, discovery: DiscoveryType) -> Result<Option<u16>, Bad> {
    use cv3::cluster::LbConfig;
    let Some(LbConfig::OriginalDstLbConfig(o)) = &c.lb_config else { return Ok(None) };
    if discovery != DiscoveryType::OriginalDst {
        return Err(Bad::new("only for ORIGINAL_DST clusters"));
    }
    if o.use_http_header || !o.http_header_name.is_empty() || o.metadata_key.is_some() {
        return Err(Bad::new("use_http_header and metadata_key are not supported"));
    }
    o.upstream_port_override
        .as_ref()
        .map(|p| {
            u16::try_from(p.value).map_err(|_| Bad::new(format!("upstream_port_override {} out of range", p.value)))
        })
        .transpose()
}

fn circuit_breakers(cb: Option<&cv3::CircuitBreakers>) -> CircuitBreakers {
    let mut out = CircuitBreakers::default();
    // Only the DEFAULT priority (0) applies: the proxy does not use priorities.
    let Some(th) = cb.and_then(|cb| cb.thresholds.iter().find(|t| t.priority == 0)) else { return out };
    let set = |field: &mut u32, v: &Option<protobuf::UInt32Value>| {
        if let Some(v) = v {
            *field = v.value;
        }
    };
    set(&mut out.max_connections, &th.max_connections);
    set(&mut out.max_pending_requests, &th.max_pending_requests);
    set(&mut out.max_requests, &th.max_requests);
    set(&mut out.max_retries, &th.max_retries);
    out
}

fn outlier(o: &cv3::OutlierDetection) -> Result<OutlierDetection, Bad> {
    let u = |v: &Option<protobuf::UInt32Value>, d: u32| v.as_ref().map_or(d, |v| v.value);
    let max_ejection_percent = u(&o.max_ejection_percent, 10);
    if max_ejection_percent > 100 {
        return Err(Bad::new(format!("max_ejection_percent {max_ejection_percent} > 100")));
    }
    Ok(OutlierDetection {
        consecutive_5xx: u(&o.consecutive_5xx, 5),
        consecutive_gateway_failure: o.consecutive_gateway_failure.as_ref().map(|v| v.value),
        interval: opt_duration(o.interval.as_ref(), Duration::from_secs(10)).map_err(at("interval"))?,
        base_ejection_time: opt_duration(o.base_ejection_time.as_ref(), Duration::from_secs(30))
            .map_err(at("base_ejection_time"))?,
        max_ejection_time: opt_duration(o.max_ejection_time.as_ref(), Duration::from_secs(300))
            .map_err(at("max_ejection_time"))?,
        max_ejection_percent,
        enforcing_consecutive_5xx: u(&o.enforcing_consecutive_5xx, 100),
    })
}

fn transport(c: &cv3::Cluster) -> Result<UpstreamTransport, Bad> {
    if c.transport_socket_matches.is_empty() {
        return Ok(match &c.transport_socket {
            None => UpstreamTransport::Plain,
            Some(ts) => upstream_tls(ts)?.map_or(UpstreamTransport::Plain, UpstreamTransport::Tls),
        });
    }
    // Istio's shapes: auto mTLS is a match on tlsMode=istio with TLS plus a
    // plain-text catch-all; a DestinationRule's ISTIO_MUTUAL is a TLS catch-all
    // alone, its DISABLE a plain-text catch-all alone. Anything else would need
    // a general matcher we do not have.
    let mut tls_for_istio = None;
    let mut catch_all: Option<Option<UpstreamTls>> = None; // Some(None): plain text
    for (i, m) in c.transport_socket_matches.iter().enumerate() {
        let criteria =
            struct_strings(m.r#match.as_ref()).map_err(at(format!("transport_socket_matches[{i}].match")))?;
        let tls = match &m.transport_socket {
            None => None,
            Some(ts) => upstream_tls(ts).map_err(at(format!("transport_socket_matches[{i}]")))?,
        };
        let is_istio = criteria.len() == 1 && criteria.get("tlsMode").map(String::as_str) == Some("istio");
        match (is_istio, criteria.is_empty(), tls) {
            (true, _, Some(t)) if tls_for_istio.is_none() => tls_for_istio = Some(t),
            (false, true, t) if catch_all.is_none() => catch_all = Some(t),
            _ => {
                return Err(Bad::new(format!(
                    "transport_socket_matches[{i}] {:?}: only Istio's tlsMode=istio and catch-all matches are supported",
                    m.name
                )));
            }
        }
    }
    match (tls_for_istio, catch_all) {
        (Some(t), Some(None)) => Ok(UpstreamTransport::Auto(t)),
        (None, Some(Some(t))) => Ok(UpstreamTransport::Tls(t)), // ISTIO_MUTUAL
        (None, Some(None)) => Ok(UpstreamTransport::Plain),     // DISABLE
        _ => Err(Bad::new(
            "transport_socket_matches: want Istio's auto mTLS pair, or a single TLS or plain-text catch-all",
        )),
    }
}

fn struct_strings(s: Option<&protobuf::Struct>) -> Result<BTreeMap<String, String>, Bad> {
    use protobuf::value::Kind;
    let mut out = BTreeMap::new();
    for (k, v) in s.map(|s| &s.fields).into_iter().flatten() {
        match &v.kind {
            Some(Kind::StringValue(s)) => out.insert(k.clone(), s.clone()),
            _ => return Err(Bad::new(format!("{k}: want a string"))),
        };
    }
    Ok(out)
}

fn upstream_tls(ts: &core::TransportSocket) -> Result<Option<UpstreamTls>, Bad> {
    use core::transport_socket::ConfigType;
    if ts.name == "envoy.transport_sockets.raw_buffer" {
        return Ok(None);
    }
    let Some(ConfigType::TypedConfig(any)) = &ts.config_type else {
        return Err(Bad::new(format!("{:?}: no typed_config", ts.name)));
    };
    if any.type_url.ends_with("envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer") {
        return Ok(None);
    }
    if any.type_url.ends_with(INTERNAL_UPSTREAM) {
        return internal_upstream(any).map_err(at(INTERNAL_UPSTREAM));
    }
    let ctx: tls::UpstreamTlsContext = decode_any(any)?;
    let common = ctx.common_tls_context.unwrap_or_default();
    let (certificate_secret, validation_secret) = sds_names(&common)?;
    let subject_alt_names = match &common.validation_context_type {
        Some(tls::common_tls_context::ValidationContextType::CombinedValidationContext(c)) => {
            c.default_validation_context.as_ref().map(san_names).transpose()?.unwrap_or_default()
        }
        _ => Vec::new(),
    };
    Ok(Some(UpstreamTls {
        sni: Some(ctx.sni).filter(|s| !s.is_empty()),
        certificate_secret,
        validation_secret,
        alpn: common.alpn_protocols,
        subject_alt_names,
    }))
}

/// Istio's waypoint clusters wrap plain text in `internal_upstream`, whose
/// job in Envoy is to pass endpoint metadata (the `tunnel` destination) to the
/// internal listener; the proxy's internal endpoints carry that destination
/// already (see `EndpointAddress::Internal`), so only the inner socket
/// matters, and it must be plain text: the tunnel's own TLS is the internal
/// listener's cluster's.
fn internal_upstream(any: &protobuf::Any) -> Result<Option<UpstreamTls>, Bad> {
    let t: internal_upstream::InternalUpstreamTransport = decode_any(any)?;
    // `tunnel` is the destination (kept on the endpoint); `istio` is what
    // Istio's stats filter reads, which telemetry here takes from the cluster.
    for (i, m) in t.passthrough_metadata.iter().enumerate() {
        if !matches!(m.name.as_str(), "tunnel" | "istio") {
            return Err(Bad::new(format!(
                "passthrough_metadata[{i}] {:?}: only the tunnel and istio namespaces are supported",
                m.name
            )));
        }
    }
    match t.transport_socket.as_ref().map(upstream_tls).transpose()?.flatten() {
        None => Ok(None),
        Some(_) => Err(Bad::new("transport_socket: only raw_buffer is supported inside internal_upstream")),
    }
}

#[allow(deprecated)] // match_subject_alt_names is still sent by older control planes
fn san_names(v: &tls::CertificateValidationContext) -> Result<Vec<String>, Bad> {
    use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
    let matchers =
        v.match_typed_subject_alt_names.iter().filter_map(|m| m.matcher.as_ref()).chain(&v.match_subject_alt_names);
    let mut out = Vec::new();
    for m in matchers {
        match &m.match_pattern {
            Some(MatchPattern::Exact(s)) => {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
            _ => return Err(Bad::new("subject alt names: only exact matches are supported")),
        }
    }
    Ok(out)
}

/// The SDS names of a TLS context: the certificate's and the validation
/// context's. Inline certificates are not supported: secrets come from SDS.
pub(crate) fn sds_names(common: &tls::CommonTlsContext) -> Result<(Option<String>, Option<String>), Bad> {
    use tls::common_tls_context::ValidationContextType as V;
    if !common.tls_certificates.is_empty() {
        return Err(Bad::new("inline tls_certificates are not supported; use SDS"));
    }
    let cert = match common.tls_certificate_sds_secret_configs.as_slice() {
        [] => None,
        [one] => Some(one.name.clone()),
        _ => return Err(Bad::new("more than one tls_certificate_sds_secret_configs")),
    };
    let validation = match &common.validation_context_type {
        None => None,
        Some(V::ValidationContextSdsSecretConfig(s)) => Some(s.name.clone()),
        Some(V::CombinedValidationContext(c)) => {
            c.validation_context_sds_secret_config.as_ref().map(|s| s.name.clone())
        }
        Some(V::ValidationContext(v)) if v.trusted_ca.is_none() => None,
        Some(_) => return Err(Bad::new("validation context: only SDS is supported")),
    };
    Ok((cert, validation))
}

#[allow(deprecated)] // http2_protocol_options is how older control planes ask for h2
fn protocol(c: &cv3::Cluster) -> Result<UpstreamProtocol, Bad> {
    use upstream_http::http_protocol_options::UpstreamProtocolOptions as U;
    use upstream_http::http_protocol_options::explicit_http_config::ProtocolConfig as P;
    if let Some(any) = c.typed_extension_protocol_options.get(HTTP_OPTIONS) {
        let o: upstream_http::HttpProtocolOptions = decode_any(any)?;
        return Ok(match o.upstream_protocol_options {
            Some(U::ExplicitHttpConfig(e)) => match e.protocol_config {
                Some(P::Http2ProtocolOptions(_)) => UpstreamProtocol::Http2,
                Some(P::HttpProtocolOptions(_)) | None => UpstreamProtocol::Http1,
                Some(P::Http3ProtocolOptions(_)) => return Err(Bad::new("HTTP/3 upstreams are not supported")),
            },
            Some(U::UseDownstreamProtocolConfig(_)) => UpstreamProtocol::UseDownstream,
            Some(U::AutoConfig(_)) => UpstreamProtocol::UseDownstream,
            None => UpstreamProtocol::Http1,
        });
    }
    Ok(if c.http2_protocol_options.is_some() { UpstreamProtocol::Http2 } else { UpstreamProtocol::Http1 })
}
