//! The values Istio's standard metrics are labelled with, as small typed values
//! the data path fills in once per connection or route: enums for the closed
//! sets (reporter, protocol, security policy, Envoy's response flags) and shared
//! strings for identities, so that a record is cheap to build and a label set
//! never grows beyond what the mesh has. Empty values render as `unknown`, as in
//! Istio.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::config::Config;

/// Istio's value for a label the proxy cannot know.
pub const UNKNOWN: &str = "unknown";
/// Istio's default trust domain, used in SPIFFE principals.
pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";

/// One shared `"unknown"`, so unknown peers cost no allocation each.
fn unknown() -> Arc<str> {
    static UNKNOWN_ARC: OnceLock<Arc<str>> = OnceLock::new();
    UNKNOWN_ARC.get_or_init(|| Arc::from(UNKNOWN)).clone()
}

fn or_unknown(s: &str) -> Arc<str> {
    if s.is_empty() { unknown() } else { Arc::from(s) }
}

/// A label value as rendered: empty becomes `unknown`.
pub(crate) fn label(s: &str) -> &str {
    if s.is_empty() { UNKNOWN } else { s }
}

/// Which side reports: a sidecar reports `source` for the requests its app
/// sends (outbound) and `destination` for those its app receives (inbound);
/// a waypoint reports `waypoint` (Istio's value) for what passes through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reporter {
    Source,
    Destination,
    Waypoint,
}

impl Reporter {
    pub fn as_str(self) -> &'static str {
        match self {
            Reporter::Source => "source",
            Reporter::Destination => "destination",
            Reporter::Waypoint => "waypoint",
        }
    }
}

/// `request_protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Http,
    Grpc,
    Tcp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Grpc => "grpc",
            Protocol::Tcp => "tcp",
        }
    }
}

/// `connection_security_policy`. Istio reports `unknown` on the source side
/// (the client cannot tell what the server enforced) and `mutual_tls` or
/// `none` on the destination side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecurityPolicy {
    MutualTls,
    None,
    Unknown,
}

impl SecurityPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            SecurityPolicy::MutualTls => "mutual_tls",
            SecurityPolicy::None => "none",
            SecurityPolicy::Unknown => UNKNOWN,
        }
    }
}

/// Envoy's response flags as a bit set, rendered as Envoy's short flags in
/// Envoy's order joined by commas, `-` when none. A bit set rather than a
/// string so that recording never allocates and the label stays bounded.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResponseFlags(u32);

/// Short names in the order of Envoy's `CoreResponseFlag` enum, which is the
/// order Envoy prints them in.
const FLAG_NAMES: [&str; 19] = [
    "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "DC", "URX", "SI", "DPE", "DT", "UPE", "NC", "DF", "DR",
];

impl ResponseFlags {
    pub const NONE: ResponseFlags = ResponseFlags(0);
    /// UH: no healthy upstream host.
    pub const NO_HEALTHY_UPSTREAM: ResponseFlags = ResponseFlags(1 << 0);
    /// UT: upstream request timeout.
    pub const UPSTREAM_REQUEST_TIMEOUT: ResponseFlags = ResponseFlags(1 << 1);
    /// LR: connection reset locally.
    pub const LOCAL_RESET: ResponseFlags = ResponseFlags(1 << 2);
    /// UR: upstream reset the stream.
    pub const UPSTREAM_REMOTE_RESET: ResponseFlags = ResponseFlags(1 << 3);
    /// UF: upstream connection failure.
    pub const UPSTREAM_CONNECTION_FAILURE: ResponseFlags = ResponseFlags(1 << 4);
    /// UC: upstream connection terminated.
    pub const UPSTREAM_CONNECTION_TERMINATION: ResponseFlags = ResponseFlags(1 << 5);
    /// UO: upstream overflow (circuit breaking).
    pub const UPSTREAM_OVERFLOW: ResponseFlags = ResponseFlags(1 << 6);
    /// NR: no route.
    pub const NO_ROUTE_FOUND: ResponseFlags = ResponseFlags(1 << 7);
    /// DI: the request was delayed by fault injection.
    pub const DELAY_INJECTED: ResponseFlags = ResponseFlags(1 << 8);
    /// FI: the request was aborted by fault injection.
    pub const FAULT_INJECTED: ResponseFlags = ResponseFlags(1 << 9);
    /// DC: downstream connection terminated.
    pub const DOWNSTREAM_CONNECTION_TERMINATION: ResponseFlags = ResponseFlags(1 << 10);
    /// URX: retry limit (or max connect attempts for TCP) reached.
    pub const UPSTREAM_RETRY_LIMIT_EXCEEDED: ResponseFlags = ResponseFlags(1 << 11);
    /// SI: stream idle timeout.
    pub const STREAM_IDLE_TIMEOUT: ResponseFlags = ResponseFlags(1 << 12);
    /// DPE: downstream protocol error.
    pub const DOWNSTREAM_PROTOCOL_ERROR: ResponseFlags = ResponseFlags(1 << 13);
    /// DT: max stream duration reached.
    pub const DURATION_TIMEOUT: ResponseFlags = ResponseFlags(1 << 14);
    /// UPE: upstream protocol error.
    pub const UPSTREAM_PROTOCOL_ERROR: ResponseFlags = ResponseFlags(1 << 15);
    /// NC: no cluster.
    pub const NO_CLUSTER_FOUND: ResponseFlags = ResponseFlags(1 << 16);
    /// DF: DNS resolution failed.
    pub const DNS_RESOLUTION_FAILED: ResponseFlags = ResponseFlags(1 << 17);
    /// DR: downstream reset the stream.
    pub const DOWNSTREAM_REMOTE_RESET: ResponseFlags = ResponseFlags(1 << 18);

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn contains(self, other: ResponseFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for ResponseFlags {
    type Output = ResponseFlags;
    fn bitor(self, rhs: ResponseFlags) -> ResponseFlags {
        ResponseFlags(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for ResponseFlags {
    fn bitor_assign(&mut self, rhs: ResponseFlags) {
        self.0 |= rhs.0;
    }
}

impl fmt::Display for ResponseFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut first = true;
        for (bit, name) in FLAG_NAMES.iter().enumerate() {
            if self.0 & (1 << bit) != 0 {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for ResponseFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResponseFlags({self})")
    }
}

/// One end of a request: the workload's name, namespace and SPIFFE principal.
/// Shared strings: the data path builds a peer once per connection (or once for
/// the proxy itself) and clones it cheaply.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Peer {
    pub workload: Arc<str>,
    pub namespace: Arc<str>,
    pub principal: Arc<str>,
}

impl Peer {
    /// Empty values become `unknown`.
    pub fn new(workload: &str, namespace: &str, principal: &str) -> Peer {
        Peer { workload: or_unknown(workload), namespace: or_unknown(namespace), principal: or_unknown(principal) }
    }

    pub fn unknown() -> Peer {
        Peer { workload: unknown(), namespace: unknown(), principal: unknown() }
    }

    /// The proxy's own workload, with Istio's default trust domain.
    pub fn local(config: &Config) -> Peer {
        Peer::local_in(config, DEFAULT_TRUST_DOMAIN)
    }

    pub fn local_in(config: &Config, trust_domain: &str) -> Peer {
        let node = &config.node;
        Peer::new(
            &node.workload_name,
            &node.namespace,
            &spiffe_id(trust_domain, &node.namespace, &node.service_account),
        )
    }

    /// A peer known only by its verified certificate: the namespace comes from
    /// the SPIFFE id (`spiffe://TD/ns/NS/sa/SA`), the workload stays unknown
    /// (Istio learns it through metadata exchange, which we do not do).
    pub fn from_principal(principal: &str) -> Peer {
        let namespace = principal
            .strip_prefix("spiffe://")
            .and_then(|rest| rest.split_once("/ns/"))
            .and_then(|(_, rest)| rest.split_once("/sa/"))
            .map_or("", |(ns, _)| ns);
        Peer::new("", namespace, principal)
    }
}

/// Istio's SPIFFE identity of a service account.
pub fn spiffe_id(trust_domain: &str, namespace: &str, service_account: &str) -> String {
    format!("spiffe://{trust_domain}/ns/{namespace}/sa/{service_account}")
}

/// `destination_service` (the host, e.g. `cart.shop.svc.cluster.local`),
/// `destination_service_name` and `destination_service_namespace`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceName {
    pub host: Arc<str>,
    pub name: Arc<str>,
    pub namespace: Arc<str>,
}

impl ServiceName {
    pub fn unknown() -> ServiceName {
        ServiceName { host: unknown(), name: unknown(), namespace: unknown() }
    }

    /// From a host name: `NAME.NS.svc.DOMAIN` gives name and namespace; any
    /// other host (a ServiceEntry's `api.example.com`) is its own name with an
    /// unknown namespace, as Istio reports it.
    pub fn from_host(host: &str) -> ServiceName {
        let mut parts = host.splitn(4, '.');
        let (name, ns, svc) = (parts.next(), parts.next(), parts.next());
        match (name, ns, svc) {
            (Some(name), Some(ns), Some("svc")) if !name.is_empty() && !ns.is_empty() => {
                ServiceName { host: or_unknown(host), name: Arc::from(name), namespace: Arc::from(ns) }
            }
            _ => ServiceName { host: or_unknown(host), name: or_unknown(host), namespace: unknown() },
        }
    }

    /// From an Istio cluster name, `outbound|PORT|SUBSET|HOST` (or
    /// `inbound|PORT|SUBSET|HOST`); `PassthroughCluster` and
    /// `BlackHoleCluster` are the service name, as in Istio; anything else,
    /// or an inbound cluster without a host, is unknown.
    pub fn from_cluster(cluster: &str) -> ServiceName {
        match cluster {
            "PassthroughCluster" | "BlackHoleCluster" | "InboundPassthroughCluster" => {
                ServiceName { host: unknown(), name: Arc::from(cluster), namespace: unknown() }
            }
            _ => match cluster.split('|').nth(3) {
                Some(host) if !host.is_empty() => ServiceName::from_host(host),
                _ => ServiceName::unknown(),
            },
        }
    }
}
