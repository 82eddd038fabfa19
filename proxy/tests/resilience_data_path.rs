//! Circuit breaking and outlier detection end to end: clusters with Envoy
//! thresholds and outlier settings arrive over a real ADS stream, requests go
//! through the proxy to real upstreams on loopback.

mod proxy_support;
mod resilience_support;
mod support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use proxy_support::{client, upstream};
use resilience_support::{get, route, start, static_cluster, thresholds, u32v};

#[tokio::test]
async fn over_max_connections_and_pending_is_503_uo() {
    // Each /slow request holds its upstream connection for 2 s.
    let (slow, _) = upstream("slow").await;
    let mut c = static_cluster("web", &[slow]);
    c.circuit_breakers = Some(thresholds(1, 1, 1024, 3));
    let mesh = start(vec![c], vec![route("/", "web", None)]).await;

    let calls = (0..3).map(|_| {
        let (c, addr) = (client(false), mesh.addr);
        tokio::spawn(async move { get(&c, addr, "/slow").await })
    });
    let mut answers = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        answers.push(call.await.unwrap());
    }
    answers.sort();
    // One in flight, one pending behind it, the third over max_pending_requests.
    assert_eq!(answers[0], (200, false, "slow".into()));
    assert_eq!(answers[1], (200, false, "slow".into()));
    assert_eq!(answers[2], (503, true, String::new()));
    let overflowed = mesh.recorder.request_with(|r| r.response_code == 503).await;
    assert_eq!(overflowed.response_flags, "UO");
    assert_eq!(overflowed.cluster.as_deref(), Some("web"));
}

#[tokio::test]
async fn a_failing_endpoint_is_ejected_and_tried_again_after_base_ejection_time() {
    let (good, _) = upstream("good").await;
    let (bad, bad_hits) = upstream("failing").await; // always 503
    let base = Duration::from_millis(300);
    let mut c = static_cluster("web", &[bad, good]);
    c.outlier_detection = Some(envoy_types::pb::envoy::config::cluster::v3::OutlierDetection {
        consecutive_5xx: u32v(3),
        base_ejection_time: resilience_support::pb_duration(base),
        // Envoy enforces the percentage strictly: one host of two is 50%.
        max_ejection_percent: u32v(50),
        ..Default::default()
    });
    let mesh = start(vec![c], vec![route("/", "web", None)]).await;
    let http = client(false);

    // Round robin alternates until the bad endpoint has failed three times in a row.
    let mut sent = 0;
    let mut third_failure_sent = Instant::now();
    while bad_hits.load(Ordering::Relaxed) < 3 {
        assert!(sent < 20, "the bad endpoint was not tried three times in 20 requests");
        let before = Instant::now();
        let (status, _, _) = get(&http, mesh.addr, "/").await;
        sent += 1;
        if status == 503 {
            third_failure_sent = before;
        }
    }
    // Ejected: every request goes to the good endpoint until the ejection ends,
    // then the bad one is tried again.
    let came_back = loop {
        assert!(third_failure_sent.elapsed() < Duration::from_secs(5), "the ejected endpoint never came back");
        let (status, _, upstream) = get(&http, mesh.addr, "/").await;
        if bad_hits.load(Ordering::Relaxed) > 3 {
            break Instant::now();
        }
        assert_eq!((status, upstream.as_str()), (200, "good"), "a request reached the ejected endpoint");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
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
    let mesh = start(
        vec![c, static_cluster("retried", &[retried])],
        vec![route("/capped", "capped", Some(("5xx", 2))), route("/retried", "retried", Some(("5xx", 2)))],
    )
    .await;
    let http = client(false);

    assert_eq!(get(&http, mesh.addr, "/capped").await.0, 503);
    assert_eq!(capped_hits.load(Ordering::Relaxed), 1, "max_retries 0: no retry");
    let report = mesh.recorder.request_with(|r| r.cluster.as_deref() == Some("capped")).await;
    assert_eq!(report.response_flags, "UO");

    // The same policy under Envoy's default max_retries (3) retries twice.
    assert_eq!(get(&http, mesh.addr, "/retried").await.0, 503);
    assert_eq!(retried_hits.load(Ordering::Relaxed), 3);
    let report = mesh.recorder.request_with(|r| r.cluster.as_deref() == Some("retried")).await;
    assert_eq!(report.response_flags, "");
}
