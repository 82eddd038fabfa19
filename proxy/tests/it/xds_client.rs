//! The ADS client against an in-test control plane: ACK what applies, NACK
//! (with error_detail, keeping the last good config) what does not, with
//! traffic through the proxy unaffected, reconnect and keep serving,
//! readiness on the first complete config. Delta and SotW.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;
use meshperf_proxy::config::NodeIdentity;
use meshperf_proxy::state::{PathMatch, State};
use meshperf_proxy::xds::ResourceType;
use tokio::sync::watch;

use crate::support::ads::{AdsServer, DeltaStream, Resources, delta_response, sync, web_mesh};
use crate::support::envoy;
use crate::support::{RunningClient, WAIT, client, closed_port, eventually, get, http, start_with_xds, upstream};

fn node() -> NodeIdentity {
    crate::support::node("web", "shop", "web", &[("app", "web")])
}

fn prefix_of_route_80(state: &State) -> Option<String> {
    let snap = state.snapshot();
    match &snap.routes.get("80")?.virtual_hosts[0].routes[0].matcher.path {
        PathMatch::Prefix(p) => Some(p.clone()),
        _ => None,
    }
}

#[tokio::test]
async fn delta_ack_nack_reconnect_and_readiness() {
    let mut server = AdsServer::start().await;
    let client = RunningClient::start(server.addr, node(), true);
    let (state, mut ready, metrics) = (client.state.clone(), client.ready.clone(), client.metrics.clone());

    let mut s = server.next_delta().await;
    let cds = s.recv().await;
    assert_eq!(cds.type_url, ResourceType::Cluster.type_url());
    assert_eq!(cds.node.as_ref().map(|n| n.id.as_str()), Some("sidecar~127.0.0.1~web-1.shop~shop.svc.cluster.local"));
    assert!(cds.resource_names_subscribe.is_empty(), "CDS is a wildcard subscription");
    let lds = s.recv().await;
    assert_eq!(lds.type_url, ResourceType::Listener.type_url());

    s.send(delta_response(ResourceType::Cluster, "c1", vec![("web", envoy::cluster())])).await;
    let ack = s.recv().await;
    assert_eq!(
        (ack.type_url.as_str(), ack.response_nonce.as_str(), ack.error_detail.is_none()),
        (ResourceType::Cluster.type_url(), "c1", true)
    );
    let eds = s.recv().await;
    assert_eq!(
        (eds.type_url.as_str(), eds.resource_names_subscribe.as_slice()),
        (ResourceType::Endpoint.type_url(), &["web".to_string()][..])
    );

    s.send(delta_response(ResourceType::Listener, "l1", vec![("0.0.0.0_80", envoy::listener())])).await;
    assert_eq!(s.recv().await.response_nonce, "l1");
    let rds = s.recv().await;
    assert_eq!(
        (rds.type_url.as_str(), rds.resource_names_subscribe.as_slice()),
        (ResourceType::Route.type_url(), &["80".to_string()][..])
    );
    assert!(!ready.is_ready(), "not ready before endpoints and routes");

    s.send(delta_response(ResourceType::Endpoint, "e1", vec![("web", envoy::endpoints("10.1.0.1"))])).await;
    assert_eq!(s.recv().await.response_nonce, "e1");
    s.send(delta_response(ResourceType::Route, "r1", vec![("80", envoy::routes("/", false))])).await;
    assert_eq!(s.recv().await.response_nonce, "r1");
    assert!(tokio::time::timeout(WAIT, ready.wait()).await.expect("ready in time"));
    assert_eq!(prefix_of_route_80(&state).as_deref(), Some("/"));

    // A route with an invalid regex: NACK with a detail naming it; old route kept.
    s.send(delta_response(ResourceType::Route, "r2", vec![("80", envoy::routes("/a([", true))])).await;
    let nack = s.recv().await;
    assert_eq!(nack.response_nonce, "r2");
    let detail = nack.error_detail.expect("NACK carries error_detail").message;
    assert!(detail.contains("route \"80\"") && detail.contains("invalid regex"), "{detail}");
    assert_eq!(prefix_of_route_80(&state).as_deref(), Some("/"), "last good config kept");
    assert_eq!((metrics.nacks(ResourceType::Route), metrics.acks(ResourceType::Route)), (1, 1));

    // The control plane goes away: config keeps serving, the client comes back
    // and tells the server what it has.
    drop(s);
    let mut s2 = server.next_delta().await;
    assert!(ready.is_ready());
    assert_eq!(state.snapshot().clusters.len(), 1);
    let cds = s2.recv().await;
    assert_eq!(cds.type_url, ResourceType::Cluster.type_url());
    assert_eq!(cds.initial_resource_versions.get("web").map(String::as_str), Some("web-c1"));
    // Named subscriptions are restored on the new stream too.
    let mut resubscribed = Vec::new();
    for _ in 0..3 {
        let r = s2.recv().await;
        if !r.resource_names_subscribe.is_empty() {
            resubscribed.push((r.type_url.clone(), r.initial_resource_versions.clone()));
        }
    }
    assert!(
        resubscribed
            .iter()
            .any(|(t, v)| t == ResourceType::Route.type_url() && v.get("80").map(String::as_str) == Some("80-r1")),
        "{resubscribed:?}"
    );
    assert!(metrics.reconnects() >= 1);

    // Removing the cluster drops its endpoints and unsubscribes from them.
    let mut removal = delta_response(ResourceType::Cluster, "c2", vec![]);
    removal.removed_resources = vec!["web".into()];
    s2.send(removal).await;
    assert_eq!(s2.recv().await.response_nonce, "c2");
    let unsub = s2.recv().await;
    assert_eq!(
        (unsub.type_url.as_str(), unsub.resource_names_unsubscribe.as_slice()),
        (ResourceType::Endpoint.type_url(), &["web".to_string()][..])
    );
    let snap = state.snapshot();
    assert!(snap.clusters.is_empty() && snap.endpoints.is_empty());

    client.stop().await;
}

/// A proxy serving explicit bindings (a waypoint's connect_terminate) is
/// not ready while a bound listener is missing, even with every other type
/// complete: its socket already accepts, and would close every connection.
/// This is what a NACKed first LDS followed by a delta of only the changed
/// listeners leaves behind.
#[tokio::test]
async fn not_ready_until_every_bound_listener_is_configured() {
    let mut server = AdsServer::start().await;
    let client = RunningClient::start_bound(server.addr, node(), true, &["0.0.0.0_9000"]);
    let mut ready = client.ready.clone();
    let mut s = server.next_delta().await;
    for _ in 0..2 {
        s.recv().await; // the CDS and LDS subscriptions
    }
    let upstream: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let cluster = envoy::any(&envoy::static_cluster("static", &[upstream]));
    s.send(delta_response(ResourceType::Cluster, "c1", vec![("static", cluster)])).await;
    assert_eq!(answer_to(&mut s, "c1").await.error_detail, None);
    s.send(delta_response(ResourceType::Listener, "l1", vec![("0.0.0.0_8000", envoy::tcp_listener(8000, "static"))]))
        .await;
    assert_eq!(answer_to(&mut s, "l1").await.error_detail, None);
    assert!(!ready.is_ready(), "ready without the bound listener 0.0.0.0_9000");

    s.send(delta_response(ResourceType::Listener, "l2", vec![("0.0.0.0_9000", envoy::tcp_listener(9000, "static"))]))
        .await;
    assert_eq!(answer_to(&mut s, "l2").await.error_detail, None);
    assert!(tokio::time::timeout(WAIT, ready.wait()).await.expect("ready in time"));
    client.stop().await;
}

fn sotw_resp(t: ResourceType, version: &str, nonce: &str, resources: Vec<Any>) -> DiscoveryResponse {
    DiscoveryResponse {
        type_url: t.type_url().into(),
        version_info: version.into(),
        nonce: nonce.into(),
        resources,
        ..Default::default()
    }
}

#[tokio::test]
async fn sotw_ack_nack_and_readiness() {
    let mut server = AdsServer::start().await;
    let mut client = RunningClient::start(server.addr, node(), false);
    let state = client.state.clone();

    let mut s = server.next_sotw().await;
    let cds = s.recv().await;
    assert_eq!((cds.type_url.as_str(), cds.node.is_some()), (ResourceType::Cluster.type_url(), true));
    assert_eq!(s.recv().await.type_url, ResourceType::Listener.type_url());

    s.send(sotw_resp(ResourceType::Cluster, "1", "n1", vec![envoy::cluster()])).await;
    let ack = s.recv().await;
    assert_eq!((ack.version_info.as_str(), ack.response_nonce.as_str(), ack.error_detail.is_none()), ("1", "n1", true));
    let eds = s.recv().await;
    assert_eq!(
        (eds.type_url.as_str(), eds.resource_names.as_slice()),
        (ResourceType::Endpoint.type_url(), &["web".to_string()][..])
    );

    s.send(sotw_resp(ResourceType::Listener, "1", "n2", vec![envoy::listener()])).await;
    assert_eq!(s.recv().await.response_nonce, "n2");
    let rds = s.recv().await;
    assert_eq!(rds.resource_names, ["80"]);
    s.send(sotw_resp(ResourceType::Endpoint, "1", "n3", vec![envoy::endpoints("10.1.0.1")])).await;
    let eds_ack = s.recv().await;
    assert_eq!((eds_ack.version_info.as_str(), eds_ack.resource_names.as_slice()), ("1", &["web".to_string()][..]));
    s.send(sotw_resp(ResourceType::Route, "1", "n4", vec![envoy::routes("/", false)])).await;
    assert_eq!(s.recv().await.version_info, "1");
    client.ready().await;

    s.send(sotw_resp(ResourceType::Route, "2", "n5", vec![envoy::routes("/a([", true)])).await;
    let nack = s.recv().await;
    assert_eq!(
        (nack.version_info.as_str(), nack.response_nonce.as_str()),
        ("1", "n5"),
        "a NACK repeats the last accepted version"
    );
    assert!(nack.error_detail.expect("error_detail").message.contains("invalid regex"));
    assert_eq!(prefix_of_route_80(&state).as_deref(), Some("/"));

    // SotW CDS is the whole set: an empty response removes the cluster.
    s.send(sotw_resp(ResourceType::Cluster, "2", "n6", vec![])).await;
    assert_eq!(s.recv().await.version_info, "2");
    assert!(state.snapshot().clusters.is_empty());

    client.stop().await;
}

// On the wall clock: on a paused clock the ADS stream (tonic client and
// server) stopped making progress once connected. The backoff to the third
// retry takes 0.7 to 1.4 s.
#[tokio::test]
async fn unreachable_control_plane_backs_off_and_connects_later() {
    // The control plane's port, bound but not listening yet: connects are refused.
    let (addr, socket) = closed_port();
    let started = tokio::time::Instant::now();
    let mut client = RunningClient::start(addr, node(), true);
    eventually("three failed connects", WAIT, async || (client.metrics.reconnects() >= 3).then_some(())).await;
    // Backoff: 0.2 s, 0.4 s, 0.8 s, each jittered to half to all of itself.
    assert!(started.elapsed() >= Duration::from_millis(700), "retried after {:?}", started.elapsed());
    assert!(!client.ready.is_ready());

    // Now the control plane starts there: the client connects and takes its config.
    let mut server = AdsServer::start_on(socket.listen(64).unwrap());
    let mut stream = server.next_delta().await;
    sync(&mut stream, web_mesh()).await;
    client.ready().await;
    assert_eq!(prefix_of_route_80(&client.state).as_deref(), Some("/"));
    assert_eq!(client.state.snapshot().clusters.len(), 1);
    client.stop().await;
}

/// Reads the client's requests until the answer to `nonce`.
async fn answer_to(s: &mut DeltaStream, nonce: &str) -> DeltaDiscoveryRequest {
    loop {
        let req = s.recv().await;
        if req.response_nonce == nonce {
            return req;
        }
    }
}

#[tokio::test]
async fn a_config_the_proxy_cannot_apply_is_nacked_and_traffic_keeps_flowing() {
    const HOST: &str = "web.shop.svc.cluster.local";
    let (app, hits) = upstream("app").await;
    let web = envoy::static_cluster("web", &[app]);
    let routes = || envoy::route_config(vec![envoy::route("/", "web", None)]);
    let mut mesh = start_with_xds(Resources::from([
        (ResourceType::Cluster, vec![("web".to_string(), envoy::any(&web))]),
        (ResourceType::Listener, vec![("0.0.0.0_80".to_string(), envoy::listener())]),
        (ResourceType::Route, vec![("80".to_string(), routes())]),
    ]))
    .await;

    // Requests back to back, through the whole exchange below.
    let (stop_traffic, stopped) = watch::channel(false);
    let addr = mesh.proxy.addrs[0];
    let traffic = tokio::spawn(async move {
        let (c, mut statuses) = (client(false), BTreeMap::<u16, usize>::new());
        while !*stopped.borrow() {
            *statuses.entry(get(&c, addr, HOST, "/", &[]).await.status).or_default() += 1;
        }
        statuses
    });
    let flowing = async |from: usize| {
        eventually("requests reach the upstream", WAIT, async || {
            (hits.load(Ordering::Relaxed) > from + 10).then_some(())
        })
        .await
    };
    flowing(0).await;
    let good_routes = mesh.proxy.state.snapshot().versions.get("rds").cloned();

    // A route with a regex that does not compile, then a cluster with an
    // impossible outlier setting: each NACKed with its reason, last good kept.
    let bad_route = envoy::route_config(vec![envoy::route_regex("/a([", "web")]);
    mesh.stream.send(delta_response(ResourceType::Route, "bad-rds", vec![("80", bad_route)])).await;
    let nack = answer_to(&mut mesh.stream, "bad-rds").await;
    let detail = nack.error_detail.expect("the NACK carries error_detail").message;
    assert!(detail.contains("route \"80\"") && detail.contains("invalid regex"), "{detail}");
    flowing(hits.load(Ordering::Relaxed)).await;

    let mut bad_web = web.clone();
    bad_web.outlier_detection =
        Some(cv3::OutlierDetection { max_ejection_percent: envoy::u32v(150), ..Default::default() });
    mesh.stream.send(delta_response(ResourceType::Cluster, "bad-cds", vec![("web", envoy::any(&bad_web))])).await;
    let nack = answer_to(&mut mesh.stream, "bad-cds").await;
    let detail = nack.error_detail.expect("the NACK carries error_detail").message;
    assert!(detail.contains("max_ejection_percent 150 > 100"), "{detail}");
    let kept = mesh.proxy.state.snapshot();
    assert!(kept.clusters["web"].outlier_detection.is_none(), "the last good cluster is kept");
    assert_eq!(kept.versions.get("rds"), good_routes.as_ref(), "the last good routes are kept");
    flowing(hits.load(Ordering::Relaxed)).await;

    // Counted, on the admin endpoint.
    let (_, stats) = http(mesh.admin, "GET", "/stats/prometheus").await;
    for t in ["rds", "cds"] {
        assert!(stats.contains(&format!("meshperf_proxy_xds_nacks_total{{type=\"{t}\"}} 1\n")), "{stats}");
    }

    // A good config after the NACKs applies.
    mesh.stream.send(delta_response(ResourceType::Route, "good-rds", vec![("80", routes())])).await;
    assert!(answer_to(&mut mesh.stream, "good-rds").await.error_detail.is_none(), "ACK");
    assert_eq!(mesh.proxy.state.snapshot().versions.get("rds").map(String::as_str), Some("v-good-rds"));
    flowing(hits.load(Ordering::Relaxed)).await;

    stop_traffic.send_replace(true);
    let statuses = traffic.await.expect("no request failed");
    assert_eq!(statuses.keys().collect::<Vec<_>>(), [&200], "every request succeeded: {statuses:?}");
}

/// With a token file (--auth-token) the ADS stream carries `authorization:
/// Bearer TOKEN`, as istio-agent's and ztunnel's do, on delta and SotW
/// alike; the file is read again for each stream, so a rotated token is
/// what the next stream sends. Without one, no header is sent.
#[tokio::test]
async fn the_token_reaches_the_control_plane_on_every_stream() {
    let dir = crate::support::process::TestDir::new("xds-token");
    let token = dir.join("istio-token");
    for delta in [true, false] {
        std::fs::write(&token, "aaa.bbb.ccc").unwrap();
        let mut server = AdsServer::start().await;
        let client = RunningClient::start_with_token(server.addr, node(), delta, &token);
        let first =
            if delta { server.next_delta().await.authorization } else { server.next_sotw().await.authorization };
        assert_eq!(first.as_deref(), Some("Bearer aaa.bbb.ccc"), "delta {delta}");
        // The kubelet rotates the token; the stream ends (dropped here) and
        // the client reconnects with the new one.
        std::fs::write(&token, "ddd.eee.fff").unwrap();
        let second =
            if delta { server.next_delta().await.authorization } else { server.next_sotw().await.authorization };
        assert_eq!(second.as_deref(), Some("Bearer ddd.eee.fff"), "delta {delta}: a rotated token is sent");
        client.stop().await;
    }
    let mut server = AdsServer::start().await;
    let client = RunningClient::start(server.addr, node(), true);
    assert_eq!(server.next_delta().await.authorization, None, "no token, no header");
    client.stop().await;
}
