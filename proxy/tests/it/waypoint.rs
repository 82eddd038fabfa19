//! The waypoint role: its configuration (the contract's resources, built in
//! `support::waypoint`) converted into the proxy's model, and refused where
//! it asks for what the proxy does not implement.

use std::net::SocketAddr;

use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::listener::v3 as lv3;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
use envoy_types::pb::google::protobuf::Any;
use meshperf_proxy::state::{
    Cluster, ClusterEndpoints, ClusterTarget, DiscoveryType, EndpointAddress, Handler, Listener, ListenerKind,
    PathMatch, RouteAction, RouteSource, TransportProtocol, Tunnel, UpstreamProtocol, UpstreamTransport,
};
use prost::Message;

use crate::support::envoy::any;
use crate::support::waypoint::{self as wp, ServicePort};

const REVIEWS: ServicePort =
    ServicePort { host: "reviews.shop.svc.cluster.local", vip: "10.96.0.10", port: 9080, http: true };
const DB: ServicePort = ServicePort { host: "db.shop.svc.cluster.local", vip: "10.96.0.11", port: 5432, http: false };

fn services() -> Vec<(ServicePort, Vec<envoy_types::pb::envoy::config::route::v3::Route>)> {
    vec![(REVIEWS, vec![wp::header_route("end-user", "jason", &REVIEWS.cluster("v2"))]), (DB, vec![])]
}

fn dst(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn connect_terminate_is_an_mtls_http2_chain_whose_connect_route_goes_to_main_internal() {
    let l = Listener::from_any(&wp::connect_terminate(dst("0.0.0.0:15008"))).unwrap();
    assert_eq!((l.kind, l.address), (ListenerKind::Bound, dst("0.0.0.0:15008")));
    let chain = &l.filter_chains[0];
    let tls = chain.tls.as_ref().expect("TLS terminated");
    assert!(tls.require_client_certificate);
    assert_eq!((tls.certificate_secret.as_str(), tls.validation_secret.as_deref()), ("default", Some("ROOTCA")));
    let Handler::Http(h) = &chain.handler else { panic!("not HTTP") };
    assert!(h.connect, "CONNECT accepted");
    let RouteSource::Inline(rc) = &h.routes else { panic!("routes not inline") };
    let route = &rc.virtual_hosts[0].routes[0];
    assert!(matches!(route.matcher.path, PathMatch::Connect));
    let RouteAction::Forward(f) = &route.action else { panic!("not forwarded") };
    assert!(f.terminate_connect);
    assert!(matches!(&f.target, ClusterTarget::Cluster(c) if c == "main_internal"));
}

#[test]
fn main_internal_chooses_its_chain_by_vip_and_port() {
    let l = Listener::from_any(&wp::main_internal(&services())).unwrap();
    assert_eq!(l.kind, ListenerKind::Internal);
    assert!(l.use_original_dst);
    let pick = |d: &str| l.select_chain(dst(d), None, TransportProtocol::RawBuffer, &[]).map(|c| c.name.clone());
    assert_eq!(pick("10.96.0.10:9080").as_deref(), Some("inbound-vip|9080|http|reviews.shop.svc.cluster.local"));
    assert_eq!(pick("10.96.0.11:5432").as_deref(), Some("inbound-vip|5432|tcp|db.shop.svc.cluster.local"));
    assert_eq!(pick("10.96.0.10:5432"), None, "the VIP of one service with the port of another");
    assert_eq!(pick("10.96.0.12:9080"), None, "a VIP the waypoint does not serve");
    let db = l.filter_chains.iter().find(|c| c.name.contains("|tcp|")).unwrap();
    assert!(matches!(&db.handler, Handler::Tcp(t) if t.tunnel.is_none()));
}

#[test]
fn connect_originate_tunnels_to_the_downstream_local_address() {
    let l = Listener::from_any(&wp::connect_originate()).unwrap();
    assert_eq!(l.kind, ListenerKind::Internal);
    let Handler::Tcp(t) = &l.filter_chains[0].handler else { panic!("not tcp_proxy") };
    assert_eq!(t.tunnel, Some(Tunnel::DownstreamLocalAddress));
    assert!(matches!(&t.target, ClusterTarget::Cluster(c) if c == "connect_originate"));
}

#[test]
fn clusters_reach_internal_listeners_and_the_tunnel_cluster_overrides_the_port() {
    let main = Cluster::from_any(&wp::main_internal_cluster()).unwrap();
    let endpoints = &main.load_assignment.as_ref().unwrap().endpoints;
    assert!(matches!(&endpoints[0].address, EndpointAddress::Internal { listener, .. } if listener == "main_internal"));

    let service = Cluster::from_any(&wp::service_cluster(&REVIEWS.cluster("v1"))).unwrap();
    assert_eq!(service.discovery, DiscoveryType::Eds);
    assert!(matches!(service.transport, UpstreamTransport::Plain), "internal_upstream over raw_buffer");
    let eds =
        ClusterEndpoints::from_any(&wp::service_endpoints(&REVIEWS.cluster("v1"), &[dst("10.1.0.5:8080")])).unwrap();
    assert_eq!(
        eds.endpoints[0].address,
        EndpointAddress::Internal {
            listener: "connect_originate".into(),
            endpoint_id: "10.1.0.5:8080".into(),
            destination: Some(dst("10.1.0.5:8080")),
        }
    );

    let originate = Cluster::from_any(&wp::connect_originate_cluster(15008)).unwrap();
    assert_eq!(originate.discovery, DiscoveryType::OriginalDst);
    assert_eq!(originate.original_dst_port, Some(15008));
    assert_eq!(originate.protocol, UpstreamProtocol::Http2);
    let UpstreamTransport::Tls(tls) = &originate.transport else { panic!("not TLS") };
    assert!(tls.subject_alt_names.is_empty(), "any identity of the trust domain");
    assert_eq!(tls.validation_secret.as_deref(), Some("ROOTCA"));
}

/// Re-encodes a resource after `edit`.
fn edited<M: Message + prost::Name + Default>(original: &Any, edit: impl FnOnce(&mut M)) -> Any {
    let mut m = M::decode(original.value.as_slice()).unwrap();
    edit(&mut m);
    any(&m)
}

#[test]
fn what_the_proxy_does_not_implement_is_refused_naming_the_field() {
    let other_host = edited::<lv3::Listener>(&wp::connect_originate(), |l| {
        let Some(lv3::filter::ConfigType::TypedConfig(cfg)) = &mut l.filter_chains[0].filters[0].config_type else {
            unreachable!()
        };
        let mut t = tcp::TcpProxy::decode(cfg.value.as_slice()).unwrap();
        t.tunneling_config.as_mut().unwrap().hostname = "%UPSTREAM_HOST%".into();
        *cfg = any(&t);
    });
    let err = Listener::from_any(&other_host).unwrap_err().to_string();
    assert!(err.contains("tunneling_config: hostname \"%UPSTREAM_HOST%\""), "{err}");

    let wide = edited::<lv3::Listener>(&wp::main_internal(&services()), |l| {
        l.filter_chains[0].filter_chain_match.as_mut().unwrap().prefix_ranges[0].prefix_len =
            crate::support::envoy::u32v(33);
    });
    let err = Listener::from_any(&wide).unwrap_err().to_string();
    assert!(err.contains("filter_chains[0]: filter_chain_match: prefix_ranges[0]: prefix_len 33"), "{err}");

    let header_lb = edited::<cv3::Cluster>(&wp::connect_originate_cluster(15008), |c| {
        let Some(cv3::cluster::LbConfig::OriginalDstLbConfig(o)) = &mut c.lb_config else { unreachable!() };
        o.use_http_header = true;
    });
    let err = Cluster::from_any(&header_lb).unwrap_err().to_string();
    assert!(err.contains("original_dst_lb_config: use_http_header"), "{err}");

    let addressed = edited::<lv3::Listener>(&wp::connect_originate(), |l| {
        l.address =
            lv3::Listener::decode(wp::connect_terminate(dst("0.0.0.0:15008")).value.as_slice()).unwrap().address;
    });
    let err = Listener::from_any(&addressed).unwrap_err().to_string();
    assert!(err.contains("an internal listener has no address"), "{err}");
}
