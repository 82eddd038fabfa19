//! The ADS client against an in-test control plane: ACK what applies, NACK
//! (with error_detail, keeping the last good config) what does not, reconnect
//! and keep serving, readiness on the first complete config. Delta and SotW.

mod support;

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::Any;
use meshperf_proxy::config::NodeIdentity;
use meshperf_proxy::state::{PathMatch, State};
use meshperf_proxy::xds::{ResourceType, XdsClient, XdsConfig};
use support::{AdsServer, WAIT, config};
use tokio::sync::watch;

fn node() -> NodeIdentity {
    NodeIdentity {
        id: "sidecar~127.0.0.1~web-1.shop~shop.svc.cluster.local".into(),
        namespace: "shop".into(),
        labels: [("app".to_string(), "web".to_string())].into(),
        service_account: "web".into(),
        instance_ips: vec!["127.0.0.1".parse().unwrap()],
        workload_name: "web".into(),
    }
}

fn delta_resp(t: ResourceType, nonce: &str, resources: Vec<(&str, Any)>) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        type_url: t.type_url().into(),
        nonce: nonce.into(),
        system_version_info: format!("v-{nonce}"),
        resources: resources
            .into_iter()
            .map(|(name, any)| Resource {
                name: name.into(),
                version: format!("{name}-{nonce}"),
                resource: Some(any),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
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
    let state = Arc::new(State::new());
    let cfg = XdsConfig { address: server.addr.to_string(), node: node(), delta: true };
    let (client, mut ready) = XdsClient::new(cfg, state.clone());
    let metrics = client.metrics();
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(client.run(stop));

    let mut s = server.next_delta().await;
    let cds = s.recv().await;
    assert_eq!(cds.type_url, ResourceType::Cluster.type_url());
    assert_eq!(cds.node.as_ref().map(|n| n.id.as_str()), Some("sidecar~127.0.0.1~web-1.shop~shop.svc.cluster.local"));
    assert!(cds.resource_names_subscribe.is_empty(), "CDS is a wildcard subscription");
    let lds = s.recv().await;
    assert_eq!(lds.type_url, ResourceType::Listener.type_url());

    s.send(delta_resp(ResourceType::Cluster, "c1", vec![("web", config::cluster())])).await;
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

    s.send(delta_resp(ResourceType::Listener, "l1", vec![("0.0.0.0_80", config::listener())])).await;
    assert_eq!(s.recv().await.response_nonce, "l1");
    let rds = s.recv().await;
    assert_eq!(
        (rds.type_url.as_str(), rds.resource_names_subscribe.as_slice()),
        (ResourceType::Route.type_url(), &["80".to_string()][..])
    );
    assert!(!ready.is_ready(), "not ready before endpoints and routes");

    s.send(delta_resp(ResourceType::Endpoint, "e1", vec![("web", config::endpoints("10.1.0.1"))])).await;
    assert_eq!(s.recv().await.response_nonce, "e1");
    s.send(delta_resp(ResourceType::Route, "r1", vec![("80", config::routes("/", false))])).await;
    assert_eq!(s.recv().await.response_nonce, "r1");
    assert!(tokio::time::timeout(WAIT, ready.wait()).await.expect("ready in time"));
    assert_eq!(prefix_of_route_80(&state).as_deref(), Some("/"));

    // A route with an invalid regex: NACK with a detail naming it; old route kept.
    s.send(delta_resp(ResourceType::Route, "r2", vec![("80", config::routes("/a([", true))])).await;
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
    let mut removal = delta_resp(ResourceType::Cluster, "c2", vec![]);
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

    stop_tx.send_replace(true);
    tokio::time::timeout(WAIT, task).await.expect("client stops on shutdown").unwrap();
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
    let state = Arc::new(State::new());
    let cfg = XdsConfig { address: server.addr.to_string(), node: node(), delta: false };
    let (client, mut ready) = XdsClient::new(cfg, state.clone());
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(client.run(stop));

    let mut s = server.next_sotw().await;
    let cds = s.recv().await;
    assert_eq!((cds.type_url.as_str(), cds.node.is_some()), (ResourceType::Cluster.type_url(), true));
    assert_eq!(s.recv().await.type_url, ResourceType::Listener.type_url());

    s.send(sotw_resp(ResourceType::Cluster, "1", "n1", vec![config::cluster()])).await;
    let ack = s.recv().await;
    assert_eq!((ack.version_info.as_str(), ack.response_nonce.as_str(), ack.error_detail.is_none()), ("1", "n1", true));
    let eds = s.recv().await;
    assert_eq!(
        (eds.type_url.as_str(), eds.resource_names.as_slice()),
        (ResourceType::Endpoint.type_url(), &["web".to_string()][..])
    );

    s.send(sotw_resp(ResourceType::Listener, "1", "n2", vec![config::listener()])).await;
    assert_eq!(s.recv().await.response_nonce, "n2");
    let rds = s.recv().await;
    assert_eq!(rds.resource_names, ["80"]);
    s.send(sotw_resp(ResourceType::Endpoint, "1", "n3", vec![config::endpoints("10.1.0.1")])).await;
    let eds_ack = s.recv().await;
    assert_eq!((eds_ack.version_info.as_str(), eds_ack.resource_names.as_slice()), ("1", &["web".to_string()][..]));
    s.send(sotw_resp(ResourceType::Route, "1", "n4", vec![config::routes("/", false)])).await;
    assert_eq!(s.recv().await.version_info, "1");
    assert!(tokio::time::timeout(WAIT, ready.wait()).await.expect("ready in time"));

    s.send(sotw_resp(ResourceType::Route, "2", "n5", vec![config::routes("/a([", true)])).await;
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

    stop_tx.send_replace(true);
    tokio::time::timeout(WAIT, task).await.expect("client stops on shutdown").unwrap();
}

#[tokio::test]
async fn unreachable_control_plane_backs_off_and_connects_later() {
    // Reserve a port, start nothing on it yet.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let state = Arc::new(State::new());
    let cfg = XdsConfig { address: addr.to_string(), node: node(), delta: true };
    let (client, ready) = XdsClient::new(cfg, state);
    let metrics = client.metrics();
    let (stop_tx, stop) = watch::channel(false);
    let task = tokio::spawn(client.run(stop));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(metrics.reconnects() >= 1, "retried");
    assert!(!ready.is_ready());
    stop_tx.send_replace(true);
    tokio::time::timeout(WAIT, task).await.expect("client stops on shutdown").unwrap();
}
