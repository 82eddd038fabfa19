//! The admin endpoint in-process: readiness follows the xDS client and the
//! drain, the dump is the converted state by Envoy's type names, stats carry
//! the client's counters, and POST /quitquitquit asks for the drain. Then
//! the real binary, whose allocator's counts its stats carry.

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
use crate::support::{RunningClient, WAIT, get_on, h1_connect, http, upstream};

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
    assert_eq!(http(addr, "POST", "/logging?level=debug").await.0, 400, "no log control in this process");
    assert_eq!(http(addr, "POST", "/quitquitquit").await.0, 200);
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
