//! The proxy module end to end in explicit mode: real upstreams on loopback,
//! a hand-built config snapshot, HTTP/1.1 and h2c clients.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use meshperf_proxy::proxy::{Reporter, RequestProtocol};
use meshperf_proxy::state::*;

use crate::support::*;

struct Mesh {
    proxy: Running,
    /// Hits of the upstream that always answers 503.
    failing_hits: Arc<AtomicUsize>,
    _down: tokio::net::TcpSocket,
}

/// Outbound port 80 with routes for every case, and inbound port 8080 to a local app.
async fn mesh() -> Mesh {
    let (a, _) = upstream("a").await;
    let (b, _) = upstream("b").await;
    let (app, _) = upstream("app").await;
    let (failing, failing_hits) = upstream("failing").await;
    let (down, down_socket) = closed_port();

    let header = |name: &str, value: &str| HeaderMatch {
        name: name.into(),
        value: HeaderValueMatch::Exact(value.into()),
        invert: false,
        ignore_case: false,
    };
    let mut to_b = route("to-b", PathMatch::Prefix("/".into()), to("outbound|80||b"));
    to_b.matcher.headers.push(header("x-route", "b"));
    let weighted = ClusterTarget::Weighted(vec![
        WeightedCluster { name: "outbound|80||a".into(), weight: 25 },
        WeightedCluster { name: "outbound|80||b".into(), weight: 75 },
    ]);
    let mut rewrite = forward(ClusterTarget::Cluster("outbound|80||a".into()));
    rewrite.prefix_rewrite = Some("/new".into());
    rewrite.host_rewrite = Some("rewritten.example".into());
    let mut slow = forward(ClusterTarget::Cluster("outbound|80||a".into()));
    slow.timeout = Some(Duration::from_millis(200));
    let mut flaky = forward(ClusterTarget::Cluster("outbound|80||flaky".into()));
    flaky.retry = Some(RetryPolicy {
        retry_on: vec![RetryOn::RetriableStatusCodes, RetryOn::ConnectFailure],
        num_retries: 2,
        per_try_timeout: None,
        retriable_status_codes: vec![503],
    });
    let mut fault = route("fault", PathMatch::Prefix("/fault".into()), to("outbound|80||a"));
    fault.fault = Some(Fault { delay: None, abort: Some(FaultAbort { status: 418, per_million: 1_000_000 }) });
    let routes = RouteConfig {
        name: "80".into(),
        virtual_hosts: vec![VirtualHost {
            name: "a.shop.svc.cluster.local:80".into(),
            domains: vec!["a.shop.svc.cluster.local".into(), "a.shop.svc.cluster.local:80".into()],
            routes: vec![
                to_b,
                route("split", PathMatch::Prefix("/split".into()), RouteAction::Forward(forward(weighted))),
                route("rewrite", PathMatch::Prefix("/old".into()), RouteAction::Forward(rewrite)),
                route("empty", PathMatch::Prefix("/empty".into()), to("outbound|80||empty")),
                route("down", PathMatch::Prefix("/down".into()), to("outbound|80||down")),
                route("slow", PathMatch::Prefix("/slow".into()), RouteAction::Forward(slow)),
                route("flaky", PathMatch::Prefix("/flaky".into()), RouteAction::Forward(flaky)),
                fault,
                route(
                    "direct",
                    PathMatch::Exact("/direct".into()),
                    RouteAction::DirectResponse { status: 204, body: None },
                ),
                route("default", PathMatch::Prefix("/".into()), to("outbound|80||a")),
            ],
        }],
    };
    let inbound_routes = RouteConfig {
        name: "inbound|8080||".into(),
        virtual_hosts: vec![VirtualHost {
            name: "inbound|http|8080".into(),
            domains: vec!["*".into()],
            routes: vec![route("default", PathMatch::Prefix("/".into()), to("inbound|8080||"))],
        }],
    };
    let mut tls_chain = http_chain("tls-8443", Some(8443), RouteSource::Rds("80".into()));
    tls_chain.tls = Some(DownstreamTls {
        certificate_secret: "default".into(),
        validation_secret: Some("ROOTCA".into()),
        require_client_certificate: true,
        alpn: vec![],
    });

    let clusters = [
        cluster("outbound|80||a", &[a]),
        cluster("outbound|80||b", &[b]),
        cluster("outbound|80||empty", &[]),
        cluster("outbound|80||down", &[down]),
        // Round robin alternates: every other first try fails with 503 and is retried on the other endpoint.
        cluster("outbound|80||flaky", &[failing, a]),
        cluster("inbound|8080||", &[app]),
        passthrough_cluster(),
    ];
    let listeners = [
        virtual_outbound("virtualOutbound", "PassthroughCluster"),
        listener(
            "0.0.0.0_80",
            ListenerKind::Outbound,
            80,
            vec![http_chain("80", Some(80), RouteSource::Rds("80".into()))],
            None,
        ),
        listener(
            "virtualInbound",
            ListenerKind::VirtualInbound,
            15006,
            vec![http_chain("8080", Some(8080), RouteSource::Inline(Arc::new(inbound_routes))), tls_chain],
            None,
        ),
    ];
    let mut snap = snapshot(clusters, listeners);
    snap.routes.insert("80".into(), Arc::new(routes));
    let proxy =
        start(snap, vec![named("virtualOutbound", 80), named("virtualInbound", 8080), named("virtualInbound", 8443)])
            .await;
    Mesh { proxy, failing_hits, _down: down_socket }
}

const HOST: &str = "a.shop.svc.cluster.local";

impl Mesh {
    fn outbound(&self) -> SocketAddr {
        self.proxy.addrs[0]
    }
}

#[tokio::test]
async fn http1_routes_by_header_and_sets_envoy_headers() {
    let m = mesh().await;
    let c = client(false);
    let r = get(&c, m.outbound(), HOST, "/x", &[]).await;
    assert_eq!((r.status, r.upstream.as_str()), (200, "a"));
    assert_eq!(r.seen_proto, "http");
    assert_eq!(r.seen_request_id.len(), 36, "x-request-id {:?}", r.seen_request_id);
    assert_eq!(r.seen_host, HOST);
    let r = get(&c, m.outbound(), &format!("{HOST}:80"), "/x", &[("x-route", "b"), ("x-request-id", "mine")]).await;
    assert_eq!((r.status, r.upstream.as_str(), r.seen_request_id.as_str()), (200, "b", "mine"));
    let info = m.proxy.recorder.request_with(|i| i.cluster.as_deref() == Some("outbound|80||b")).await;
    assert_eq!(info.reporter, Reporter::Source);
    assert_eq!(info.response_code, 200);
    assert_eq!(info.cluster.as_deref().and_then(meshperf_proxy::proxy::destination_service), Some("b"));
    assert_eq!(info.protocol, RequestProtocol::Http);
    assert_eq!(info.response_bytes, 3); // "b:0"
}

#[tokio::test]
async fn weighted_split_follows_the_weights() {
    let m = mesh().await;
    let c = client(false);
    let mut seen: HashMap<String, usize> = HashMap::new();
    for _ in 0..200 {
        *seen.entry(get(&c, m.outbound(), HOST, "/split", &[]).await.upstream).or_default() += 1;
    }
    let b = seen.get("b").copied().unwrap_or(0);
    // Expect 150 of 200; 6 standard deviations is about 37.
    assert!((113..=187).contains(&b), "{seen:?}");
    assert_eq!(seen.values().sum::<usize>(), 200, "{seen:?}");
}

#[tokio::test]
async fn prefix_and_host_rewrite_reach_the_upstream() {
    let m = mesh().await;
    let r = get(&client(false), m.outbound(), HOST, "/old/thing?q=1", &[]).await;
    assert_eq!((r.status, r.seen_path.as_str(), r.seen_host.as_str()), (200, "/new/thing?q=1", "rewritten.example"));
}

#[tokio::test]
async fn h2c_client_through_the_proxy() {
    let m = mesh().await;
    let r = h2_send(m.outbound(), "GET", HOST, "/h2", &[("x-route", "b")], Bytes::new()).await;
    assert_eq!((r.status, r.upstream.as_str()), (200, "b"));
    // The authority of an h2 request becomes the HTTP/1.1 upstream's Host.
    assert_eq!(r.seen_host, HOST);
    let r = h2_send(m.outbound(), "POST", HOST, "/body", &[], Bytes::from_static(b"hello")).await;
    assert_eq!((r.status, r.body.as_str()), (200, "a:5"));
    let info = m.proxy.recorder.request_with(|i| i.method == "POST").await;
    assert_eq!((info.protocol, info.request_bytes), (RequestProtocol::Http2, 5));
}

// On a paused clock: the 200 ms route timeout passes as soon as nothing else can run.
#[tokio::test(start_paused = true)]
async fn error_responses_carry_envoys_codes_and_flags() {
    let m = mesh().await;
    let c = client(false);
    let cases = [
        ("unknown.host", "/", 404, "NR"),
        (HOST, "/empty", 503, "UH"),
        (HOST, "/down", 503, "UF"),
        (HOST, "/slow", 504, "UT"),
        (HOST, "/fault", 418, "FI"),
    ];
    for (host, path, status, flag) in cases {
        let r = get(&c, m.outbound(), host, path, &[]).await;
        assert_eq!(r.status, status, "{host}{path}");
        let info = m.proxy.recorder.request_with(|i| i.response_code == status).await;
        assert_eq!(info.response_flags, flag, "{host}{path}");
    }
    let r = get(&c, m.outbound(), HOST, "/direct", &[]).await;
    assert_eq!(r.status, 204);
}

#[tokio::test]
async fn retries_a_503_on_the_other_endpoint() {
    let m = mesh().await;
    let c = client(false);
    for _ in 0..6 {
        let r = get(&c, m.outbound(), HOST, "/flaky", &[]).await;
        assert_eq!((r.status, r.upstream.as_str()), (200, "a"));
    }
    assert!(m.failing_hits.load(Ordering::Relaxed) >= 3, "failing endpoint tried {:?}", m.failing_hits);
}

#[tokio::test]
async fn inbound_http_reaches_the_local_app_and_tls_chains_close() {
    let m = mesh().await;
    let r = get(&client(false), m.proxy.addrs[1], "anything", "/in", &[]).await;
    assert_eq!((r.status, r.upstream.as_str()), (200, "app"));
    let info = m.proxy.recorder.request_with(|i| i.reporter == Reporter::Destination).await;
    assert_eq!(info.cluster.as_deref(), Some("inbound|8080||"));
    // The 8443 chain wants TLS, which this build does not terminate: closed.
    let out = tcp_roundtrip(m.proxy.addrs[2], b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(out.map_or(true, |b| b.is_empty()));
}

#[tokio::test]
async fn malformed_and_oversized_requests() {
    let m = mesh().await;
    let out = tcp_roundtrip(m.outbound(), b"NOT HTTP AT ALL\r\n\r\n").await.unwrap();
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 400"), "{}", String::from_utf8_lossy(&out));
    let big = format!("GET / HTTP/1.1\r\nhost: {HOST}\r\nx-big: {}\r\n\r\n", "x".repeat(100 * 1024));
    let out = tcp_roundtrip(m.outbound(), big.as_bytes()).await.unwrap_or_default();
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 431"), "{}", String::from_utf8_lossy(&out));
    // The proxy still serves.
    assert_eq!(get(&client(false), m.outbound(), HOST, "/", &[]).await.status, 200);
}
