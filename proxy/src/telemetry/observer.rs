//! The data path's reports turned into Istio's metrics: the sidecar is the
//! source of what it sends out (reporter="source") and the destination of what
//! it receives (reporter="destination"); the other side is known by its mTLS
//! identity when there is one, else "unknown", as Istio shows it. A waypoint
//! (reporter="waypoint") is neither side: the source is its HBONE client,
//! the destination the workload its upstream HBONE stream reached.

use std::sync::{Arc, PoisonError, RwLock};

use foldhash::HashMap;

use super::{
    Peer, Protocol, Reporter, RequestRecord, ResponseFlags, SecurityPolicy, ServiceName, TcpRecord, Telemetry,
};
use crate::proxy::{self, RequestInfo, RequestObserver, RequestProtocol, TcpInfo};

/// Records the data path's requests and connections in [`Telemetry`].
pub struct Observer {
    telemetry: Arc<Telemetry>,
    local: Peer,
    /// Label values parsed once per distinct principal and service host:
    /// building them for every request was most of telemetry's cost.
    peers: LabelCache<Peer>,
    services: LabelCache<ServiceName>,
}

/// A bounded memo of parsed label values by the string they came from.
struct LabelCache<T> {
    map: RwLock<HashMap<Box<str>, T>>,
}

/// Distinct principals and hosts a sidecar sees are few; past this many the
/// cache starts over rather than grow without bound.
const LABEL_CACHE_LIMIT: usize = 4096;

impl<T: Clone> LabelCache<T> {
    fn new() -> Self {
        LabelCache { map: RwLock::new(HashMap::default()) }
    }

    fn get(&self, key: &str, parse: impl FnOnce(&str) -> T) -> T {
        if let Some(v) = self.map.read().unwrap_or_else(PoisonError::into_inner).get(key) {
            return v.clone();
        }
        let v = parse(key);
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= LABEL_CACHE_LIMIT {
            map.clear();
        }
        map.insert(key.into(), v.clone());
        v
    }
}

impl Observer {
    /// `local` is this proxy's own workload (see [`Peer::local`]).
    pub fn new(telemetry: Arc<Telemetry>, local: Peer) -> Self {
        Observer { telemetry, local, peers: LabelCache::new(), services: LabelCache::new() }
    }

    /// Source and destination peers for a report: the local workload on our
    /// side, the peer's identity (or unknown) on the other; for a waypoint,
    /// the client's and the upstream's identities.
    fn peers(
        &self,
        reporter: proxy::Reporter,
        peer_principal: Option<&str>,
        upstream_principal: Option<&str>,
    ) -> (Reporter, Peer, Peer) {
        let peer = |p: Option<&str>| p.map_or_else(Peer::unknown, |p| self.peers.get(p, Peer::from_principal));
        let remote = peer(peer_principal);
        match reporter {
            proxy::Reporter::Source => (Reporter::Source, self.local.clone(), remote),
            proxy::Reporter::Destination => (Reporter::Destination, remote, self.local.clone()),
            proxy::Reporter::Waypoint => (Reporter::Waypoint, remote, peer(upstream_principal)),
        }
    }

    fn service(&self, cluster: Option<&str>, host: Option<&str>) -> ServiceName {
        match (host, cluster) {
            (Some(h), _) => self.services.get(h, ServiceName::from_host),
            (None, Some(c)) => ServiceName::from_cluster(c),
            _ => ServiceName::unknown(),
        }
    }
}

fn security(p: proxy::SecurityPolicy, reporter: Reporter) -> SecurityPolicy {
    match (p, reporter) {
        (proxy::SecurityPolicy::MutualTls, _) => SecurityPolicy::MutualTls,
        // Istio leaves the policy unknown on the client side without mTLS.
        (proxy::SecurityPolicy::None, Reporter::Source) => SecurityPolicy::Unknown,
        (proxy::SecurityPolicy::None, Reporter::Destination | Reporter::Waypoint) => SecurityPolicy::None,
    }
}

/// Envoy's short response flags, comma separated, as the data path writes them.
fn flags(s: &str) -> ResponseFlags {
    let mut out = ResponseFlags::NONE;
    for f in s.split(',').map(str::trim) {
        out |= match f {
            "UH" => ResponseFlags::NO_HEALTHY_UPSTREAM,
            "UT" => ResponseFlags::UPSTREAM_REQUEST_TIMEOUT,
            "LR" => ResponseFlags::LOCAL_RESET,
            "UR" => ResponseFlags::UPSTREAM_REMOTE_RESET,
            "UF" => ResponseFlags::UPSTREAM_CONNECTION_FAILURE,
            "UC" => ResponseFlags::UPSTREAM_CONNECTION_TERMINATION,
            "UO" => ResponseFlags::UPSTREAM_OVERFLOW,
            "NR" => ResponseFlags::NO_ROUTE_FOUND,
            "DI" => ResponseFlags::DELAY_INJECTED,
            "FI" => ResponseFlags::FAULT_INJECTED,
            "DC" => ResponseFlags::DOWNSTREAM_CONNECTION_TERMINATION,
            "URX" => ResponseFlags::UPSTREAM_RETRY_LIMIT_EXCEEDED,
            "DPE" => ResponseFlags::DOWNSTREAM_PROTOCOL_ERROR,
            "UPE" => ResponseFlags::UPSTREAM_PROTOCOL_ERROR,
            "NC" => ResponseFlags::NO_CLUSTER_FOUND,
            _ => ResponseFlags::NONE,
        };
    }
    out
}

impl RequestObserver for Observer {
    fn on_request(&self, info: RequestInfo) {
        let (reporter, source, destination) =
            self.peers(info.reporter, info.peer_principal.as_deref(), info.upstream_principal.as_deref());
        self.telemetry.record_request(&RequestRecord {
            reporter,
            source,
            destination,
            destination_service: self
                .service(info.cluster.as_deref(), info.cluster.as_deref().and_then(proxy::destination_service)),
            protocol: match info.protocol {
                RequestProtocol::Grpc => Protocol::Grpc,
                _ => Protocol::Http,
            },
            response_code: info.response_code,
            response_flags: flags(&info.response_flags),
            security: security(info.security_policy, reporter),
            duration: info.duration,
            request_bytes: info.request_bytes,
            response_bytes: info.response_bytes,
        });
    }

    fn on_tcp_close(&self, info: TcpInfo) {
        let (reporter, source, destination) =
            self.peers(info.reporter, info.peer_principal.as_deref(), info.upstream_principal.as_deref());
        let record = TcpRecord {
            reporter,
            source,
            destination,
            destination_service: self.service(Some(&info.cluster), info.destination_service.as_deref()),
            response_flags: flags(&info.response_flags),
            security: security(info.security_policy, reporter),
            ztunnel: None,
        };
        // Opened and closed are counted together at the close, with all bytes:
        // the data path reports once per connection.
        self.telemetry.tcp_opened(&record);
        self.telemetry.tcp_closed(&record, info.sent_bytes, info.received_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_envoys_short_names() {
        assert_eq!(flags("UH,URX").to_string(), "UH,URX");
        assert!(flags("").is_empty());
        assert!(flags("nonsense").is_empty());
    }
}
