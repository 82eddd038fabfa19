//! Metrics tests: exact exposition lines, Istio's unknowns, exact totals under
//! concurrent recording, identities from config.

use std::time::Duration;

use clap::Parser;

use super::*;
use crate::config::Cli;

fn cart() -> Peer {
    Peer::new("cart-v1", "shop", "spiffe://cluster.local/ns/shop/sa/cart")
}

fn request() -> RequestRecord {
    RequestRecord {
        reporter: Reporter::Source,
        source: cart(),
        destination: Peer::new("web-v1", "shop", "spiffe://cluster.local/ns/shop/sa/web"),
        destination_service: ServiceName::from_cluster("outbound|80||web.shop.svc.cluster.local"),
        protocol: Protocol::Http,
        response_code: 200,
        response_flags: ResponseFlags::NONE,
        security: SecurityPolicy::Unknown,
        duration: Duration::from_micros(7_400),
        request_bytes: 120,
        response_bytes: 1100,
    }
}

fn tcp() -> TcpRecord {
    TcpRecord {
        reporter: Reporter::Destination,
        source: Peer::from_principal("spiffe://cluster.local/ns/front/sa/gw"),
        destination: cart(),
        destination_service: ServiceName::from_host("db.data.svc.cluster.local"),
        response_flags: ResponseFlags::NONE,
        security: SecurityPolicy::MutualTls,
        ztunnel: None,
    }
}

fn encode(t: &Telemetry) -> String {
    let mut out = String::new();
    t.encode(&mut out);
    out
}

fn telemetry() -> Telemetry {
    Telemetry::new(AccessLogOptions::default()).expect("telemetry")
}

const REQ_LABELS: &str = "reporter=\"source\",source_workload=\"cart-v1\",source_workload_namespace=\"shop\",\
source_principal=\"spiffe://cluster.local/ns/shop/sa/cart\",destination_workload=\"web-v1\",\
destination_workload_namespace=\"shop\",destination_principal=\"spiffe://cluster.local/ns/shop/sa/web\",\
destination_service=\"web.shop.svc.cluster.local\",destination_service_name=\"web\",\
destination_service_namespace=\"shop\",request_protocol=\"http\",response_code=\"200\",response_flags=\"-\",\
connection_security_policy=\"unknown\"";

const TCP_LABELS: &str = "reporter=\"destination\",source_workload=\"unknown\",source_workload_namespace=\"front\",\
source_principal=\"spiffe://cluster.local/ns/front/sa/gw\",destination_workload=\"cart-v1\",\
destination_workload_namespace=\"shop\",destination_principal=\"spiffe://cluster.local/ns/shop/sa/cart\",\
destination_service=\"db.data.svc.cluster.local\",destination_service_name=\"db\",\
destination_service_namespace=\"data\",request_protocol=\"tcp\",response_flags=\"-\",\
connection_security_policy=\"mutual_tls\"";

#[test]
fn request_and_tcp_encode_to_istio_lines() {
    let t = telemetry();
    t.record_request(&request());
    t.record_request(&RequestRecord { duration: Duration::from_millis(30), ..request() });
    t.tcp_opened(&tcp());
    t.tcp_bytes(&tcp(), 100, 40);
    t.tcp_closed(&tcp(), 5, 2);
    let out = encode(&t);
    let lines: Vec<&str> = out.lines().collect();
    let has = |want: String| assert!(lines.contains(&want.as_str()), "missing {want}\nin\n{out}");

    has("# TYPE istio_requests counter".into());
    has(format!("istio_requests_total{{{REQ_LABELS}}} 2"));
    has("# TYPE istio_request_duration_milliseconds histogram".into());
    // 7.4 ms is recorded as 7 (Envoy's whole milliseconds), 30 ms as 30.
    has(format!("istio_request_duration_milliseconds_sum{{{REQ_LABELS}}} 37.0"));
    has(format!("istio_request_duration_milliseconds_count{{{REQ_LABELS}}} 2"));
    has(format!("istio_request_duration_milliseconds_bucket{{le=\"5.0\",{REQ_LABELS}}} 0"));
    has(format!("istio_request_duration_milliseconds_bucket{{le=\"10.0\",{REQ_LABELS}}} 1"));
    has(format!("istio_request_duration_milliseconds_bucket{{le=\"25.0\",{REQ_LABELS}}} 1"));
    has(format!("istio_request_duration_milliseconds_bucket{{le=\"50.0\",{REQ_LABELS}}} 2"));
    has(format!("istio_request_duration_milliseconds_bucket{{le=\"+Inf\",{REQ_LABELS}}} 2"));
    has(format!("istio_request_bytes_sum{{{REQ_LABELS}}} 240.0"));
    has(format!("istio_request_bytes_bucket{{le=\"100.0\",{REQ_LABELS}}} 0"));
    has(format!("istio_request_bytes_bucket{{le=\"250.0\",{REQ_LABELS}}} 2"));
    has(format!("istio_response_bytes_count{{{REQ_LABELS}}} 2"));
    has(format!("istio_response_bytes_bucket{{le=\"1000.0\",{REQ_LABELS}}} 0"));
    has(format!("istio_response_bytes_bucket{{le=\"2500.0\",{REQ_LABELS}}} 2"));

    has("# TYPE istio_tcp_sent_bytes counter".into());
    has(format!("istio_tcp_sent_bytes_total{{{TCP_LABELS}}} 105"));
    has(format!("istio_tcp_received_bytes_total{{{TCP_LABELS}}} 42"));
    has(format!("istio_tcp_connections_opened_total{{{TCP_LABELS}}} 1"));
    has(format!("istio_tcp_connections_closed_total{{{TCP_LABELS}}} 1"));
    assert_eq!(lines.last(), Some(&"# EOF"));

    // The three histograms all carry Envoy's default bounds, in order.
    for name in ["istio_request_duration_milliseconds", "istio_request_bytes", "istio_response_bytes"] {
        let prefix = format!("{name}_bucket{{le=\"");
        let les: Vec<&str> =
            lines.iter().filter_map(|l| l.strip_prefix(prefix.as_str())).filter_map(|l| l.split('"').next()).collect();
        let want: Vec<String> = BUCKETS.iter().map(|b| format!("{b:?}")).chain(["+Inf".to_string()]).collect();
        assert_eq!(les, want, "{name}");
    }
    assert_eq!(BUCKETS.len(), 19);
}

#[test]
fn families_appear_with_their_first_series() {
    let out = encode(&telemetry());
    assert!(!out.contains("istio_"), "{out}");
    assert!(out.contains("meshperf_proxy_access_log_dropped_total 0"), "{out}");
}

#[test]
fn unknown_values_render_unknown() {
    let t = telemetry();
    let r = RequestRecord {
        reporter: Reporter::Destination,
        source: Peer::new("", "", ""),
        destination: Peer::unknown(),
        destination_service: ServiceName::from_cluster("inbound|8080||"),
        response_code: 503,
        response_flags: ResponseFlags::NO_HEALTHY_UPSTREAM | ResponseFlags::UPSTREAM_RETRY_LIMIT_EXCEEDED,
        security: SecurityPolicy::None,
        ..request()
    };
    // Fields are public: an empty string set directly is also unknown.
    let r = RequestRecord { destination: Peer { workload: "".into(), ..Peer::unknown() }, ..r };
    t.record_request(&r);
    let out = encode(&t);
    let line = out.lines().find(|l| l.starts_with("istio_requests_total{")).expect("a request line");
    for label in [
        "source_workload",
        "source_workload_namespace",
        "source_principal",
        "destination_workload",
        "destination_workload_namespace",
        "destination_principal",
        "destination_service",
        "destination_service_name",
        "destination_service_namespace",
    ] {
        assert!(line.contains(&format!(",{label}=\"unknown\"")), "{label} in {line}");
    }
    assert!(line.contains("response_code=\"503\",response_flags=\"UH,URX\",connection_security_policy=\"none\""));
}

#[test]
fn concurrent_recording_gives_exact_totals() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 20_000;
    let t = telemetry();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for i in 0..PER_THREAD {
                    let code = [200, 404, 503][(i % 3) as usize];
                    t.record_request(&RequestRecord { response_code: code, ..request() });
                    t.tcp_opened(&tcp());
                    t.tcp_closed(&tcp(), 3, 1);
                }
            });
        }
    });
    let out = encode(&t);
    let value = |prefix: &str, contains: &str| -> u64 {
        out.lines()
            .filter(|l| l.starts_with(prefix) && l.contains(contains))
            .map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<u64>().ok()).expect("a number"))
            .sum()
    };
    let total = THREADS * PER_THREAD;
    let per_code = |c: u64| THREADS * (0..PER_THREAD).filter(|i| i % 3 == c).count() as u64;
    assert_eq!(value("istio_requests_total{", "response_code=\"200\""), per_code(0));
    assert_eq!(value("istio_requests_total{", "response_code=\"404\""), per_code(1));
    assert_eq!(value("istio_requests_total{", "response_code=\"503\""), per_code(2));
    assert_eq!(value("istio_requests_total{", ""), total);
    assert_eq!(value("istio_response_bytes_count{", ""), total);
    assert_eq!(value("istio_response_bytes_bucket{le=\"2500.0\"", ""), total);
    // One line per label set, however many shards recorded it.
    assert_eq!(out.lines().filter(|l| l.starts_with("istio_requests_total{")).count(), 3);
    assert_eq!(value("istio_tcp_connections_opened_total{", ""), total);
    assert_eq!(value("istio_tcp_connections_closed_total{", ""), total);
    assert_eq!(value("istio_tcp_sent_bytes_total{", ""), 3 * total);
    assert_eq!(value("istio_tcp_received_bytes_total{", ""), total);
}

#[test]
fn local_peer_from_config() {
    let config = Cli::try_parse_from([
        "meshperf-proxy",
        "--pod-name=cart-7d9f-abcde",
        "--workload-name=cart-v1",
        "--pod-namespace=shop",
        "--service-account=cart",
    ])
    .expect("flags")
    .into_config()
    .expect("config");
    let p = Peer::local(&config);
    assert_eq!((&*p.workload, &*p.namespace), ("cart-v1", "shop"));
    assert_eq!(&*p.principal, "spiffe://cluster.local/ns/shop/sa/cart");
    assert_eq!(&*Peer::local_in(&config, "example.org").principal, "spiffe://example.org/ns/shop/sa/cart");
}

#[test]
fn names_from_principals_hosts_and_clusters() {
    let p = Peer::from_principal("spiffe://cluster.local/ns/front/sa/gw");
    assert_eq!((&*p.workload, &*p.namespace), ("unknown", "front"));
    assert_eq!(&*Peer::from_principal("not-spiffe").namespace, "unknown");

    let s = ServiceName::from_cluster("outbound|9080|v1|reviews.bookinfo.svc.cluster.local");
    assert_eq!((&*s.host, &*s.name, &*s.namespace), ("reviews.bookinfo.svc.cluster.local", "reviews", "bookinfo"));
    let s = ServiceName::from_host("api.example.com");
    assert_eq!((&*s.host, &*s.name, &*s.namespace), ("api.example.com", "api.example.com", "unknown"));
    let s = ServiceName::from_cluster("PassthroughCluster");
    assert_eq!((&*s.host, &*s.name), ("unknown", "PassthroughCluster"));
    for bad in ["", "|||", "outbound|80", "weird"] {
        assert_eq!(ServiceName::from_cluster(bad), ServiceName::unknown(), "{bad:?}");
    }
}

#[test]
fn response_flags_render_like_envoy() {
    assert_eq!(ResponseFlags::NONE.to_string(), "-");
    assert_eq!(ResponseFlags::FAULT_INJECTED.to_string(), "FI");
    let f = ResponseFlags::UPSTREAM_RETRY_LIMIT_EXCEEDED | ResponseFlags::UPSTREAM_CONNECTION_FAILURE;
    assert_eq!(f.to_string(), "UF,URX", "Envoy's order, not the order set");
    assert!(f.contains(ResponseFlags::UPSTREAM_CONNECTION_FAILURE) && !f.contains(ResponseFlags::NO_ROUTE_FOUND));
}

#[test]
fn xds_counters_join_the_exposition() {
    let xds = std::sync::Arc::new(crate::xds::XdsMetrics::default());
    xds.ack(crate::xds::ResourceType::Cluster);
    xds.set_connected(true);
    let mut t = telemetry();
    t.register_collector(Box::new(XdsCollector(xds)));
    let out = encode(&t);
    for want in [
        "meshperf_proxy_xds_acks_total{type=\"cds\"} 1",
        "meshperf_proxy_xds_nacks_total{type=\"lds\"} 0",
        "meshperf_proxy_xds_reconnects_total 0",
        "meshperf_proxy_xds_connected 1",
    ] {
        assert!(out.lines().any(|l| l == want), "missing {want} in\n{out}");
    }
}
