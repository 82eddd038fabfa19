//! Route selection, the per-request cost of the router (see README.md):
//! virtual host by authority, first matching route, weighted cluster pick.
//! Configs are built here in the shapes the control plane sends.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use hyper::{HeaderMap, Method};
use meshperf_proxy::proxy::route::{RequestHead, pick_cluster, select_route, select_virtual_host};
use meshperf_proxy::state::*;
use regex::Regex;

fn route(path: PathMatch, headers: Vec<HeaderMatch>, cluster: &str) -> Route {
    Route {
        name: String::new(),
        matcher: RouteMatch { path, case_sensitive: true, headers },
        action: RouteAction::Forward(Forward {
            target: ClusterTarget::Cluster(cluster.into()),
            timeout: None,
            retry: None,
            prefix_rewrite: None,
            host_rewrite: None,
            terminate_connect: false,
        }),
        fault: None,
    }
}

fn header(name: &str, value: HeaderValueMatch) -> HeaderMatch {
    HeaderMatch { name: name.into(), value, invert: false, ignore_case: false }
}

/// Envoy's safe_regex matches the whole path; the state module anchors it so.
fn anchored(re: &str) -> Regex {
    Regex::new(&format!("^(?:{re})$")).expect("bench regex")
}

/// The domains pilot lists for a service: the FQDN and its short forms, each
/// with and without the port, and the VIP.
fn istio_domains(name: &str, ns: &str, port: u16, vip: &str) -> Vec<String> {
    let fqdn = format!("{name}.{ns}.svc.cluster.local");
    let forms = [fqdn, format!("{name}.{ns}.svc"), format!("{name}.{ns}"), name.to_string(), vip.to_string()];
    forms.into_iter().flat_map(|d| [format!("{d}:{port}"), d]).collect()
}

fn istio_vhost(name: &str, ns: &str, port: u16, vip: &str) -> VirtualHost {
    let cluster = format!("outbound|{port}||{name}.{ns}.svc.cluster.local");
    VirtualHost {
        name: format!("{name}.{ns}.svc.cluster.local:{port}"),
        domains: istio_domains(name, ns, port, vip),
        routes: vec![route(PathMatch::Prefix("/".into()), vec![], &cluster)],
    }
}

fn allow_any() -> VirtualHost {
    VirtualHost {
        name: "allow_any".into(),
        domains: vec!["*".into()],
        routes: vec![route(PathMatch::Prefix("/".into()), vec![], "PassthroughCluster")],
    }
}

/// Route config "80" of a bookinfo-sized mesh: six services and allow_any.
fn istio_config() -> RouteConfig {
    let services = ["productpage", "details", "reviews", "ratings", "cart", "ledger"];
    let mut virtual_hosts: Vec<VirtualHost> = services
        .iter()
        .enumerate()
        .map(|(i, s)| istio_vhost(s, "default", 80, &format!("10.96.0.{}", i + 10)))
        .collect();
    virtual_hosts.push(allow_any());
    RouteConfig { name: "80".into(), virtual_hosts }
}

/// 100 virtual hosts × 10 routes: exact, prefix, path-separated and regex
/// paths, header matches (value, method, presence, range), and a catch-all.
fn large_config() -> RouteConfig {
    let mut virtual_hosts: Vec<VirtualHost> = (0..100)
        .map(|i| {
            let (name, ns) = (format!("svc-{i}"), format!("ns-{}", i % 10));
            let mut vh = istio_vhost(&name, &ns, 8080, &format!("10.96.{}.{}", i / 100, i % 100));
            let c = |v: &str| format!("outbound|8080|{v}|{name}.{ns}.svc.cluster.local");
            vh.routes = vec![
                route(PathMatch::Exact("/healthz".into()), vec![], &c("")),
                route(
                    PathMatch::Prefix("/api/v1/users".into()),
                    vec![header("x-user-group", HeaderValueMatch::Exact("beta".into()))],
                    &c("beta"),
                ),
                route(PathMatch::Prefix("/api/v1/users".into()), vec![], &c("v1")),
                route(PathMatch::Regex(anchored("/api/v1/items/[0-9]+")), vec![], &c("v1")),
                route(
                    PathMatch::Prefix("/api/v2".into()),
                    vec![header(":method", HeaderValueMatch::Exact("POST".into()))],
                    &c("v2"),
                ),
                route(PathMatch::PathSeparatedPrefix("/static".into()), vec![], &c("static")),
                route(
                    PathMatch::Prefix("/admin".into()),
                    vec![
                        header("x-admin", HeaderValueMatch::Present(true)),
                        header("x-admin-token", HeaderValueMatch::Regex(anchored("[a-f0-9]{32}"))),
                    ],
                    &c("admin"),
                ),
                route(
                    PathMatch::Exact("/login".into()),
                    vec![header("x-version", HeaderValueMatch::Range { start: 2, end: 5 })],
                    &c("v2"),
                ),
                route(PathMatch::Regex(anchored("/reports/[a-z]+/[0-9]{4}")), vec![], &c("reports")),
                route(PathMatch::Prefix("/".into()), vec![], &c("")),
            ];
            vh
        })
        .collect();
    virtual_hosts.push(allow_any());
    RouteConfig { name: "8080".into(), virtual_hosts }
}

/// Suffix (`*.example.com`) and prefix (`api.*`) wildcards of several lengths.
fn wildcard_config() -> RouteConfig {
    let vh = |name: &str, domains: &[&str]| VirtualHost {
        name: name.into(),
        domains: domains.iter().map(|d| d.to_string()).collect(),
        routes: vec![route(PathMatch::Prefix("/".into()), vec![], name)],
    };
    let mut virtual_hosts: Vec<VirtualHost> =
        (0..20).map(|i| vh(&format!("exact-{i}"), &[&format!("host-{i}.example.org")])).collect();
    virtual_hosts.extend([
        vh("suffix", &["*.example.com"]),
        vh("longer-suffix", &["*.api.example.com"]),
        vh("dash-suffix", &["*-svc"]),
        vh("prefix", &["api.*"]),
        allow_any(),
    ]);
    RouteConfig { name: "wild".into(), virtual_hosts }
}

fn typical_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in [
        ("user-agent", "fortio.org/fortio-1.69.0"),
        ("accept", "*/*"),
        ("accept-encoding", "gzip"),
        ("x-user-group", "stable"),
        ("x-version", "3"),
        ("x-b3-traceid", "80f198ee56343ba864fe8b2a57d3eff7"),
    ] {
        h.insert(k, v.parse().expect("header value"));
    }
    h
}

fn bench_select(c: &mut Criterion, group: &str, rc: &RouteConfig, cases: &[(&str, &str, &str, Method)]) {
    let headers = typical_headers();
    let mut g = c.benchmark_group(group);
    for (name, authority, path, method) in cases {
        let req = RequestHead { authority, path, method, headers: &headers, scheme: "http" };
        // Each case must route where the name says: a bench of a 404 by mistake measures nothing useful.
        assert!(select_route(rc, &req).is_some(), "{group}/{name} does not route");
        g.bench_function(*name, |b| b.iter(|| select_route(black_box(rc), black_box(&req)).is_some()));
    }
    g.finish();
}

fn routing(c: &mut Criterion) {
    let istio = istio_config();
    bench_select(
        c,
        "select_route/istio",
        &istio,
        &[
            ("fqdn_port", "reviews.default.svc.cluster.local:80", "/reviews/0", Method::GET),
            ("short_name", "ratings", "/ratings/0", Method::GET),
            ("vip", "10.96.0.15:80", "/", Method::GET),
            ("allow_any", "www.example.com", "/", Method::GET),
        ],
    );

    let large = large_config();
    bench_select(
        c,
        "select_route/large",
        &large,
        &[
            ("first_vhost_exact", "svc-0.ns-0.svc.cluster.local:8080", "/healthz", Method::GET),
            ("mid_vhost_regex", "svc-50.ns-0:8080", "/api/v1/items/12345", Method::GET),
            ("mid_vhost_header", "svc-50", "/api/v1/users/42?x=1", Method::GET),
            ("last_vhost_catch_all", "svc-99.ns-9.svc.cluster.local:8080", "/index.html", Method::GET),
            ("unknown_host", "Other.Example.COM", "/", Method::GET),
        ],
    );

    let wild = wildcard_config();
    let mut g = c.benchmark_group("select_virtual_host/wildcards");
    for (name, authority) in [
        ("exact", "host-19.example.org"),
        ("longest_suffix", "v1.api.example.com:443"),
        ("prefix", "api.internal"),
        ("uppercase_suffix", "WWW.Example.Com"),
        ("star", "nothing.local"),
    ] {
        assert!(select_virtual_host(&wild, authority).is_some(), "{name} has no virtual host");
        g.bench_function(name, |b| b.iter(|| select_virtual_host(black_box(&wild), black_box(authority)).is_some()));
    }
    g.finish();

    let weighted = ClusterTarget::Weighted(vec![
        WeightedCluster { name: "outbound|80|v1|reviews.default.svc.cluster.local".into(), weight: 80 },
        WeightedCluster { name: "outbound|80|v2|reviews.default.svc.cluster.local".into(), weight: 15 },
        WeightedCluster { name: "outbound|80|v3|reviews.default.svc.cluster.local".into(), weight: 5 },
    ]);
    c.bench_function("pick_cluster/weighted_3", |b| b.iter(|| pick_cluster(black_box(&weighted)).len()));
}

fn config() -> Criterion {
    // The machine is shared (2 cores): short runs, enough samples for a median.
    Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(50)
}

criterion_group! { name = benches; config = config(); targets = routing }
criterion_main!(benches);
