//! Endpoints: the addresses of a cluster, from EDS or the cluster's own
//! load_assignment, with the `tlsMode` label that decides mTLS per endpoint.

use std::net::{IpAddr, SocketAddr};

use envoy_types::pb::envoy::config::endpoint::v3 as ev3;
use envoy_types::pb::google::protobuf;
use serde::Serialize;

use super::{Bad, ConvertError, at, decode_resource, host_port};

const KIND: &str = "endpoints";
const TRANSPORT_SOCKET_MATCH: &str = "envoy.transport_socket_match";

#[derive(Debug, Serialize)]
pub struct ClusterEndpoints {
    pub cluster_name: String,
    pub endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    pub address: EndpointAddress,
    pub tls_mode: TlsMode,
    /// Load-balancing weight (locality weight times endpoint weight; 1 when unset).
    pub weight: u32,
    /// False for endpoints EDS marks UNHEALTHY, DRAINING or TIMEOUT.
    pub healthy: bool,
    pub priority: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointAddress {
    Socket(SocketAddr),
    /// A name to resolve (STRICT_DNS and LOGICAL_DNS clusters only).
    Dns {
        host: String,
        port: u16,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TlsMode {
    /// The endpoint has a sidecar: Istio mTLS when the cluster's transport is auto.
    Istio,
    Disabled,
}

impl ClusterEndpoints {
    /// Converts one EDS resource.
    pub fn from_any(any: &protobuf::Any) -> Result<ClusterEndpoints, ConvertError> {
        let cla: ev3::ClusterLoadAssignment = decode_resource(KIND, any)?;
        load_assignment(&cla, false).map_err(|b| b.into_error(KIND, &cla.cluster_name))
    }
}

/// Converts a ClusterLoadAssignment; `names_allowed` lets DNS clusters give
/// host names where EDS must give IPs.
pub(crate) fn load_assignment(cla: &ev3::ClusterLoadAssignment, names_allowed: bool) -> Result<ClusterEndpoints, Bad> {
    use ev3::lb_endpoint::HostIdentifier;
    let mut endpoints = Vec::new();
    for (i, locality) in cla.endpoints.iter().enumerate() {
        let locality_weight = locality.load_balancing_weight.as_ref().map_or(1, |w| w.value);
        for (j, lbe) in locality.lb_endpoints.iter().enumerate() {
            let field = || format!("endpoints[{i}].lb_endpoints[{j}]");
            let Some(HostIdentifier::Endpoint(ep)) = &lbe.host_identifier else {
                return Err(Bad::new("want an endpoint").at(field()));
            };
            let (host, port) = host_port(ep.address.as_ref()).map_err(at(field()))?;
            let address = match host.parse::<IpAddr>() {
                Ok(ip) => EndpointAddress::Socket(SocketAddr::new(ip, port)),
                Err(_) if names_allowed && !host.is_empty() => EndpointAddress::Dns { host: host.to_string(), port },
                Err(_) => return Err(Bad::new(format!("address {host:?} is not an IP address")).at(field())),
            };
            let weight = lbe.load_balancing_weight.as_ref().map_or(1, |w| w.value).saturating_mul(locality_weight);
            endpoints.push(Endpoint {
                address,
                tls_mode: tls_mode(lbe),
                weight: weight.max(1),
                healthy: !matches!(lbe.health_status, 2..=4),
                priority: locality.priority,
            });
        }
    }
    Ok(ClusterEndpoints { cluster_name: cla.cluster_name.clone(), endpoints })
}

fn tls_mode(lbe: &ev3::LbEndpoint) -> TlsMode {
    use protobuf::value::Kind;
    let mode = lbe
        .metadata
        .as_ref()
        .and_then(|m| m.filter_metadata.get(TRANSPORT_SOCKET_MATCH))
        .and_then(|s| s.fields.get("tlsMode"))
        .and_then(|v| v.kind.as_ref());
    match mode {
        Some(Kind::StringValue(s)) if s == "istio" => TlsMode::Istio,
        _ => TlsMode::Disabled,
    }
}
