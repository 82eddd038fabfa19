//! Circuit breaking and outlier detection end to end: clusters with Envoy
//! thresholds and outlier settings arrive over a real ADS stream, requests go
//! through the proxy to real upstreams on loopback.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::route::v3 as rv3;
use meshperf_proxy::xds::ResourceType;

use crate::support::ads::Resources;
use crate::support::envoy::{self, any, pb_duration, route, static_cluster, thresholds, u32v};
use crate::support::*;

/// The control plane's config: these clusters, listener `0.0.0.0_80` and
/// route config `80` with these routes.
fn mesh(clusters: Vec<cv3::Cluster>, routes: Vec<rv3::Route>) -> Resources {
    let clusters = clusters.iter().map(|c| (c.name.clone(), any(c))).collect();
    BTreeMap::from([
        (ResourceType::Cluster, clusters),
        (ResourceType::Listener, vec![("0.0.0.0_80".into(), envoy::listener())]),
        (ResourceType::Route, vec![("80".into(), envoy::route_config(routes))]),
    ])
}

const HOST: &str = "web.shop.svc.cluster.local";

#[tokio::test]
async fn over_max_connections_and_pending_is_503_uo() {
    // The upstream holds every request until released.
    let (held, hold) = held_upstream("held").await;
    let mut c = static_cluster("web", &[held]);
    c.circuit_breakers = Some(thresholds(1, 1, 1024, 3));
    let mesh = start_with_xds(mesh(vec![c], vec![route("/", "web", None)])).await;
    let addr = mesh.proxy.addrs[0];

    // Three clients at once: one request in flight on the one connection
    // allowed, one pending behind it, the third over max_pending_requests,
    // answered by the proxy while the other two are still held.
    let calls: Vec<_> =
        (0..3).map(|_| tokio::spawn(async move { get(&client(false), addr, HOST, "/", &[]).await })).collect();
    let overflowed = mesh.proxy.recorder.request_with(|r| r.response_code == 503).await;
    assert_eq!(overflowed.response_flags, "UO");
    assert_eq!(overflowed.cluster.as_deref(), Some("web"));
    hold.release();
    let mut answers = Vec::new();
    for call in calls {
        let r = call.await.unwrap();
        answers.push((r.status, r.overloaded, r.upstream));
    }
    answers.sort();
    assert_eq!(
        answers,
        [(200, false, "held".to_string()), (200, false, "held".to_string()), (503, true, String::new())]
    );
}

#[tokio::test]
async fn a_failing_endpoint_is_ejected_and_tried_again_after_base_ejection_time() {
    let (good, _) = upstream("good").await;
    let (bad, bad_hits) = upstream("failing").await; // always 503
    let base = Duration::from_millis(300);
    let mut c = static_cluster("web", &[bad, good]);
    c.outlier_detection = Some(cv3::OutlierDetection {
        consecutive_5xx: u32v(3),
        base_ejection_time: pb_duration(base),
        // Envoy enforces the percentage strictly: one host of two is 50%.
        max_ejection_percent: u32v(50),
        ..Default::default()
    });
    let mesh = start_with_xds(mesh(vec![c], vec![route("/", "web", None)])).await;
    let (http, addr) = (client(false), mesh.proxy.addrs[0]);

    // Round robin alternates until the bad endpoint has failed three times in a row.
    // Outlier detection runs on the wall clock (std's Instant), so this test does too.
    let mut sent = 0;
    let mut third_failure_sent = Instant::now();
    while bad_hits.load(Ordering::Relaxed) < 3 {
        assert!(sent < 20, "the bad endpoint was not tried three times in 20 requests");
        let before = Instant::now();
        let status = get(&http, addr, HOST, "/", &[]).await.status;
        sent += 1;
        if status == 503 {
            third_failure_sent = before;
        }
    }
    // Ejected: every request goes to the good endpoint until the ejection ends,
    // then the bad one is tried again.
    let came_back = eventually("the ejected endpoint is tried again", Duration::from_secs(5), async || {
        let r = get(&http, addr, HOST, "/", &[]).await;
        if bad_hits.load(Ordering::Relaxed) > 3 {
            return Some(Instant::now());
        }
        assert_eq!((r.status, r.upstream.as_str()), (200, "good"), "a request reached the ejected endpoint");
        None
    })
    .await;
    assert!(
        came_back - third_failure_sent >= base,
        "tried again after {:?}, before base_ejection_time",
        came_back - third_failure_sent
    );
}

#[tokio::test]
async fn retries_over_max_retries_are_not_attempted() {
    let (capped, capped_hits) = upstream("failing").await;
    let (retried, retried_hits) = upstream("failing").await;
    let mut c = static_cluster("capped", &[capped]);
    c.circuit_breakers = Some(thresholds(1024, 1024, 1024, 0));
    let mesh = start_with_xds(mesh(
        vec![c, static_cluster("retried", &[retried])],
        vec![route("/capped", "capped", Some(("5xx", 2))), route("/retried", "retried", Some(("5xx", 2)))],
    ))
    .await;
    let (http, addr) = (client(false), mesh.proxy.addrs[0]);

    assert_eq!(get(&http, addr, HOST, "/capped", &[]).await.status, 503);
    assert_eq!(capped_hits.load(Ordering::Relaxed), 1, "max_retries 0: no retry");
    let report = mesh.proxy.recorder.request_with(|r| r.cluster.as_deref() == Some("capped")).await;
    assert_eq!(report.response_flags, "UO");

    // The same policy under Envoy's default max_retries (3) retries twice.
    assert_eq!(get(&http, addr, HOST, "/retried", &[]).await.status, 503);
    assert_eq!(retried_hits.load(Ordering::Relaxed), 3);
    let report = mesh.proxy.recorder.request_with(|r| r.cluster.as_deref() == Some("retried")).await;
    assert_eq!(report.response_flags, "");
}
