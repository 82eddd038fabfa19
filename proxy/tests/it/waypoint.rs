//! The waypoint role: its configuration (the contract's resources, built in
//! `support::waypoint`) converted into the proxy's model, and refused where
//! it asks for what the proxy does not implement; and the whole path in
//! process, configured over a real ADS stream: a client's HBONE stream to
//! the waypoint, L7 routing there, HBONE out to a destination node (an
//! `hbone::Server`) and its workload, with the waypoint's reports and
//! Istio metrics.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3 as cv3;
use envoy_types::pb::envoy::config::listener::v3 as lv3;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3 as tcp;
use envoy_types::pb::google::protobuf::Any;
use http_body_util::Empty;
use hyper::Request;
use hyper_util::rt::TokioIo;
use meshperf_proxy::config::NodeIdentity;
use meshperf_proxy::hbone::{
    self, ConnectRequest, ExpectedPeer, HboneConfig, HboneStream, InboundDecision, InboundHandler, InboundRequest,
    PlainSockets, Pool, Refusal, Server,
};
use meshperf_proxy::identity::{DEFAULT_CERTIFICATE_TTL, Identity};
use meshperf_proxy::proxy::Reporter;
use meshperf_proxy::state::{
    Cluster, ClusterEndpoints, ClusterTarget, DiscoveryType, EndpointAddress, Handler, Listener, ListenerKind,
    PathMatch, RouteAction, RouteSource, TransportProtocol, Tunnel, UpstreamProtocol, UpstreamTransport,
};
use meshperf_proxy::telemetry::{AccessLogOptions, Observer, Peer, Telemetry};
use meshperf_proxy::xds::ResourceType;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::ads::{self, AdsServer, Resources};
use crate::support::ca::{CA_HOSTNAME, RunningCa, id, start_ca};
use crate::support::envoy::any;
use crate::support::process::{TestDir, free_loopback_port, start_proxy, wait_ready};
use crate::support::waypoint::{self as wp, ServicePort};
use crate::support::{Reply, WAIT, eventually, http, running, tcp_echo, upstream};

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

/// What the upstream node proxy (an `hbone::Server` in the test) saw.
#[derive(Default)]
struct UpstreamNode {
    /// Each CONNECT: the waypoint's identity and the authority.
    streams: Mutex<Vec<(Identity, SocketAddr)>>,
}

impl InboundHandler for UpstreamNode {
    fn handle(&self, request: &InboundRequest) -> Pin<Box<dyn Future<Output = InboundDecision> + Send + '_>> {
        self.streams.lock().unwrap().push((request.peer_identity.clone(), request.authority));
        let authority = request.authority;
        Box::pin(async move {
            match TcpStream::connect(authority).await {
                Ok(s) => InboundDecision::Forward(Box::new(s)),
                Err(_) => InboundDecision::Refuse(Refusal::UpstreamUnavailable),
            }
        })
    }
}

/// An HBONE listener on 127.0.0.1:0 (a destination's node proxy) handing
/// each stream to its authority; returns its address and its count of
/// accepted connections.
async fn upstream_node(ca: &RunningCa, node: Arc<UpstreamNode>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Arc::new(Server::new(ca.secrets(), id("reviews"), HboneConfig::default()));
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let (server, node) = (server.clone(), node.clone());
            tokio::spawn(async move { server.serve(tcp, node, std::future::pending()).await });
        }
    });
    (addr, accepted)
}

/// The contract's resources for `reviews` (subsets v1 and v2 at `v1`, `v2`;
/// end-user jason to v2, everyone else to v1) and `db` (TCP, to `db_at`),
/// HBONE out to `hbone_port`, and SDS's secrets for the waypoint.
fn waypoint_resources(ca: &RunningCa, v1: SocketAddr, v2: SocketAddr, db_at: SocketAddr, hbone_port: u16) -> Resources {
    let reviews_routes = vec![
        wp::header_route("end-user", "jason", &REVIEWS.cluster("v2")),
        wp::route_to(Default::default(), &REVIEWS.cluster("v1")),
    ];
    let listeners = vec![
        ("connect_terminate".to_string(), wp::connect_terminate(dst("0.0.0.0:15008"))),
        ("main_internal".to_string(), wp::main_internal(&[(REVIEWS, reviews_routes), (DB, vec![])])),
        ("connect_originate".to_string(), wp::connect_originate()),
    ];
    let services = [
        (REVIEWS.cluster("v1"), vec![v1]),
        (REVIEWS.cluster("v2"), vec![v2]),
        (REVIEWS.cluster(""), vec![v1, v2]),
        (DB.cluster(""), vec![db_at]),
    ];
    let mut clusters = vec![
        ("main_internal".to_string(), wp::main_internal_cluster()),
        ("connect_originate".to_string(), wp::connect_originate_cluster(hbone_port)),
    ];
    clusters.extend(services.iter().map(|(name, _)| (name.clone(), wp::service_cluster(name))));
    let endpoints = services.iter().map(|(name, at)| (name.clone(), wp::service_endpoints(name, at))).collect();
    Resources::from([
        (ResourceType::Listener, listeners),
        (ResourceType::Cluster, clusters),
        (ResourceType::Endpoint, endpoints),
        (ResourceType::Secret, ca.sds_resources(&id("waypoint"))),
    ])
}

/// A waypoint pod's identity, as the proxy sends it to the control plane.
fn waypoint_node() -> NodeIdentity {
    let mut node =
        running::node("waypoint", "shop", "waypoint", &[("gateway.networking.k8s.io/gateway-name", "waypoint")]);
    node.id = "waypoint~127.0.0.1~waypoint-1.shop~shop.svc.cluster.local".into();
    node
}

/// One HBONE stream from `cart` to the waypoint with `authority`, as a
/// client's node proxy opens it.
async fn hbone_to_waypoint(
    pool: &Pool,
    waypoint: SocketAddr,
    authority: SocketAddr,
) -> Result<HboneStream, hbone::Error> {
    pool.connect(ConnectRequest {
        source: id("cart"),
        destination_identity: ExpectedPeer::Exactly(id("waypoint")),
        peer: waypoint,
        authority,
        source_address: "10.1.0.3:40000".parse().unwrap(),
        socket: Arc::new(PlainSockets),
        source_pod: Arc::from("Kubernetes//Pod/shop/cart-1"),
    })
    .await
}

async fn get_through(stream: HboneStream, headers: &[(&str, &str)]) -> Reply {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut req = Request::get("/ratings").header("host", "reviews.shop.svc.cluster.local:9080");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = tokio::time::timeout(WAIT, sender.send_request(req.body(Empty::<Bytes>::new()).unwrap()))
        .await
        .expect("a response in time")
        .expect("a response");
    Reply::read(resp).await
}

/// A waypoint configured over ADS, the workloads behind it (`reviews` v1
/// and v2 over HTTP, `db` over TCP) reached through their node (an
/// `hbone::Server`), the waypoint's Istio metrics, and a client's HBONE pool.
struct WaypointMesh {
    ca: RunningCa,
    xds: running::XdsProxy,
    waypoint: SocketAddr,
    node: Arc<UpstreamNode>,
    node_connections: Arc<AtomicUsize>,
    telemetry: Arc<Telemetry>,
    client: Pool,
    v1: SocketAddr,
    v2: SocketAddr,
}

async fn waypoint_mesh(name: &str) -> WaypointMesh {
    let ca = start_ca(name, DEFAULT_CERTIFICATE_TTL, &[]).await;
    let (v1, _) = upstream("v1").await;
    let (v2, _) = upstream("v2").await;
    let db = tcp_echo().await;
    let node = Arc::new(UpstreamNode::default());
    let (node_addr, node_connections) = upstream_node(&ca, node.clone()).await;
    let telemetry = Arc::new(Telemetry::new(AccessLogOptions::default()).unwrap());
    let observer = Observer::new(telemetry.clone(), Peer::local(&running::config()));
    // The contract over a real ADS stream: accepted (no NACK) and complete.
    let xds = running::start_with_xds_as(
        waypoint_resources(&ca, v1, v2, db, node_addr.port()),
        waypoint_node(),
        vec![running::named("connect_terminate", 15008)],
        Some(Arc::new(observer)),
    )
    .await;
    let waypoint = xds.proxy.addrs[0];
    let client = Pool::new(ca.secrets(), HboneConfig::default());
    WaypointMesh { ca, xds, waypoint, node, node_connections, telemetry, client, v1, v2 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hbone_in_l7_routing_and_hbone_out_through_the_waypoint() {
    let WaypointMesh { ca: _ca, xds, waypoint, node, node_connections, telemetry, client, v1, v2 } =
        waypoint_mesh("waypoint-e2e").await;
    let proxy = &xds.proxy;
    let vip = dst("10.96.0.10:9080");

    // HTTP: routed by the VirtualService's header match, each to its subset.
    let jason = get_through(hbone_to_waypoint(&client, waypoint, vip).await.unwrap(), &[("end-user", "jason")]).await;
    assert_eq!((jason.status, jason.upstream.as_str(), jason.seen_path.as_str()), (200, "v2", "/ratings"));
    let anyone = get_through(hbone_to_waypoint(&client, waypoint, vip).await.unwrap(), &[]).await;
    assert_eq!((anyone.status, anyone.upstream.as_str()), (200, "v1"));

    // Out: HBONE to the workload's node with the workload's address as
    // authority, the waypoint's SDS identity presented; one stream per
    // upstream HTTP connection, all on one pooled HBONE connection.
    let streams = node.streams.lock().unwrap().clone();
    assert_eq!(streams, vec![(id("waypoint"), v2), (id("waypoint"), v1)]);
    assert_eq!(node_connections.load(Ordering::SeqCst), 1, "HBONE connections are pooled");
    // A later request to v1 reuses the idle upstream connection: its stream.
    let again = get_through(hbone_to_waypoint(&client, waypoint, vip).await.unwrap(), &[]).await;
    assert_eq!((again.status, again.upstream.as_str()), (200, "v1"));
    assert_eq!(node.streams.lock().unwrap().len(), 2, "the HTTP pool reused its HBONE stream");

    let report = proxy.recorder.request_with(|r| r.cluster.as_deref() == Some(&REVIEWS.cluster("v2"))).await;
    assert_eq!(report.reporter, Reporter::Waypoint);
    assert_eq!(&*report.listener, "main_internal");
    assert_eq!(report.original_dst, vip);
    assert_eq!(report.downstream_peer, dst("10.1.0.3:40000"), "the client, from forwarded: for=");
    assert_eq!(report.peer_principal.as_deref(), Some("spiffe://cluster.local/ns/shop/sa/cart"));
    assert_eq!(report.upstream_principal.as_deref(), Some("spiffe://cluster.local/ns/shop/sa/reviews"));
    // The telemetry hears of a request before the recorder does (`Both`).
    eventually("three reports", WAIT, async || (proxy.recorder.requests.lock().unwrap().len() == 3).then_some(()))
        .await;
    let mut metrics = String::new();
    telemetry.encode(&mut metrics);
    let waypoint_requests: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("istio_requests_total{") && l.contains("reporter=\"waypoint\""))
        .collect();
    assert_eq!(waypoint_requests.len(), 1, "one series for the three requests:\n{metrics}");
    let series = waypoint_requests[0];
    for label in [
        "source_principal=\"spiffe://cluster.local/ns/shop/sa/cart\"",
        "destination_principal=\"spiffe://cluster.local/ns/shop/sa/reviews\"",
        "destination_service=\"reviews.shop.svc.cluster.local\"",
        "response_code=\"200\"",
        "connection_security_policy=\"mutual_tls\"",
    ] {
        assert!(series.contains(label), "{label} in {series}");
    }
    assert!(series.ends_with(" 3"), "{series}");

    // TCP: the db chain's tcp_proxy, through the same tunnel.
    let mut stream = hbone_to_waypoint(&client, waypoint, dst("10.96.0.11:5432")).await.unwrap();
    stream.write_all(b"select 1").await.unwrap();
    let mut echoed = [0u8; 8];
    tokio::time::timeout(WAIT, stream.read_exact(&mut echoed)).await.unwrap().unwrap();
    assert_eq!(&echoed, b"select 1");
    drop(stream);
    let tcp = proxy.recorder.tcp_reports(1).await;
    assert_eq!((tcp[0].reporter, tcp[0].cluster.as_str()), (Reporter::Waypoint, DB.cluster("").as_str()));
    assert_eq!(tcp[0].upstream_principal.as_deref(), Some("spiffe://cluster.local/ns/shop/sa/reviews"));

    // A destination the waypoint serves no chain for: 503 before the stream.
    let err = hbone_to_waypoint(&client, waypoint, dst("10.96.0.99:80")).await.err().expect("refused");
    assert!(matches!(err, hbone::Error::Status { status: 503, .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_ends_hbone_connections_with_goaway_not_at_the_deadline() {
    let WaypointMesh { ca: _ca, mut xds, waypoint, client, .. } = waypoint_mesh("waypoint-drain").await;
    let reply = get_through(hbone_to_waypoint(&client, waypoint, dst("10.96.0.10:9080")).await.unwrap(), &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(client.connection_count(), 1, "the client's HBONE connection stays open, idle");

    let period = std::time::Duration::from_secs(30);
    let report = tokio::time::timeout(WAIT, xds.proxy.start_drain(period)).await.expect("drained in time").unwrap();
    // The idle connection ends on the GOAWAY as soon as the drain starts, which
    // can be before the listeners have all closed and the drain counts what is
    // open: it is counted once at most. What the test is about is that none was
    // left for the deadline to close, well before the period ran out.
    assert!(report.open_at_start <= 1, "{report:?}");
    assert_eq!(report.closed_at_deadline, 0, "{report:?}");
    assert!(report.elapsed < period / 2, "{report:?}");
    eventually("the client sees the connection end", WAIT, async || (client.connection_count() == 0).then_some(()))
        .await;
}

/// Where the binary waypoint gets its `default` and `ROOTCA`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CertificateFrom {
    /// The control plane's SDS, as in the lab.
    Sds,
    /// The CA (`--ca-address`), as on Kubernetes, where the pilot serves no
    /// SDS secrets.
    Ca,
}

/// The real binary as a waypoint: `--proxy-type waypoint`, its config over
/// ADS, its two workers each with its own HBONE pool, and the metrics on
/// its admin endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_as_a_waypoint() {
    the_binary_as_a_waypoint("waypoint-binary", CertificateFrom::Sds).await;
}

/// As above, with the waypoint's certificate from the CA and no secret
/// over SDS: clients and the upstream node see the identity the CA signed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_as_a_waypoint_with_its_certificate_from_the_ca() {
    the_binary_as_a_waypoint("waypoint-binary-own-ca", CertificateFrom::Ca).await;
}

async fn the_binary_as_a_waypoint(name: &str, certificate: CertificateFrom) {
    let ca = start_ca(&format!("{name}-ca"), DEFAULT_CERTIFICATE_TTL, &[]).await;
    let (v1, _) = upstream("v1").await;
    let (v2, _) = upstream("v2").await;
    let node = Arc::new(UpstreamNode::default());
    let (node_addr, _) = upstream_node(&ca, node.clone()).await;
    let server = AdsServer::start().await;
    let (hbone_addr, admin) = (free_loopback_port(), free_loopback_port());
    let listen = format!("{hbone_addr}=connect_terminate");
    let dir = TestDir::new(name);
    let mut resources = waypoint_resources(&ca, v1, v2, tcp_echo().await, node_addr.port());
    let ca_root = ca.config.root_ca.display().to_string();
    let mut flags = vec!["--proxy-type", "waypoint", "--service-account", "waypoint", "--listen", &listen];
    if certificate == CertificateFrom::Ca {
        resources.remove(&ResourceType::Secret);
        flags.extend(["--ca-address", &ca.config.address, "--ca-root-ca", &ca_root]);
        flags.extend(["--alt-xds-hostname", CA_HOSTNAME]);
    }
    let _process = start_proxy(server.addr, admin, "waypoint-1", &flags, &dir.join("proxy.log"));
    let _ads = ads::serve(server, resources).await;
    wait_ready(admin, "the waypoint", WAIT).await;
    if certificate == CertificateFrom::Ca {
        // Its own identity, not impersonating (a node proxy's way).
        let asked: Vec<_> = ca.requests().into_iter().map(|r| (r.impersonated, r.csr_sans)).collect();
        let own = (None, vec![id("waypoint").to_string()]);
        assert!(!asked.is_empty() && asked.iter().all(|a| *a == own), "{asked:?}");
    }

    // Two clients, so two HBONE connections, which the proxy spreads over its workers.
    let vip = dst("10.96.0.10:9080");
    for client in [Pool::new(ca.secrets(), HboneConfig::default()), Pool::new(ca.secrets(), HboneConfig::default())] {
        let jason =
            get_through(hbone_to_waypoint(&client, hbone_addr, vip).await.unwrap(), &[("end-user", "jason")]).await;
        assert_eq!((jason.status, jason.upstream.as_str()), (200, "v2"));
        let anyone = get_through(hbone_to_waypoint(&client, hbone_addr, vip).await.unwrap(), &[]).await;
        assert_eq!((anyone.status, anyone.upstream.as_str()), (200, "v1"));
    }
    assert!(node.streams.lock().unwrap().iter().all(|(peer, _)| *peer == id("waypoint")));

    let series = eventually("the waypoint's request metric", WAIT, async || {
        let (_, metrics) = http(admin, "GET", "/stats/prometheus").await;
        metrics
            .lines()
            .find(|l| {
                l.starts_with("istio_requests_total{") && l.contains("reporter=\"waypoint\"") && l.ends_with(" 4")
            })
            .map(str::to_string)
    })
    .await;
    assert!(series.contains("source_principal=\"spiffe://cluster.local/ns/shop/sa/cart\""), "{series}");
    assert!(series.contains("destination_principal=\"spiffe://cluster.local/ns/shop/sa/reviews\""), "{series}");
}
