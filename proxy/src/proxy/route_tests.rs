use hyper::header::HeaderValue;

use super::*;
use crate::state::{RouteAction, RouteMatch, WeightedCluster};

fn route(name: &str, path: PathMatch, headers: Vec<HeaderMatch>) -> Route {
    Route {
        name: name.into(),
        matcher: RouteMatch { path, case_sensitive: true, headers },
        action: RouteAction::DirectResponse { status: 200, body: None },
        fault: None,
    }
}

fn vh(name: &str, domains: &[&str], routes: Vec<Route>) -> VirtualHost {
    VirtualHost { name: name.into(), domains: domains.iter().map(|d| d.to_string()).collect(), routes }
}

fn catch_all(name: &str) -> Route {
    route(name, PathMatch::Prefix("/".into()), vec![])
}

fn config() -> RouteConfig {
    RouteConfig {
        name: "80".into(),
        virtual_hosts: vec![
            vh(
                "exact",
                &["reviews.shop.svc.cluster.local", "reviews.shop.svc.cluster.local:80"],
                vec![catch_all("exact")],
            ),
            vh("suffix-short", &["*.com"], vec![catch_all("suffix-short")]),
            vh("suffix-long", &["*.example.com"], vec![catch_all("suffix-long")]),
            vh("prefix", &["api.*"], vec![catch_all("prefix")]),
            vh("default", &["*"], vec![catch_all("default")]),
        ],
    }
}

fn head<'a>(authority: &'a str, path: &'a str, method: &'a Method, headers: &'a HeaderMap) -> RequestHead<'a> {
    RequestHead { authority, path, method, headers, scheme: "http" }
}

fn vh_for(rc: &RouteConfig, authority: &str) -> Option<String> {
    select_virtual_host(rc, authority).map(|v| v.name.clone())
}

#[test]
fn virtual_host_order_is_envoys() {
    let rc = config();
    assert_eq!(vh_for(&rc, "reviews.shop.svc.cluster.local").as_deref(), Some("exact"));
    assert_eq!(vh_for(&rc, "Reviews.Shop.svc.cluster.local:80").as_deref(), Some("exact"));
    // A port nothing names falls back to the host without it.
    assert_eq!(vh_for(&rc, "reviews.shop.svc.cluster.local:9080").as_deref(), Some("exact"));
    assert_eq!(vh_for(&rc, "a.example.com").as_deref(), Some("suffix-long"));
    assert_eq!(vh_for(&rc, "a.other.com").as_deref(), Some("suffix-short"));
    // Suffix wildcards beat prefix ones.
    assert_eq!(vh_for(&rc, "api.example.com").as_deref(), Some("suffix-long"));
    assert_eq!(vh_for(&rc, "api.internal").as_deref(), Some("prefix"));
    // The wildcard must cover at least one character.
    assert_eq!(vh_for(&rc, "example.com").as_deref(), Some("suffix-short"));
    assert_eq!(vh_for(&rc, "10.0.0.1:8080").as_deref(), Some("default"));
    assert_eq!(vh_for(&rc, "").as_deref(), Some("default"));
    assert_eq!(vh_for(&rc, "[::1]:80").as_deref(), Some("default"));
}

#[test]
fn no_default_host_is_no_route() {
    let rc = RouteConfig { name: "x".into(), virtual_hosts: vec![vh("one", &["one"], vec![catch_all("one")])] };
    let (m, h) = (Method::GET, HeaderMap::new());
    assert!(select_route(&rc, &head("two", "/", &m, &h)).is_none());
    assert!(select_route(&rc, &head("one:80", "/", &m, &h)).is_some());
}

#[test]
fn ports_are_stripped_only_when_they_are_ports() {
    assert_eq!(strip_port("a:80"), Some("a"));
    assert_eq!(strip_port("[::1]:80"), Some("[::1]"));
    assert_eq!(strip_port("::1"), None);
    assert_eq!(strip_port("a:"), None);
    assert_eq!(strip_port("a:b"), None);
}

fn routes(rs: Vec<Route>) -> RouteConfig {
    RouteConfig { name: "r".into(), virtual_hosts: vec![vh("all", &["*"], rs)] }
}

fn pick(rc: &RouteConfig, path: &str, method: Method, headers: &[(&'static str, &'static str)]) -> Option<String> {
    let mut h = HeaderMap::new();
    for (k, v) in headers {
        h.append(*k, HeaderValue::from_static(v));
    }
    select_route(rc, &head("host", path, &method, &h)).map(|r| r.name.clone())
}

#[test]
fn paths_first_match_wins() {
    let re = regex::Regex::new("^(?:/items/[0-9]+)$").unwrap();
    let mut insensitive = route("insensitive", PathMatch::Exact("/CaSe".into()), vec![]);
    insensitive.matcher.case_sensitive = false;
    let rc = routes(vec![
        route("exact", PathMatch::Exact("/exact".into()), vec![]),
        route("regex", PathMatch::Regex(re), vec![]),
        route("sep", PathMatch::PathSeparatedPrefix("/api".into()), vec![]),
        insensitive,
        route("prefix", PathMatch::Prefix("/p".into()), vec![]),
    ]);
    assert_eq!(pick(&rc, "/exact", Method::GET, &[]).as_deref(), Some("exact"));
    assert_eq!(pick(&rc, "/exact?x=1", Method::GET, &[]).as_deref(), Some("exact"));
    assert_eq!(pick(&rc, "/exact/more", Method::GET, &[]), None);
    assert_eq!(pick(&rc, "/items/42", Method::GET, &[]).as_deref(), Some("regex"));
    assert_eq!(pick(&rc, "/items/42x", Method::GET, &[]), None);
    assert_eq!(pick(&rc, "/api", Method::GET, &[]).as_deref(), Some("sep"));
    assert_eq!(pick(&rc, "/api/v1", Method::GET, &[]).as_deref(), Some("sep"));
    assert_eq!(pick(&rc, "/apiv1", Method::GET, &[]), None);
    assert_eq!(pick(&rc, "/case", Method::GET, &[]).as_deref(), Some("insensitive"));
    assert_eq!(pick(&rc, "/pizza", Method::GET, &[]).as_deref(), Some("prefix"));
    assert_eq!(pick(&rc, "/Pizza", Method::GET, &[]), None);
}

fn hm(name: &str, value: HeaderValueMatch, invert: bool) -> HeaderMatch {
    HeaderMatch { name: name.into(), value, invert, ignore_case: false }
}

#[test]
fn headers_and_method() {
    let mut ic = hm("x-user", HeaderValueMatch::Exact("jason".into()), false);
    ic.ignore_case = true;
    let rc = routes(vec![
        route(
            "post",
            PathMatch::Prefix("/".into()),
            vec![hm(":method", HeaderValueMatch::Exact("POST".into()), false)],
        ),
        route("jason", PathMatch::Prefix("/".into()), vec![ic]),
        route(
            "range",
            PathMatch::Prefix("/".into()),
            vec![hm("x-n", HeaderValueMatch::Range { start: 1, end: 10 }, false)],
        ),
        route(
            "not-canary",
            PathMatch::Prefix("/".into()),
            vec![
                hm("x-canary", HeaderValueMatch::Present(true), true),
                hm("x-v", HeaderValueMatch::Prefix("v".into()), false),
            ],
        ),
        route(
            "joined",
            PathMatch::Prefix("/".into()),
            vec![hm("x-multi", HeaderValueMatch::Exact("a,b".into()), false)],
        ),
        route("any", PathMatch::Prefix("/".into()), vec![]),
    ]);
    assert_eq!(pick(&rc, "/", Method::POST, &[]).as_deref(), Some("post"));
    assert_eq!(pick(&rc, "/", Method::GET, &[("x-user", "JASON")]).as_deref(), Some("jason"));
    assert_eq!(pick(&rc, "/", Method::GET, &[("x-n", "9")]).as_deref(), Some("range"));
    assert_eq!(pick(&rc, "/", Method::GET, &[("x-n", "10")]).as_deref(), Some("any"));
    assert_eq!(pick(&rc, "/", Method::GET, &[("x-v", "v2")]).as_deref(), Some("not-canary"));
    assert_eq!(pick(&rc, "/", Method::GET, &[("x-v", "v2"), ("x-canary", "1")]).as_deref(), Some("any"));
    assert_eq!(pick(&rc, "/", Method::GET, &[("x-multi", "a"), ("x-multi", "b")]).as_deref(), Some("joined"));
}

#[test]
fn weighted_clusters_split_by_weight() {
    let target = ClusterTarget::Weighted(vec![
        WeightedCluster { name: "a".into(), weight: 1 },
        WeightedCluster { name: "b".into(), weight: 3 },
        WeightedCluster { name: "never".into(), weight: 0 },
    ]);
    let n = 20_000;
    let a = (0..n).filter(|_| pick_cluster(&target) == "a").count();
    // Expect 5000 (1 in 4); 6 standard deviations is about 370.
    assert!((4_600..5_400).contains(&a), "a picked {a} times of {n}");
    assert!((0..n).all(|_| pick_cluster(&target) != "never"));
    assert_eq!(pick_cluster(&ClusterTarget::Cluster("c".into())), "c");
}

#[test]
fn prefix_len_for_rewrite() {
    assert_eq!(matched_prefix_len(&PathMatch::Prefix("/api".into()), "/api/v1"), Some(4));
    assert_eq!(matched_prefix_len(&PathMatch::Exact("/a".into()), "/a?x"), Some(2));
}
