//! Arbitrary bytes as the body of each xDS resource type the proxy accepts,
//! through the state module's decode and conversion (the path of every
//! resource the control plane sends), then through what reads the converted
//! model: name lists, chain selection, routing, and the config dump's JSON.
//! Errors are fine (they become NACKs); panics are not.
#![no_main]

use envoy_types::pb::google::protobuf::Any;
use hyper::{HeaderMap, Method};
use libfuzzer_sys::fuzz_target;
use meshperf_proxy::proxy::route::{RequestHead, pick_cluster, select_route};
use meshperf_proxy::state::{Cluster, ClusterEndpoints, Listener, RouteAction, RouteConfig, Secret, TransportProtocol};

const PREFIX: &str = "type.googleapis.com/";

fn any(full_name: &str, data: &[u8]) -> Any {
    Any { type_url: format!("{PREFIX}{full_name}"), value: data.to_vec() }
}

fn dump(v: &impl serde::Serialize) {
    let _ = serde_json::to_vec(v);
}

fn check_cluster(data: &[u8]) {
    if let Ok(c) = Cluster::from_any(&any("envoy.config.cluster.v3.Cluster", data)) {
        let _ = c.secret_names().count();
        dump(&c);
    }
}

fn check_endpoints(data: &[u8]) {
    if let Ok(e) = ClusterEndpoints::from_any(&any("envoy.config.endpoint.v3.ClusterLoadAssignment", data)) {
        dump(&e);
    }
}

fn check_listener(data: &[u8]) {
    if let Ok(l) = Listener::from_any(&any("envoy.config.listener.v3.Listener", data)) {
        let _ = (l.route_names().count(), l.secret_names().count());
        for port in [0, 80, 8080, 15006] {
            for ip in [std::net::Ipv4Addr::new(10, 96, 0, 10).into(), std::net::Ipv6Addr::LOCALHOST.into()] {
                let dest = std::net::SocketAddr::new(ip, port);
                for t in [TransportProtocol::RawBuffer, TransportProtocol::Tls] {
                    let sni = Some("outbound_.80_._.app.ns.svc.cluster.local");
                    let _ = l.select_chain(dest, sni, t, &["istio-http/1.1"]);
                    let _ = l.select_chain(dest, None, t, &[]);
                }
            }
        }
        dump(&l);
    }
}

fn check_routes(data: &[u8]) {
    let Ok(rc) = RouteConfig::from_any(&any("envoy.config.route.v3.RouteConfiguration", data)) else { return };
    let _ = rc.cluster_names().count();
    let mut headers = HeaderMap::new();
    headers.insert("x-user", hyper::header::HeaderValue::from_static("jason"));
    headers.append("x-user", hyper::header::HeaderValue::from_static("admin"));
    for (authority, path) in [("app.ns.svc.cluster.local:80", "/api/v1/items/7?q=1"), ("APP", "/"), ("[::1]:80", "")] {
        let req = RequestHead { authority, path, method: &Method::GET, headers: &headers, scheme: "http" };
        if let Some(route) = select_route(&rc, &req)
            && let RouteAction::Forward(f) = &route.action
        {
            let _ = pick_cluster(&f.target);
        }
    }
    dump(&rc);
}

fn check_secret(data: &[u8]) {
    if let Ok((_, s)) = Secret::from_any(&any("envoy.extensions.transport_sockets.tls.v3.Secret", data)) {
        dump(&s);
    }
}

fuzz_target!(|data: &[u8]| {
    check_cluster(data);
    check_endpoints(data);
    check_listener(data);
    check_routes(data);
    check_secret(data);
});
