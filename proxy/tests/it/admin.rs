//! The admin endpoint in-process: readiness follows the xDS client and the
//! drain, the dump is the converted state by Envoy's type names, stats carry
//! the client's counters, and POST /quitquitquit asks for the drain; the
//! node proxy's readiness and stats ports refuse a forged Host as the admin
//! does. Then the real binary, whose allocator's counts its stats carry, and
//! which shrugs off what a web page can send it.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use meshperf_proxy::admin::{Admin, AdminServer};
use meshperf_proxy::config::Cli;
use meshperf_proxy::proxy::{ClusterStat, drain};
use meshperf_proxy::xds::ResourceType;
use tokio::sync::watch;

use crate::support::ads::{self, AdsServer, sync, web_mesh};
use crate::support::envoy::{self, any, static_cluster};
use crate::support::process::{TestDir, free_loopback_port, start_proxy, wait_ready};
use crate::support::{RunningClient, WAIT, admin_post, eventually, get_on, h1_connect, http, http_with, upstream};

#[tokio::test]
async fn ready_dump_stats_and_quit() {
    let mut ads = AdsServer::start().await;
    let config = Arc::new(
        Cli::try_parse_from(["meshperf-proxy", "--admin-address=127.0.0.1:0"]).unwrap().into_config().unwrap(),
    );
    let mut client = RunningClient::start(ads.addr, config.node.clone(), true);
    let (quit, _) = watch::channel(false);
    let (stop, stopped) = watch::channel(false);
    let (drain, drain_watch) = drain::channel();
    let admin = Admin {
        config: config.clone(),
        state: client.state.clone(),
        ready: client.ready.clone(),
        xds_metrics: client.metrics.clone(),
        telemetry: None,
        log: None,
        cluster_stats: Some(Arc::new(|| {
            let stat = |cluster: &str, stat, value| ClusterStat { cluster: cluster.into(), stat, value };
            vec![
                stat("outbound|80||web.ns.svc.cluster.local", "upstream_cx_overflow", 3),
                stat("outbound|80||web.ns.svc.cluster.local", "outlier_detection.ejections_active", 1),
                stat("inbound|8080||", "upstream_cx_overflow", 0),
            ]
        })),
        quit: quit.clone(),
        drain: drain_watch,
        workloads: None,
    };
    let server = AdminServer::bind(config.admin_address, admin).await.unwrap();
    let addr = server.local_addr().unwrap();
    let admin_task = tokio::spawn(server.run(stopped));

    assert_eq!(http(addr, "GET", "/ready").await.0, 503, "not ready before any config");
    assert_eq!(http(addr, "GET", "/healthz").await.0, 200);

    let mut stream = ads.next_delta().await;
    sync(&mut stream, web_mesh()).await;
    client.ready().await;
    assert_eq!(http(addr, "GET", "/ready").await, (200, "LIVE\n".to_string()));
    assert_eq!(http(addr, "GET", "/healthz/ready").await.0, 200, "Istio's readiness path");

    let (status, body) = http(addr, "GET", "/config_dump").await;
    assert_eq!(status, 200);
    let dump: serde_json::Value = serde_json::from_str(&body).expect("config_dump is JSON");
    assert_eq!(dump["clusters"]["web"]["type"], "EDS");
    assert_eq!(dump["endpoints"]["web"]["endpoints"][0]["address"]["socket"], "10.1.0.1:8080");
    assert_eq!(dump["listeners"]["0.0.0.0_80"]["filter_chains"][0]["handler"]["http"]["routes"]["rds"], "80");
    assert_eq!(dump["routes"]["80"]["virtual_hosts"][0]["routes"][0]["action"]["forward"]["timeout"], "15s");
    assert!(dump["secrets"].as_object().is_some_and(|s| s.is_empty()));
    assert_eq!(dump["bootstrap"]["node"]["id"], config.node.id.as_str());

    let (_, stats) = http(addr, "GET", "/stats/prometheus").await;
    assert!(stats.contains("meshperf_proxy_xds_acks_total{type=\"cds\"} 1"), "{stats}");
    assert!(stats.contains("meshperf_proxy_xds_connected 1"), "{stats}");
    // The data path's cluster stats, as Envoy's Prometheus exporter names them, one family each.
    let overflow = "# TYPE envoy_cluster_upstream_cx_overflow gauge\n\
        envoy_cluster_upstream_cx_overflow{cluster_name=\"outbound|80||web.ns.svc.cluster.local\"} 3\n\
        envoy_cluster_upstream_cx_overflow{cluster_name=\"inbound|8080||\"} 0\n";
    assert!(stats.contains(overflow), "{stats}");
    assert!(stats.contains(
        "envoy_cluster_outlier_detection_ejections_active{cluster_name=\"outbound|80||web.ns.svc.cluster.local\"} 1"
    ));
    let (_, plain) = http(addr, "GET", "/stats").await;
    assert!(plain.starts_with("cluster.outbound|80||web.ns.svc.cluster.local.upstream_cx_overflow: 3\n"), "{plain}");

    assert_eq!(http(addr, "GET", "/quitquitquit").await.0, 405, "mutations need POST");
    assert_eq!(admin_post(addr, "/logging?level=debug").await.0, 400, "no log control in this process");
    assert_eq!(http(addr, "POST", "/quitquitquit").await.0, 415, "a POST without Content-Type: application/json");
    assert!(!*quit.subscribe().borrow(), "a refused /quitquitquit asks for nothing");
    assert_eq!(admin_post(addr, "/quitquitquit").await.0, 200);
    assert!(*quit.subscribe().borrow(), "/quitquitquit asks main to drain and exit");

    // Draining: still answering, no longer ready; alive all the same.
    let report = drain.drain(Duration::from_secs(5)).await;
    assert_eq!(report.open_at_start, 0);
    assert_eq!(http(addr, "GET", "/ready").await, (503, "DRAINING\n".to_string()));
    assert_eq!(http(addr, "GET", "/healthz/ready").await.0, 503);
    assert_eq!(http(addr, "GET", "/healthz").await.0, 200);
    stop.send_replace(true);
    tokio::time::timeout(WAIT, admin_task).await.expect("admin stops").unwrap();
    client.stop().await;
}

/// The node proxy's readiness (15021) and stats (15020) ports are served by
/// the admin's code, path-limited: a page that rebinds a name to them reads
/// nothing either, while the kubelet and Prometheus, which ask by the pod's
/// IP, are answered.
#[tokio::test]
async fn the_node_proxy_ports_refuse_a_forged_host() {
    let config = Arc::new(
        Cli::try_parse_from(["meshperf-proxy", "--admin-allowed-hosts=stats.internal"]).unwrap().into_config().unwrap(),
    );
    let (_ready, readiness) = watch::channel(true);
    let (quit, _) = watch::channel(false);
    let (_drain, drain_watch) = drain::channel();
    let admin = Admin {
        config,
        state: Arc::new(meshperf_proxy::state::State::new()),
        ready: meshperf_proxy::xds::Readiness::new(readiness),
        xds_metrics: Default::default(),
        telemetry: None,
        log: None,
        cluster_stats: None,
        quit,
        drain: drain_watch,
        workloads: None,
    };
    let loopback = "127.0.0.1:0".parse().unwrap();
    let (stop, stopped) = watch::channel(false);
    const READINESS: &[&str] = &["/healthz/ready"];
    const STATS: &[&str] = &["/stats/prometheus"];
    for (only, other) in [(READINESS, STATS[0]), (STATS, READINESS[0])] {
        let path = only[0];
        let server = AdminServer::bind_only(loopback, admin.clone(), only).await.unwrap();
        let addr = server.local_addr().unwrap();
        tokio::spawn(server.run(stopped.clone()));
        assert_eq!(http(addr, "GET", path).await.0, 200, "{path} by IP");
        assert_eq!(http_with(addr, "GET", path, &[("Host", "stats.internal:15020")]).await.0, 200, "an allowed name");
        let (status, body) = http_with(addr, "GET", path, &[("Host", "rebound.evil.example")]).await;
        assert_eq!(status, 403, "{path} with a forged Host: {body}");
        assert!(body.contains("refused as DNS rebinding"), "{body}");
        assert_eq!(http(addr, "GET", other).await.0, 404, "only {path} is served here");
    }
    stop.send_replace(true);
}

/// One request a web page could make a browser send: what it is, where,
/// its headers (Host is the admin's address unless given), and the status
/// that refuses it.
struct PageRequest<'a> {
    what: &'a str,
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    refused_with: u16,
}

/// What a web page in a browser on the proxy's machine can send the real
/// binary's admin: a form or no-cors fetch to 127.0.0.1 (cross-site, then
/// as an older browser that sends only Origin, then with neither), a fetch
/// that sets its own Content-Type (which needs a preflight the admin never
/// approves, sent here anyway), and the requests of a page that rebound its
/// own name to 127.0.0.1. Each is refused with one line, and the proxy runs
/// on, not draining, its log level as it was; a client that is not a
/// browser (curl, the lab) still stops it.
#[tokio::test]
async fn the_binary_refuses_what_a_web_page_sends() {
    let server = AdsServer::start().await;
    let admin = free_loopback_port();
    let dir = TestDir::new("admin-browser");
    let mut process = start_proxy(server.addr, admin, "web-1", &["--capture-mode", "none"], &dir.join("proxy.log"));
    // The admin answers before the proxy has a config: no control plane is needed.
    eventually("the admin endpoint listens", WAIT, async || tokio::net::TcpStream::connect(admin).await.ok()).await;
    assert_eq!(http(admin, "GET", "/healthz").await.0, 200);

    let rebound_host = format!("rebind.evil.example:{}", admin.port());
    let rebound_origin = format!("http://{rebound_host}");
    let cross_site =
        |content_type| vec![("Origin", "http://evil.example"), ("Sec-Fetch-Site", "cross-site"), content_type];
    let page_requests = [
        PageRequest {
            what: "a cross-site form",
            path: "/quitquitquit",
            headers: cross_site(("Content-Type", "text/plain")),
            refused_with: 403,
        },
        PageRequest {
            what: "a cross-site urlencoded form",
            path: "/logging?level=trace",
            headers: cross_site(("Content-Type", "application/x-www-form-urlencoded")),
            refused_with: 403,
        },
        PageRequest {
            what: "a cross-site multipart form",
            path: "/access_log?enabled=true",
            headers: cross_site(("Content-Type", "multipart/form-data; boundary=x")),
            refused_with: 403,
        },
        PageRequest {
            what: "a cross-site fetch past a refused preflight",
            path: "/quitquitquit",
            headers: cross_site(JSON),
            refused_with: 403,
        },
        PageRequest {
            what: "an older browser's form, Origin only",
            path: "/quitquitquit",
            headers: vec![("Origin", "http://evil.example"), ("Content-Type", "text/plain")],
            refused_with: 403,
        },
        PageRequest {
            what: "a form from a browser that says nothing",
            path: "/quitquitquit",
            headers: vec![("Content-Type", "text/plain")],
            refused_with: 415,
        },
        PageRequest {
            what: "a bodyless POST from a browser that says nothing",
            path: "/logging?level=trace",
            headers: vec![],
            refused_with: 415,
        },
        PageRequest {
            what: "a page on another port of the same host",
            path: "/quitquitquit",
            headers: vec![("Origin", "http://127.0.0.1:1"), ("Sec-Fetch-Site", "same-site"), JSON],
            refused_with: 403,
        },
        PageRequest {
            what: "a rebound page's fetch",
            path: "/quitquitquit",
            headers: vec![
                ("Host", &rebound_host),
                ("Origin", &rebound_origin),
                ("Sec-Fetch-Site", "same-origin"),
                JSON,
            ],
            refused_with: 403,
        },
    ];
    for page in &page_requests {
        let (status, body) = http_with(admin, "POST", page.path, &page.headers).await;
        assert_eq!(status, page.refused_with, "{}: {body}", page.what);
        assert_eq!(body.lines().count(), 1, "{}: one line, {body:?}", page.what);
    }
    let (status, body) = http_with(admin, "GET", "/config_dump", &[("Host", &rebound_host)]).await;
    assert_eq!(status, 403, "a rebound page reads the config: {body}");
    assert!(!body.contains("bootstrap"), "{body}");

    assert!(process.0.try_wait().unwrap().is_none(), "the proxy still runs");
    let (_, readiness) = http(admin, "GET", "/ready").await;
    assert!(readiness.starts_with("PRE_INITIALIZING"), "not draining: {readiness}");
    let (_, logging) = http(admin, "GET", "/logging").await;
    assert!(logging.starts_with("active filter: info\n"), "the log level is as it was: {logging}");
    // What the admin's own origin would send, a localhost name, and curl's
    // POST still work.
    let origin = format!("http://{admin}");
    let same_origin = [("Origin", origin.as_str()), ("Sec-Fetch-Site", "same-origin"), JSON];
    assert_eq!(http_with(admin, "POST", "/access_log?enabled=false", &same_origin).await.0, 200);
    let localhost = format!("localhost:{}", admin.port());
    assert_eq!(http_with(admin, "GET", "/config_dump", &[("Host", &localhost)]).await.0, 200);
    assert_eq!(admin_post(admin, "/quitquitquit").await.0, 200);
    let status = process.exited(WAIT).await;
    assert!(status.success(), "{status}");
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

/// The value of `meshperf_proxy_allocations_total` on the admin endpoint.
async fn allocations(admin: std::net::SocketAddr) -> f64 {
    let (_, stats) = http(admin, "GET", "/stats/prometheus").await;
    let line = stats.lines().find(|l| l.starts_with("meshperf_proxy_allocations_total "));
    line.and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or_else(|| panic!("no allocations counter in {stats}"))
}

/// The binary (jemalloc is its allocator) counts its heap allocations: a
/// thousand proxied requests must add at least one each (a request's
/// header map and its upstream request are allocated, whatever else is).
#[tokio::test]
async fn the_binary_counts_its_allocations_under_traffic() {
    let (app, _) = upstream("app").await;
    let server = AdsServer::start().await;
    let (listen_at, admin) = (free_loopback_port(), free_loopback_port());
    let dir = TestDir::new("allocations");
    let listen = format!("{listen_at}=0.0.0.0_80:80");
    let _process = start_proxy(
        server.addr,
        admin,
        "web-1",
        &["--capture-mode", "none", "--listen", &listen],
        &dir.join("proxy.log"),
    );
    let resources = ads::Resources::from([
        (ResourceType::Cluster, vec![("app".to_string(), any(&static_cluster("app", &[app])))]),
        (ResourceType::Listener, vec![("0.0.0.0_80".to_string(), envoy::listener())]),
        (ResourceType::Route, vec![("80".to_string(), envoy::route_config(vec![envoy::route("/", "app", None)]))]),
    ]);
    let _control_plane = ads::serve(server, resources).await;
    wait_ready(admin, "the proxy binary", WAIT).await;

    let (mut sender, _conn) = h1_connect(listen_at).await;
    assert_eq!(get_on(&mut sender, "web.shop.svc.cluster.local", "/").await.status, 200);
    let before = allocations(admin).await;
    const REQUESTS: u32 = 1000;
    for _ in 0..REQUESTS {
        assert_eq!(get_on(&mut sender, "web.shop.svc.cluster.local", "/").await.status, 200);
    }
    let after = allocations(admin).await;
    assert!(after - before >= f64::from(REQUESTS), "{REQUESTS} requests: allocations went from {before} to {after}");
}
