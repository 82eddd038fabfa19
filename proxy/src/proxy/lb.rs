//! Load balancing over a cluster's endpoints: round robin, least request
//! (power of two choices) and random, as the cluster's lb_policy says.
//!
//! Only healthy endpoints of the best (lowest) priority that has any are
//! candidates; none at all is Envoy's 503 with flag UH. Hosts that outlier
//! detection ejected (see `outlier`) are skipped too, unless too few remain:
//! when under [`PANIC_THRESHOLD_PERCENT`] of the candidates are not ejected,
//! Envoy's panic mode balances across all of them, ejected or not (Envoy's
//! default healthy_panic_threshold is 50%; the state model does not carry the
//! field yet, and meshperf pilot does not set it). Panic here concerns ejection
//! only: EDS-unhealthy endpoints are never used, as before. Endpoint weights
//! are not applied yet. The per-cluster state lives here, outside the config
//! snapshot, so a config push keeps the round-robin position, the in-flight
//! counts and the ejections.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use foldhash::HashMap;
use hyper::http::uri::Authority;

use super::ClusterStat;
use super::outlier::{ClusterOutliers, HostOutlier};
use crate::state::{Cluster, DiscoveryType, Endpoint, EndpointAddress, LbPolicy, OutlierDetection, Snapshot};

/// Envoy's default healthy_panic_threshold.
pub const PANIC_THRESHOLD_PERCENT: usize = 50;

/// Where to send one request or connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UpstreamAddr {
    Socket(SocketAddr),
    /// A DNS cluster's host name, resolved when connecting.
    Name(String, u16),
    /// An internal listener's endpoint (see `EndpointAddress::Internal`),
    /// named in URIs and pools by its endpoint id.
    Internal {
        listener: Arc<str>,
        endpoint_id: Arc<str>,
        destination: Option<SocketAddr>,
    },
}

impl std::fmt::Display for UpstreamAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamAddr::Socket(a) => a.fmt(f),
            UpstreamAddr::Name(h, p) => write!(f, "{h}:{p}"),
            UpstreamAddr::Internal { endpoint_id, .. } => f.write_str(endpoint_id),
        }
    }
}

impl UpstreamAddr {
    /// The address the connection goes to: an internal endpoint's destination.
    pub fn socket(&self) -> Option<SocketAddr> {
        match self {
            UpstreamAddr::Socket(a) => Some(*a),
            UpstreamAddr::Name(..) => None,
            UpstreamAddr::Internal { destination, .. } => *destination,
        }
    }
}

/// What the balancer keeps per endpoint.
#[derive(Default)]
struct Host {
    active: AtomicU32,
    outlier: HostOutlier,
    /// The address as a URI authority, made once: formatting an address for
    /// every request was a tenth of the proxy's own instructions.
    authority: OnceLock<Option<Authority>>,
}

/// A chosen endpoint; it counts as an active request until dropped.
pub struct Pick {
    pub address: UpstreamAddr,
    host: Arc<Host>,
    cluster: Arc<ClusterLb>,
    /// The cluster's host count when picked, for max_ejection_percent.
    hosts: usize,
}

impl std::fmt::Debug for Pick {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pick").field("address", &self.address).finish()
    }
}

impl Pick {
    /// The endpoint as a URI authority (`10.0.0.7:8080`).
    pub fn authority(&self) -> Option<Authority> {
        self.host.authority.get_or_init(|| Authority::try_from(self.address.to_string()).ok()).clone()
    }

    /// Feeds outlier detection with one try's result: `failed` is a 5xx, a
    /// connect failure, a reset or a timeout. True when it ejected the host.
    pub fn report(&self, cfg: Option<&OutlierDetection>, failed: bool) -> bool {
        let Some(cfg) = cfg else { return false };
        let now = Instant::now();
        self.host.outlier.record(&self.cluster.outliers, cfg, failed, self.hosts, now, || self.cluster.sweep(now))
    }
}

impl Drop for Pick {
    fn drop(&mut self) {
        self.host.active.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct ClusterLb {
    next: AtomicUsize,
    hosts: RwLock<HashMap<UpstreamAddr, Arc<Host>>>,
    outliers: ClusterOutliers,
}

/// Balancer state for every cluster, created on first use.
#[derive(Default)]
pub struct LoadBalancers {
    clusters: RwLock<HashMap<String, Arc<ClusterLb>>>,
}

/// The endpoints a cluster has in this snapshot: EDS's, or its own.
pub fn cluster_endpoints<'a>(snap: &'a Snapshot, cluster: &'a Cluster) -> &'a [Endpoint] {
    let own = cluster.load_assignment.as_ref().map(|la| la.endpoints.as_slice());
    match cluster.discovery {
        DiscoveryType::Eds => {
            let name = cluster.eds_service_name.as_deref().unwrap_or(&cluster.name);
            snap.endpoints.get(name).map_or(&[], |e| e.endpoints.as_slice())
        }
        _ => own.unwrap_or(&[]),
    }
}

fn address(e: &Endpoint) -> UpstreamAddr {
    match &e.address {
        EndpointAddress::Socket(a) => UpstreamAddr::Socket(*a),
        EndpointAddress::Dns { host, port } => UpstreamAddr::Name(host.clone(), *port),
        EndpointAddress::Internal { listener, endpoint_id, destination } => UpstreamAddr::Internal {
            listener: Arc::from(listener.as_str()),
            endpoint_id: Arc::from(endpoint_id.as_str()),
            destination: *destination,
        },
    }
}

impl LoadBalancers {
    /// Picks an endpoint; `original_dst` is the endpoint of an ORIGINAL_DST
    /// cluster; `avoid` is the endpoint a retry should not go back to when
    /// there is another. None: no healthy endpoint (503 UH).
    pub fn pick(
        &self,
        snap: &Snapshot,
        cluster: &Cluster,
        original_dst: SocketAddr,
        avoid: Option<&UpstreamAddr>,
    ) -> Option<Pick> {
        let lb = self.cluster(&cluster.name);
        if cluster.discovery == DiscoveryType::OriginalDst {
            return Some(lb.track(UpstreamAddr::Socket(original_dst), 1));
        }
        let all = cluster_endpoints(snap, cluster);
        let priority = all.iter().filter(|e| e.healthy).map(|e| e.priority).min()?;
        let candidates = || all.iter().filter(move |e| e.healthy && e.priority == priority);
        let policy = cluster.lb_policy;
        if lb.outliers.active() == 0 {
            // The common case: no ejection, no allocation.
            let n = candidates().count();
            return self.pick_among(&lb, policy, n, &|i| candidates().nth(i).map(address), avoid, all.len());
        }
        let now = Instant::now();
        let every: Vec<UpstreamAddr> = candidates().map(address).collect();
        let kept: Vec<UpstreamAddr> = every.iter().filter(|a| !lb.is_ejected(a, now)).cloned().collect();
        let set = if kept.len() * 100 < every.len() * PANIC_THRESHOLD_PERCENT { &every } else { &kept };
        self.pick_among(&lb, policy, set.len(), &|i| set.get(i).cloned(), avoid, all.len())
    }

    fn pick_among(
        &self,
        lb: &Arc<ClusterLb>,
        policy: LbPolicy,
        n: usize,
        nth: &dyn Fn(usize) -> Option<UpstreamAddr>,
        avoid: Option<&UpstreamAddr>,
        hosts: usize,
    ) -> Option<Pick> {
        let mut chosen = self.choose(lb, policy, n, nth)?;
        // A retry prefers another endpoint (Istio configures Envoy's
        // previous_hosts predicate); a few tries are enough with random picks.
        for _ in 0..3 {
            if n < 2 || avoid != Some(&chosen) {
                break;
            }
            chosen = self.choose(lb, policy, n, nth)?;
        }
        if n >= 2 && avoid == Some(&chosen) {
            // The policy kept landing there: take any other endpoint.
            if let Some(other) = (0..n).filter_map(nth).find(|a| Some(a) != avoid) {
                chosen = other;
            }
        }
        Some(lb.track(chosen, hosts))
    }

    fn choose(
        &self,
        lb: &ClusterLb,
        policy: LbPolicy,
        n: usize,
        nth: &dyn Fn(usize) -> Option<UpstreamAddr>,
    ) -> Option<UpstreamAddr> {
        if n == 0 {
            return None;
        }
        match policy {
            LbPolicy::RoundRobin | LbPolicy::ClusterProvided => nth(lb.next.fetch_add(1, Ordering::Relaxed) % n),
            LbPolicy::Random => nth(fastrand::usize(0..n)),
            LbPolicy::LeastRequest => {
                let a = nth(fastrand::usize(0..n))?;
                if n == 1 {
                    return Some(a);
                }
                let b = nth(fastrand::usize(0..n))?;
                Some(if lb.active_count(&b) < lb.active_count(&a) { b } else { a })
            }
        }
    }

    fn cluster(&self, name: &str) -> Arc<ClusterLb> {
        if let Some(lb) = self.clusters.read().ok().and_then(|m| m.get(name).cloned()) {
            return lb;
        }
        match self.clusters.write() {
            Ok(mut m) => m.entry(name.to_string()).or_default().clone(),
            // A poisoned lock only loses balancing state; serve with a fresh one.
            Err(_) => Arc::default(),
        }
    }

    /// Envoy's outlier stats per cluster: `ejections_active` and
    /// `ejections_enforced_total`, sorted.
    pub fn outlier_stats(&self) -> Vec<ClusterStat> {
        let mut out = Vec::new();
        let Ok(m) = self.clusters.read() else { return out };
        for (name, lb) in m.iter() {
            // Expired ejections count until a pick or an ejection looks: look now.
            lb.sweep(Instant::now());
            let stat = |stat, value| ClusterStat { cluster: name.clone(), stat, value };
            out.push(stat("outlier_detection.ejections_active", u64::from(lb.outliers.active())));
            out.push(stat("outlier_detection.ejections_enforced_total", lb.outliers.enforced_total()));
        }
        out.sort();
        out
    }
}

impl ClusterLb {
    fn host(&self, addr: &UpstreamAddr) -> Option<Arc<Host>> {
        self.hosts.read().ok().and_then(|m| m.get(addr).cloned())
    }

    fn active_count(&self, addr: &UpstreamAddr) -> u32 {
        self.host(addr).map_or(0, |h| h.active.load(Ordering::Relaxed))
    }

    fn is_ejected(&self, addr: &UpstreamAddr, now: Instant) -> bool {
        self.host(addr).is_some_and(|h| h.outlier.is_ejected(&self.outliers, now))
    }

    /// Returns every host whose ejection has expired to service, also those
    /// no longer in the config (which no pick would look at).
    fn sweep(&self, now: Instant) {
        if self.outliers.active() == 0 {
            return;
        }
        let hosts: Vec<Arc<Host>> = self.hosts.read().map(|m| m.values().cloned().collect()).unwrap_or_default();
        for h in hosts {
            h.outlier.is_ejected(&self.outliers, now);
        }
    }

    fn track(self: &Arc<Self>, address: UpstreamAddr, hosts: usize) -> Pick {
        let host = match self.host(&address) {
            Some(h) => h,
            None => match self.hosts.write() {
                Ok(mut m) => m.entry(address.clone()).or_default().clone(),
                Err(_) => Arc::default(),
            },
        };
        host.active.fetch_add(1, Ordering::Relaxed);
        Pick { address, host, cluster: self.clone(), hosts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ClusterEndpoints, TlsMode};
    use std::time::Duration;

    fn ep(port: u16, healthy: bool, priority: u32) -> Endpoint {
        Endpoint {
            address: EndpointAddress::Socket(SocketAddr::from(([127, 0, 0, 1], port))),
            tls_mode: TlsMode::Disabled,
            weight: 1,
            healthy,
            priority,
        }
    }

    fn cluster(policy: LbPolicy, eps: Vec<Endpoint>) -> Cluster {
        Cluster {
            name: "c".into(),
            lb_policy: policy,
            connect_timeout: Duration::from_secs(1),
            load_assignment: Some(ClusterEndpoints { cluster_name: "c".into(), endpoints: eps }),
            ..Default::default()
        }
    }

    const DST: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 1);

    fn port(p: &Pick) -> u16 {
        p.address.socket().map_or(0, |a| a.port())
    }

    #[test]
    fn round_robin_cycles_over_healthy_best_priority() {
        let lbs = LoadBalancers::default();
        let snap = Snapshot::default();
        let c = cluster(LbPolicy::RoundRobin, vec![ep(1, true, 0), ep(2, false, 0), ep(3, true, 0), ep(4, true, 1)]);
        let ports: Vec<u16> = (0..4).map(|_| port(&lbs.pick(&snap, &c, DST, None).unwrap())).collect();
        assert_eq!(ports, [1, 3, 1, 3]);
        // Priority 1 is used when priority 0 has nothing healthy.
        let c = cluster(LbPolicy::RoundRobin, vec![ep(1, false, 0), ep(4, true, 1)]);
        assert_eq!(port(&lbs.pick(&snap, &c, DST, None).unwrap()), 4);
    }

    #[test]
    fn no_healthy_endpoint_is_none() {
        let lbs = LoadBalancers::default();
        let snap = Snapshot::default();
        for policy in [LbPolicy::RoundRobin, LbPolicy::Random, LbPolicy::LeastRequest] {
            assert!(lbs.pick(&snap, &cluster(policy, vec![]), DST, None).is_none());
            assert!(lbs.pick(&snap, &cluster(policy, vec![ep(1, false, 0)]), DST, None).is_none());
        }
    }

    #[test]
    fn least_request_avoids_the_busy_endpoint() {
        let lbs = LoadBalancers::default();
        let snap = Snapshot::default();
        let c = cluster(LbPolicy::LeastRequest, vec![ep(1, true, 0), ep(2, true, 0)]);
        // Hold many requests on whichever endpoint comes first, then the other wins every comparison it is in.
        let first = lbs.pick(&snap, &c, DST, None).unwrap();
        let busy = port(&first);
        let held: Vec<Pick> =
            (0..50).filter_map(|_| lbs.pick(&snap, &c, DST, None)).filter(|p| port(p) == busy).collect();
        let to_busy = (0..200).filter(|_| lbs.pick(&snap, &c, DST, None).is_some_and(|p| port(&p) == busy)).count();
        // P2C picks the busy one only when both choices are it: about 1 in 4.
        assert!(to_busy < 100, "busy endpoint got {to_busy} of 200");
        drop(held);
    }

    #[test]
    fn retries_avoid_the_previous_endpoint() {
        let lbs = LoadBalancers::default();
        let snap = Snapshot::default();
        let c = cluster(LbPolicy::Random, vec![ep(1, true, 0), ep(2, true, 0)]);
        let avoid = UpstreamAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 1)));
        let hits = (0..100).filter(|_| lbs.pick(&snap, &c, DST, Some(&avoid)).is_some_and(|p| port(&p) == 1)).count();
        assert_eq!(hits, 0, "a retry went back to the endpoint it should avoid");
    }

    #[test]
    fn original_dst_goes_where_the_client_was_going() {
        let lbs = LoadBalancers::default();
        let mut c = cluster(LbPolicy::ClusterProvided, vec![]);
        c.discovery = DiscoveryType::OriginalDst;
        assert_eq!(lbs.pick(&Snapshot::default(), &c, DST, None).unwrap().address, UpstreamAddr::Socket(DST));
    }

    fn outliers(percent: u32) -> OutlierDetection {
        OutlierDetection {
            consecutive_5xx: 1,
            consecutive_gateway_failure: None,
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: percent,
            enforcing_consecutive_5xx: 100,
        }
    }

    #[test]
    fn ejected_endpoints_are_skipped_until_too_few_remain() {
        let lbs = LoadBalancers::default();
        let snap = Snapshot::default();
        let c = cluster(LbPolicy::RoundRobin, vec![ep(1, true, 0), ep(2, true, 0)]);
        let od = outliers(100);
        let bad = lbs.pick(&snap, &c, DST, None).unwrap();
        let bad_port = port(&bad);
        assert!(bad.report(Some(&od), true), "one 5xx ejects with consecutive_5xx 1");
        drop(bad);
        assert!((0..10).all(|_| port(&lbs.pick(&snap, &c, DST, None).unwrap()) != bad_port));
        let s = &lbs.outlier_stats()[0];
        assert_eq!((s.name(), s.value), ("cluster.c.outlier_detection.ejections_active".into(), 1));
        // Eject the other too: none left is below the 50% panic threshold, so both serve again.
        let other = lbs.pick(&snap, &c, DST, None).unwrap();
        assert!(other.report(Some(&od), true));
        drop(other);
        let mut seen: Vec<u16> = (0..10).map(|_| port(&lbs.pick(&snap, &c, DST, None).unwrap())).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, [1, 2]);
        let s = &lbs.outlier_stats()[1];
        assert_eq!((s.name(), s.value), ("cluster.c.outlier_detection.ejections_enforced_total".into(), 2));
    }

    #[test]
    fn without_outlier_detection_failures_eject_nobody() {
        let lbs = LoadBalancers::default();
        let snap = Snapshot::default();
        let c = cluster(LbPolicy::RoundRobin, vec![ep(1, true, 0), ep(2, true, 0)]);
        let p = lbs.pick(&snap, &c, DST, None).unwrap();
        assert!(!p.report(None, true));
        // Envoy's default 10% cannot take one of two hosts out.
        assert!((0..5).all(|_| !p.report(Some(&outliers(10)), true)));
    }
}
