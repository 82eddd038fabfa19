//! Entry points for the fuzz targets (`fuzz/`) and the benches (`benches/`),
//! not part of the proxy's API: they reach the data path's private pieces
//! without making the pieces themselves public.
//!
//! [`HttpHarness`] runs the proxy's real HTTP server path (hyper's server
//! connection with the proxy's routing handler) over an in-memory stream, with
//! a fixed snapshot whose routes end in direct responses, redirects, a fault
//! abort, or clusters that cannot reach anything (no endpoints, or unknown), so
//! no input can make it open a socket.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::drain::{Drain, DrainWatch};
use super::http::{HttpConn, Routes};
use super::{Proxy, Reporter, SecurityPolicy};
use crate::config::{CaptureMode, Config, NodeIdentity};
use crate::state::*;

pub use super::forward::{prepare_headers, rewrite_path, strip_hop_by_hop};

/// The route config the harness serves, by RDS name (looked up per request).
pub const ROUTE_CONFIG: &str = "80";
/// The cluster with no endpoints: every request routed there is a 503 UH.
pub const EMPTY_CLUSTER: &str = "outbound|80||app.ns.svc.cluster.local";
/// An exchange that has not finished in this long (on tokio's clock) hangs.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(120);
/// How long the client waits after sending, before it half-closes: less
/// than the server's header read timeout, more than any in-memory work.
const SETTLE: Duration = Duration::from_secs(1);

/// The proxy's HTTP server path with a fixed snapshot; build once, then
/// [`HttpHarness::exchange`] per input.
pub struct HttpHarness {
    proxy: Proxy,
    /// Never started: the harness's connections are never drained.
    _drain: Drain,
    watch: DrainWatch,
}

impl HttpHarness {
    pub fn new() -> HttpHarness {
        let state = Arc::new(State::new());
        state.publish(snapshot());
        let (drain, watch) = super::drain::channel();
        HttpHarness { proxy: Proxy::new(Arc::new(config()), state, None), _drain: drain, watch }
    }

    /// Feeds `input` as everything a client sends on one connection (then
    /// half-closes), and returns all the proxy wrote back; None when the
    /// exchange did not end within [`EXCHANGE_LIMIT`] on tokio's clock (a
    /// paused clock makes that instant). Call it inside a tokio runtime.
    pub async fn exchange(&self, input: &[u8]) -> Option<Vec<u8>> {
        let conn = HttpConn {
            shared: self.proxy.shared.clone(),
            reporter: Reporter::Source,
            listener: Arc::from("0.0.0.0_80"),
            routes: Routes::Rds(ROUTE_CONFIG.into()),
            fault_filter: true,
            peer: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)), 40000),
            original_dst: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 96, 0, 10)), 80),
            security: SecurityPolicy::None,
            peer_principal: None,
        };
        let (client, server) = tokio::io::duplex(16 * 1024);
        let (mut rx, mut tx) = tokio::io::split(client);
        // Write and read at once: a pipelined input can fill the server's
        // write side before the client has finished sending. The client
        // half-closes only once the server is idle (the sleep ends when
        // nothing else can run, on a paused clock): hyper closes at once on
        // an EOF read mid-request, which would cut every response short.
        let send = async move {
            let _ = tx.write_all(input).await;
            tokio::time::sleep(SETTLE).await;
            let _ = tx.shutdown().await;
        };
        let receive = async move {
            let mut out = Vec::new();
            let _ = rx.read_to_end(&mut out).await;
            out
        };
        let all =
            async { tokio::join!(super::http::serve(Arc::new(conn), server, None, &self.watch), send, receive).2 };
        tokio::time::timeout(EXCHANGE_LIMIT, all).await.ok()
    }
}

impl Default for HttpHarness {
    fn default() -> Self {
        HttpHarness::new()
    }
}

fn config() -> Config {
    Config {
        xds_address: "127.0.0.1:15010".into(),
        node: NodeIdentity {
            id: "sidecar~10.0.0.7~app-0.ns~ns.svc.cluster.local".into(),
            namespace: "ns".into(),
            labels: BTreeMap::new(),
            service_account: "default".into(),
            instance_ips: vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))],
            workload_name: "app".into(),
            metadata: Default::default(),
        },
        delta: true,
        admin_address: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 15000),
        admin_allowed_hosts: Vec::new(),
        concurrency: 1,
        capture_mode: CaptureMode::None,
        listen: Vec::new(),
        drain_duration: Duration::ZERO,
        log_level: "off".into(),
        node_proxy: None,
        own_ca: None,
        xds_auth_token: None,
    }
}

/// Routes that exercise every action without a network: direct responses, a
/// redirect, a fault abort, and forwards that end in 503s (UH, NC).
fn snapshot() -> Snapshot {
    let empty = Cluster {
        name: EMPTY_CLUSTER.into(),
        connect_timeout: Duration::from_secs(1),
        protocol: UpstreamProtocol::UseDownstream,
        load_assignment: Some(ClusterEndpoints { cluster_name: EMPTY_CLUSTER.into(), endpoints: Vec::new() }),
        ..Default::default()
    };
    let forward = |target, prefix_rewrite: Option<&str>| {
        RouteAction::Forward(Forward {
            target,
            timeout: Some(Duration::from_secs(15)),
            retry: Some(RetryPolicy {
                retry_on: vec![RetryOn::ConnectFailure, RetryOn::RetriableStatusCodes],
                num_retries: 2,
                per_try_timeout: None,
                retriable_status_codes: vec![503],
            }),
            prefix_rewrite: prefix_rewrite.map(String::from),
            host_rewrite: Some("app.internal".into()),
            terminate_connect: false,
        })
    };
    let route = |name: &str, path, headers, action| Route {
        name: name.into(),
        matcher: RouteMatch { path, case_sensitive: true, headers },
        action,
        fault: None,
    };
    let header = |name: &str, value| HeaderMatch { name: name.into(), value, invert: false, ignore_case: false };
    let regex = |re: &str| Regex::new(re).ok();
    let mut routes = vec![
        route(
            "direct",
            PathMatch::Prefix("/direct".into()),
            vec![],
            RouteAction::DirectResponse { status: 200, body: Some("direct".into()) },
        ),
        route(
            "redirect",
            PathMatch::PathSeparatedPrefix("/old".into()),
            vec![],
            RouteAction::Redirect(Redirect {
                https: true,
                scheme: None,
                host: None,
                port: Some(8443),
                path: None,
                prefix_rewrite: Some("/new".into()),
                status: 301,
                strip_query: false,
            }),
        ),
        route(
            "api",
            PathMatch::Prefix("/api/v1".into()),
            vec![header(":method", HeaderValueMatch::Exact("POST".into()))],
            forward(ClusterTarget::Cluster(EMPTY_CLUSTER.into()), Some("/v1")),
        ),
        Route {
            fault: Some(Fault { delay: None, abort: Some(FaultAbort { status: 429, per_million: 1_000_000 }) }),
            ..route(
                "fault",
                PathMatch::Exact("/fault".into()),
                vec![],
                forward(ClusterTarget::Cluster("x".into()), None),
            )
        },
    ];
    if let (Some(path), Some(user)) = (regex("^(?:/items/[0-9]+)$"), regex("^(?:[a-z]+-[0-9]{1,4})$")) {
        routes.push(route(
            "items",
            PathMatch::Regex(path),
            vec![
                header("x-user", HeaderValueMatch::Regex(user)),
                header("x-version", HeaderValueMatch::Range { start: 1, end: 10 }),
            ],
            RouteAction::DirectResponse { status: 204, body: None },
        ));
    }
    routes.push(route(
        "default",
        PathMatch::Prefix("/".into()),
        vec![],
        forward(
            ClusterTarget::Weighted(vec![
                WeightedCluster { name: EMPTY_CLUSTER.into(), weight: 90 },
                WeightedCluster { name: "outbound|80|v2|app.ns.svc.cluster.local".into(), weight: 10 },
            ]),
            None,
        ),
    ));
    let app = VirtualHost {
        name: "app.ns.svc.cluster.local:80".into(),
        domains: ["app.ns.svc.cluster.local", "app.ns", "app.ns.svc", "app", "10.96.0.10"]
            .iter()
            .flat_map(|d| [d.to_string(), format!("{d}:80")])
            .collect(),
        routes,
    };
    let block_all = VirtualHost {
        name: "block_all".into(),
        domains: vec!["*".into()],
        routes: vec![route(
            "block_all",
            PathMatch::Prefix("/".into()),
            vec![],
            RouteAction::DirectResponse { status: 502, body: None },
        )],
    };
    let wildcard = VirtualHost {
        name: "wildcard".into(),
        domains: vec!["*.example.com".into(), "api.*".into()],
        routes: vec![route(
            "wild",
            PathMatch::Prefix("/".into()),
            vec![],
            forward(ClusterTarget::Cluster("unknown".into()), None),
        )],
    };
    let rc = RouteConfig { name: ROUTE_CONFIG.into(), virtual_hosts: vec![app, wildcard, block_all] };
    let mut snap = Snapshot::default();
    snap.clusters.insert(EMPTY_CLUSTER.into(), Arc::new(empty));
    snap.routes.insert(ROUTE_CONFIG.into(), Arc::new(rc));
    snap
}
