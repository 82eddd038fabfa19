//! The node proxy's state from workload discovery resources, applied through
//! the WDS store as a response would be; the dump is compared with a golden
//! (`tests/testdata/node/wds-state.json`; regenerate with
//! `MESHPERF_UPDATE_GOLDEN=1 cargo test --lib node::`).

use std::collections::HashMap;
use std::sync::Arc;

use envoy_types::pb::google::protobuf::Any;
use prost::Message;

use super::rbac::Scope;
use super::state::{Tunnel, Waypoint};
use super::{WorkloadState, WorkloadStore};
use crate::proto::{security as sec, workload as pb};
use crate::xds::{ResourceType, Update, XdsStore};

fn any(type_url: &str, m: &impl Message) -> (Any, Option<String>) {
    (Any { type_url: type_url.into(), value: m.encode_to_vec() }, Some("v1".into()))
}

fn workload(name: &str, ip: [u8; 4], sa: &str, services: &[(&str, u32, u32)]) -> pb::Address {
    let mut svc: HashMap<String, pb::PortList> = HashMap::new();
    for (host, sp, tp) in services {
        svc.entry(host.to_string()).or_default().ports.push(pb::Port {
            service_port: *sp,
            target_port: *tp,
            app_protocol: 0,
        });
    }
    pb::Address {
        r#type: Some(pb::address::Type::Workload(pb::Workload {
            uid: format!("Kubernetes//Pod/shop/{name}"),
            name: name.into(),
            namespace: "shop".into(),
            addresses: vec![ip.to_vec()],
            tunnel_protocol: pb::TunnelProtocol::Hbone as i32,
            trust_domain: "cluster.local".into(),
            service_account: sa.into(),
            node: "node-a".into(),
            canonical_name: name.trim_end_matches(char::is_numeric).trim_end_matches('-').into(),
            canonical_revision: "v1".into(),
            workload_name: name.into(),
            cluster_id: "Kubernetes".into(),
            services: svc,
            authorization_policies: vec!["istio-system/istio_converted_static_strict".into()],
            ..Default::default()
        })),
    }
}

/// A service whose waypoint is the pod at 10.0.9.9, as the lab gives it.
fn service(host: &str, vip: [u8; 4], port: u32, target: u32) -> pb::Address {
    service_with_waypoint(host, vip, port, target, Some(waypoint_at([10, 0, 9, 9])))
}

fn service_with_waypoint(
    host: &str,
    vip: [u8; 4],
    port: u32,
    target: u32,
    waypoint: Option<pb::GatewayAddress>,
) -> pb::Address {
    pb::Address {
        r#type: Some(pb::address::Type::Service(pb::Service {
            name: host.split('.').next().unwrap_or_default().into(),
            namespace: "shop".into(),
            hostname: host.into(),
            addresses: vec![pb::NetworkAddress { network: String::new(), address: vip.to_vec(), length: None }],
            ports: vec![pb::Port { service_port: port, target_port: target, app_protocol: 0 }],
            waypoint,
            ..Default::default()
        })),
    }
}

/// A waypoint by address: a pod's (the lab) or a Service's VIP (a cluster).
fn waypoint_at(ip: [u8; 4]) -> pb::GatewayAddress {
    pb::GatewayAddress {
        destination: Some(pb::gateway_address::Destination::Address(pb::NetworkAddress {
            network: String::new(),
            address: ip.to_vec(),
            length: None,
        })),
        hbone_mtls_port: 15008,
    }
}

/// A waypoint by its Service's name.
fn waypoint_named(hostname: &str) -> pb::GatewayAddress {
    pb::GatewayAddress {
        destination: Some(pb::gateway_address::Destination::Hostname(pb::NamespacedHostname {
            namespace: "shop".into(),
            hostname: hostname.into(),
        })),
        hbone_mtls_port: 15008,
    }
}

fn static_strict() -> sec::Authorization {
    sec::Authorization {
        name: "istio_converted_static_strict".into(),
        namespace: "istio-system".into(),
        scope: sec::Scope::WorkloadSelector as i32,
        action: sec::Action::Deny as i32,
        groups: vec![sec::Group {
            rules: vec![sec::Rules {
                matches: vec![sec::Match {
                    not_principals: vec![sec::StringMatch {
                        match_type: Some(sec::string_match::MatchType::Presence(())),
                    }],
                    ..Default::default()
                }],
            }],
        }],
        ..Default::default()
    }
}

fn update(resources: Vec<(Any, Option<String>)>, removed: &[&str]) -> Update {
    Update { resources, removed: removed.iter().map(|s| s.to_string()).collect(), ..Default::default() }
}

const ADDR: &str = crate::proto::ADDRESS_TYPE;
const AUTHZ: &str = crate::proto::AUTHORIZATION_TYPE;

fn shop() -> (Arc<WorkloadState>, WorkloadStore, tokio::sync::watch::Receiver<bool>) {
    let state = Arc::new(WorkloadState::new());
    let (mut store, received) = WorkloadStore::new(state.clone());
    let addresses = vec![
        any(ADDR, &workload("web-1", [10, 0, 1, 1], "web", &[])),
        any(ADDR, &workload("cart-1", [10, 0, 2, 1], "cart", &[("shop/cart.shop.svc.cluster.local", 80, 8080)])),
        any(ADDR, &workload("cart-2", [10, 0, 2, 2], "cart", &[("shop/cart.shop.svc.cluster.local", 80, 8080)])),
        any(ADDR, &service("cart.shop.svc.cluster.local", [10, 96, 0, 10], 80, 8080)),
    ];
    store.apply(ResourceType::Address, update(addresses, &[])).unwrap();
    assert!(!*received.borrow(), "ready before Authorization was received");
    store.apply(ResourceType::Authorization, update(vec![any(AUTHZ, &static_strict())], &[])).unwrap();
    assert!(*received.borrow(), "both types received");
    (state, store, received)
}

#[test]
fn state_from_wds_matches_golden() {
    let (state, _, _) = shop();
    let dump = serde_json::to_string_pretty(&*state.snapshot()).unwrap() + "\n";
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/testdata/node/wds-state.json");
    if std::env::var_os("MESHPERF_UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &dump).unwrap();
    }
    let want = std::fs::read_to_string(path).expect("golden (MESHPERF_UPDATE_GOLDEN=1 writes it)");
    assert_eq!(dump, want, "dump differs from {path}");
}

#[test]
fn lookups_by_address_vip_and_endpoints() {
    let (state, _, _) = shop();
    let s = state.snapshot();
    let cart = s.workload_by_address("10.0.2.2".parse().unwrap()).expect("cart-2 by address");
    assert_eq!(cart.uid, "Kubernetes//Pod/shop/cart-2");
    assert_eq!(cart.identity().to_string(), "spiffe://cluster.local/ns/shop/sa/cart");
    assert_eq!(cart.tunnel, Tunnel::Hbone);
    let svc = s.service_by_vip("10.96.0.10".parse().unwrap()).expect("service by VIP");
    assert_eq!(svc.waypoint, Some(Waypoint::Address("10.0.9.9:15008".parse().unwrap())));
    let mut eps: Vec<(String, u16)> = s.endpoints_for(svc, 80).into_iter().map(|(w, p)| (w.name.clone(), p)).collect();
    eps.sort();
    assert_eq!(eps, [("cart-1".to_string(), 8080), ("cart-2".to_string(), 8080)]);
    assert!(s.endpoints_for(svc, 81).is_empty(), "no endpoints for a port the service lacks");
    let policies: Vec<_> = s.policies_for(cart).map(|p| p.key()).collect();
    assert_eq!(policies, ["istio-system/istio_converted_static_strict"]);
    assert_eq!(s.policies["istio-system/istio_converted_static_strict"].scope, Scope::WorkloadSelector);
}

#[test]
fn a_bad_resource_is_nacked_and_the_rest_applied() {
    let (state, mut store, _) = shop();
    let mut bad = workload("bad-1", [10, 0, 3, 1], "bad", &[]);
    if let Some(pb::address::Type::Workload(w)) = &mut bad.r#type {
        w.addresses = vec![vec![1, 2, 3]];
    }
    let good = workload("web-2", [10, 0, 1, 2], "web", &[]);
    let err = store.apply(ResourceType::Address, update(vec![any(ADDR, &bad), any(ADDR, &good)], &[])).unwrap_err();
    assert!(err.contains("Kubernetes//Pod/shop/bad-1") && err.contains("addresses"), "{err}");
    let s = state.snapshot();
    assert!(s.workloads.contains_key("Kubernetes//Pod/shop/web-2"), "the good one applied");
    assert!(!s.workloads.contains_key("Kubernetes//Pod/shop/bad-1"));
    let garbage = (Any { type_url: ADDR.into(), value: vec![0xff, 0xff, 0xff] }, None);
    let err = store.apply(ResourceType::Address, update(vec![garbage], &[])).unwrap_err();
    assert!(err.contains("cannot decode"), "{err}");
}

#[test]
fn removals_drop_workloads_services_and_their_indexes() {
    let (state, mut store, _) = shop();
    store
        .apply(
            ResourceType::Address,
            update(vec![], &["Kubernetes//Pod/shop/cart-1", "shop/cart.shop.svc.cluster.local"]),
        )
        .unwrap();
    store.apply(ResourceType::Authorization, update(vec![], &["istio-system/istio_converted_static_strict"])).unwrap();
    let s = state.snapshot();
    assert!(s.workload_by_address("10.0.2.1".parse().unwrap()).is_none());
    assert!(s.service_by_vip("10.96.0.10".parse().unwrap()).is_none());
    assert_eq!(s.endpoints["shop/cart.shop.svc.cluster.local"].len(), 1, "cart-2 still names the service");
    assert!(s.policies.is_empty());
    assert!(!store.resource_versions(ResourceType::Address).contains_key("Kubernetes//Pod/shop/cart-1"));
    assert!(store.resource_versions(ResourceType::Address).contains_key("Kubernetes//Pod/shop/cart-2"));
}

#[test]
fn outbound_routes() {
    use super::traffic::{Route, route};
    let (state, mut store, _) = shop();
    let s = state.snapshot();
    // A workload address: HBONE to its node proxy, authority = the pod.
    let d = route(&s, "10.0.2.1:8080".parse().unwrap()).unwrap();
    let cart = "spiffe://cluster.local/ns/shop/sa/cart".parse().unwrap();
    assert_eq!(
        d.route,
        Route::Hbone {
            peer: "10.0.2.1:15008".parse().unwrap(),
            authority: "10.0.2.1:8080".parse().unwrap(),
            identity: cart
        }
    );
    // Outside the mesh: passthrough.
    assert_eq!(
        route(&s, "192.0.2.1:443".parse().unwrap()).unwrap().route,
        Route::Direct("192.0.2.1:443".parse().unwrap())
    );
    // The service's waypoint is not known as a workload yet: no route.
    let err = route(&s, "10.96.0.10:80".parse().unwrap()).err().unwrap();
    assert!(err.contains("waypoint 10.0.9.9:15008"), "{err}");
    // Once it is, HBONE to the waypoint with the VIP as authority and the waypoint's identity.
    store
        .apply(
            ResourceType::Address,
            update(vec![any(ADDR, &workload("waypoint-1", [10, 0, 9, 9], "waypoint", &[]))], &[]),
        )
        .unwrap();
    let s = state.snapshot();
    let d = route(&s, "10.96.0.10:80".parse().unwrap()).unwrap();
    let wp = "spiffe://cluster.local/ns/shop/sa/waypoint".parse().unwrap();
    assert_eq!(
        d.route,
        Route::Hbone {
            peer: "10.0.9.9:15008".parse().unwrap(),
            authority: "10.96.0.10:80".parse().unwrap(),
            identity: wp
        }
    );
    assert_eq!(d.service.map(|s| s.hostname.clone()).as_deref(), Some("cart.shop.svc.cluster.local"));
    assert!(route(&s, "10.96.0.10:81".parse().unwrap()).is_err(), "no endpoint for a port the service lacks");
}

/// A waypoint as a cluster's control plane deploys it: a Service (VIP
/// 10.96.0.99, 15008 -> 15008) with the waypoint pod as its endpoint. cart
/// names the waypoint by the Service's VIP (as istiod does), pay by its name.
fn shop_with_waypoint_service() -> (Arc<WorkloadState>, WorkloadStore) {
    let state = Arc::new(WorkloadState::new());
    let (mut store, _) = WorkloadStore::new(state.clone());
    let waypoint_host = "waypoint.shop.svc.cluster.local";
    let addresses = vec![
        any(
            ADDR,
            &workload(
                "waypoint-1",
                [10, 0, 9, 1],
                "waypoint",
                &[("shop/waypoint.shop.svc.cluster.local", 15008, 15008)],
            ),
        ),
        any(ADDR, &service_with_waypoint(waypoint_host, [10, 96, 0, 99], 15008, 15008, None)),
        any(ADDR, &workload("cart-1", [10, 0, 2, 1], "cart", &[("shop/cart.shop.svc.cluster.local", 80, 8080)])),
        any(
            ADDR,
            &service_with_waypoint(
                "cart.shop.svc.cluster.local",
                [10, 96, 0, 10],
                80,
                8080,
                Some(waypoint_at([10, 96, 0, 99])),
            ),
        ),
        any(ADDR, &workload("pay-1", [10, 0, 3, 1], "pay", &[("shop/pay.shop.svc.cluster.local", 80, 8080)])),
        any(
            ADDR,
            &service_with_waypoint(
                "pay.shop.svc.cluster.local",
                [10, 96, 0, 11],
                80,
                8080,
                Some(waypoint_named(waypoint_host)),
            ),
        ),
    ];
    store.apply(ResourceType::Address, update(addresses, &[])).unwrap();
    (state, store)
}

#[test]
fn a_waypoint_service_is_reached_at_one_of_its_pods() {
    use super::traffic::{Route, route};
    let (state, mut store) = shop_with_waypoint_service();
    let s = state.snapshot();
    let waypoint: crate::identity::Identity = "spiffe://cluster.local/ns/shop/sa/waypoint".parse().unwrap();
    for (dst, how) in [("10.96.0.10:80", "by the Service's VIP"), ("10.96.0.11:80", "by the Service's name")] {
        let d = route(&s, dst.parse().unwrap()).unwrap_or_else(|e| panic!("{how}: {e}"));
        assert_eq!(
            d.route,
            Route::Hbone {
                peer: "10.0.9.1:15008".parse().unwrap(),
                authority: dst.parse().unwrap(),
                identity: waypoint.clone()
            },
            "{how}: HBONE to the waypoint pod, with its identity"
        );
    }

    // The waypoint pod gone: the Service has no endpoint to connect to.
    store.apply(ResourceType::Address, update(vec![], &["Kubernetes//Pod/shop/waypoint-1"])).unwrap();
    let s = state.snapshot();
    for dst in ["10.96.0.10:80", "10.96.0.11:80"] {
        let err = route(&s, dst.parse().unwrap()).err().expect("no waypoint endpoint: no route");
        assert_eq!(
            err,
            "waypoint: service shop/waypoint.shop.svc.cluster.local has no healthy endpoint for port 15008"
        );
    }

    // The Service gone too: neither its VIP nor its name is known.
    store.apply(ResourceType::Address, update(vec![], &["shop/waypoint.shop.svc.cluster.local"])).unwrap();
    let s = state.snapshot();
    let err = route(&s, "10.96.0.10:80".parse().unwrap()).err().expect("unknown waypoint VIP: no route");
    assert_eq!(err, "waypoint 10.96.0.99:15008 is not a known workload or service");
    let err = route(&s, "10.96.0.11:80".parse().unwrap()).err().expect("unknown waypoint name: no route");
    assert_eq!(err, "waypoint service shop/waypoint.shop.svc.cluster.local is not known");
}
