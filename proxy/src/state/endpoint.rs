//! Endpoints: the addresses of a cluster, from EDS or the cluster's own
//! load_assignment, with the `tlsMode` label that decides mTLS per endpoint.

use std::net::{IpAddr, SocketAddr};

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as ev3;
use envoy_types::pb::google::protobuf;
use serde::Serialize;

use super::{Bad, ConvertError, at, decode_resource, host_port};

const KIND: &str = "endpoints";
const TRANSPORT_SOCKET_MATCH: &str = "envoy.transport_socket_match";
/// The metadata namespace Istio's waypoint endpoints carry their destination in.
const TUNNEL_METADATA: &str = "tunnel";

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
    /// `envoy_internal_address`: a connection to the internal listener
    /// `listener`. `endpoint_id` tells endpoints of one listener apart (a
    /// waypoint's is the destination `IP:PORT`); `destination` is where the
    /// connection is going, the original destination the internal listener
    /// sees: the endpoint's `tunnel` metadata, else `endpoint_id` when it is
    /// an address.
    Internal {
        listener: String,
        endpoint_id: String,
        destination: Option<SocketAddr>,
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
            let address = match internal_address(ep.address.as_ref()) {
                Some(internal) => internal_endpoint(internal, lbe).map_err(at(field()))?,
                None => {
                    let (host, port) = host_port(ep.address.as_ref()).map_err(at(field()))?;
                    match host.parse::<IpAddr>() {
                        Ok(ip) => EndpointAddress::Socket(SocketAddr::new(ip, port)),
                        Err(_) if names_allowed && !host.is_empty() => {
                            EndpointAddress::Dns { host: host.to_string(), port }
                        }
                        Err(_) => return Err(Bad::new(format!("address {host:?} is not an IP address")).at(field())),
                    }
                }
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

fn internal_address(a: Option<&core::Address>) -> Option<&core::EnvoyInternalAddress> {
    match a?.address.as_ref()? {
        core::address::Address::EnvoyInternalAddress(internal) => Some(internal),
        _ => None,
    }
}

fn internal_endpoint(a: &core::EnvoyInternalAddress, lbe: &ev3::LbEndpoint) -> Result<EndpointAddress, Bad> {
    use core::envoy_internal_address::AddressNameSpecifier;
    let Some(AddressNameSpecifier::ServerListenerName(listener)) = &a.address_name_specifier else {
        return Err(Bad::new("envoy_internal_address: no server_listener_name"));
    };
    if listener.is_empty() {
        return Err(Bad::new("envoy_internal_address: no server_listener_name"));
    }
    let tunnel = metadata_string(lbe, TUNNEL_METADATA, "destination");
    let destination = match tunnel {
        Some(d) => Some(d.parse().map_err(|_| Bad::new(format!("metadata tunnel.destination {d:?} is not IP:PORT")))?),
        None => a.endpoint_id.parse().ok(),
    };
    Ok(EndpointAddress::Internal { listener: listener.clone(), endpoint_id: a.endpoint_id.clone(), destination })
}

/// A string in the endpoint's `filter_metadata[namespace][key]`.
fn metadata_string<'a>(lbe: &'a ev3::LbEndpoint, namespace: &str, key: &str) -> Option<&'a str> {
    use protobuf::value::Kind;
    let value = lbe.metadata.as_ref()?.filter_metadata.get(namespace)?.fields.get(key)?;
    match value.kind.as_ref()? {
        Kind::StringValue(s) => Some(s),
        _ => None,
    }
}

fn tls_mode(lbe: &ev3::LbEndpoint) -> TlsMode {
    match metadata_string(lbe, TRANSPORT_SOCKET_MATCH, "tlsMode") {
        Some("istio") => TlsMode::Istio,
        _ => TlsMode::Disabled,
    }
}
