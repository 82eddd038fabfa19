//! The resilience tests' mesh: a real ADS stream from the in-test control
//! plane (`support`) fills the proxy's state with Envoy resources — static
//! clusters with circuit breakers and outlier detection, listener
//! `0.0.0.0_80` and route config `80` — and the proxy serves that listener on
//! 127.0.0.1:0, as `meshperf pilot` and a sidecar in explicit mode would.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::endpoint::v3 as ev3;
use envoy_types::pb::envoy::config::route::v3 as rv3;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};
use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration, UInt32Value};
use http_body_util::{BodyExt, Full};
use meshperf_proxy::config::{Cli, NodeIdentity};
use meshperf_proxy::proxy::{BoundListener, ListenerTarget, Proxy};
use meshperf_proxy::state::State;
use meshperf_proxy::xds::{ResourceType, XdsClient, XdsConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::proxy_support::{Recorder, TestClient};
use crate::support::{AdsServer, WAIT, any, config};

pub fn pb_duration(d: Duration) -> Option<PbDuration> {
    Some(PbDuration { seconds: d.as_secs() as i64, nanos: d.subsec_nanos() as i32 })
}

pub fn u32v(v: u32) -> Option<UInt32Value> {
    Some(UInt32Value { value: v })
}

/// A STATIC cluster over `endpoints`, round robin, 1 s connect timeout.
pub fn static_cluster(name: &str, endpoints: &[SocketAddr]) -> cv3::Cluster {
    let lb_endpoints = endpoints
        .iter()
        .map(|a| ev3::LbEndpoint {
            host_identifier: Some(ev3::lb_endpoint::HostIdentifier::Endpoint(ev3::Endpoint {
                address: Some(core::Address {
                    address: Some(core::address::Address::SocketAddress(core::SocketAddress {
                        address: a.ip().to_string(),
                        port_specifier: Some(core::socket_address::PortSpecifier::PortValue(u32::from(a.port()))),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    cv3::Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cv3::cluster::ClusterDiscoveryType::Type(
            cv3::cluster::DiscoveryType::Static as i32,
        )),
        connect_timeout: pb_duration(Duration::from_secs(1)),
        load_assignment: Some(ev3::ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![ev3::LocalityLbEndpoints { lb_endpoints, ..Default::default() }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// DEFAULT-priority thresholds, as Istio writes a DestinationRule's connectionPool.
pub fn thresholds(max_connections: u32, max_pending: u32, max_requests: u32, max_retries: u32) -> cv3::CircuitBreakers {
    cv3::CircuitBreakers {
        thresholds: vec![cv3::circuit_breakers::Thresholds {
            max_connections: u32v(max_connections),
            max_pending_requests: u32v(max_pending),
            max_requests: u32v(max_requests),
            max_retries: u32v(max_retries),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A route on `prefix` to `cluster` with a 10 s timeout and an optional retry policy.
pub fn route(prefix: &str, cluster: &str, retry: Option<(&str, u32)>) -> rv3::Route {
    rv3::Route {
        r#match: Some(rv3::RouteMatch {
            path_specifier: Some(rv3::route_match::PathSpecifier::Prefix(prefix.into())),
            ..Default::default()
        }),
        action: Some(rv3::route::Action::Route(rv3::RouteAction {
            cluster_specifier: Some(rv3::route_action::ClusterSpecifier::Cluster(cluster.into())),
            timeout: pb_duration(Duration::from_secs(10)),
            retry_policy: retry.map(|(on, n)| rv3::RetryPolicy {
                retry_on: on.into(),
                num_retries: u32v(n),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn route_config(routes: Vec<rv3::Route>) -> Any {
    any(&rv3::RouteConfiguration {
        name: "80".into(),
        virtual_hosts: vec![rv3::VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    })
}

pub struct Mesh {
    pub addr: SocketAddr,
    pub recorder: Arc<Recorder>,
    pub state: Arc<State>,
    _stop: watch::Sender<bool>,
}

/// Starts the in-test control plane with these clusters and routes, an ADS
/// client that applies them, and the proxy serving listener `0.0.0.0_80`
/// once the client is ready.
pub async fn start(clusters: Vec<cv3::Cluster>, routes: Vec<rv3::Route>) -> Mesh {
    let mut server = AdsServer::start().await;
    let state = Arc::new(State::new());
    let node = NodeIdentity {
        id: "sidecar~127.0.0.1~web-1.shop~shop.svc.cluster.local".into(),
        namespace: "shop".into(),
        labels: Default::default(),
        service_account: "web".into(),
        instance_ips: vec!["127.0.0.1".parse().unwrap()],
        workload_name: "web".into(),
    };
    let (client, mut ready) =
        XdsClient::new(XdsConfig { address: server.addr.to_string(), node, delta: true }, state.clone());
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(client.run(stopped.clone()));

    // The control plane: answer each subscription once with its resources, take the ACKs.
    let mut resources: HashMap<&str, Vec<(String, Any)>> = HashMap::new();
    resources.insert(ResourceType::Cluster.type_url(), clusters.iter().map(|c| (c.name.clone(), any(c))).collect());
    resources.insert(ResourceType::Listener.type_url(), vec![("0.0.0.0_80".into(), config::listener())]);
    resources.insert(ResourceType::Route.type_url(), vec![("80".into(), route_config(routes))]);
    let mut stream = server.next_delta().await;
    tokio::spawn(async move {
        let _server = server; // keeps the ADS server's channels open
        let mut nonce = 0;
        while let Some(req) = stream.requests.recv().await {
            let Some(res) = resources.remove(req.type_url.as_str()) else { continue };
            nonce += 1;
            let resp = DeltaDiscoveryResponse {
                type_url: req.type_url.clone(),
                nonce: nonce.to_string(),
                resources: res
                    .into_iter()
                    .map(|(name, any)| Resource {
                        name,
                        version: "1".into(),
                        resource: Some(any),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
            if stream.responses.send(Ok(resp)).await.is_err() {
                break;
            }
        }
    });
    assert!(tokio::time::timeout(WAIT, ready.wait()).await.expect("xDS ready in time"), "xDS client not ready");

    let config = Cli::try_parse_from(["meshperf-proxy", "--capture-mode=none"]).unwrap().into_config().unwrap();
    let recorder = Arc::new(Recorder::default());
    let proxy = Proxy::new(Arc::new(config), state.clone(), Some(recorder.clone()));
    let target = ListenerTarget::Named { name: "0.0.0.0_80".into(), dest_port: Some(80) };
    let bound = BoundListener::new(TcpListener::bind("127.0.0.1:0").await.unwrap(), target);
    let addr = bound.local_addr().unwrap();
    tokio::spawn(async move { proxy.serve(vec![bound], stopped).await });
    Mesh { addr, recorder, state, _stop: stop }
}

/// GET `path` through the proxy: (status, x-envoy-overloaded, x-upstream).
pub async fn get(c: &TestClient, proxy: SocketAddr, path: &str) -> (u16, bool, String) {
    let req = hyper::Request::get(format!("http://{proxy}{path}"))
        .header("host", "web.shop.svc.cluster.local")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = tokio::time::timeout(WAIT, c.request(req)).await.expect("answer in time").expect("response");
    let overloaded = resp.headers().get("x-envoy-overloaded").is_some_and(|v| v == "true");
    let upstream = resp.headers().get("x-upstream").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    (status, overloaded, upstream)
}
