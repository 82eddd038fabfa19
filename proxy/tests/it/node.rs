//! The node proxy in process (`node::pods::Pods`, as its ZDS session drives
//! it), with the test's own network namespace handed over as the pod's (so
//! its listeners are on loopback) and a CA in process: the drain on SIGTERM
//! and on a pod's removal, the TCP metrics with ztunnel's labels, and L4
//! authorization decided on the wire. Entering a namespace and marking
//! sockets needs root; without it the tests say so and do nothing.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use meshperf_proxy::hbone::{ConnectRequest, HboneConfig, HboneStream, PlainSockets, Pool};
use meshperf_proxy::identity::{self, SecretManager};
use meshperf_proxy::node::inpod::{Netns, PodRegistry};
use meshperf_proxy::node::pods::{InPodPorts, Pod, PodDraining, Pods};
use meshperf_proxy::node::rbac::Policy;
use meshperf_proxy::node::state::{Port, Service, Tunnel, Workload};
use meshperf_proxy::node::traffic::NodeContext;
use meshperf_proxy::node::{WorkloadSnapshot, WorkloadState};
use meshperf_proxy::proto::security as authz;
use meshperf_proxy::proto::zds;
use meshperf_proxy::proxy::drain::{self, Drain, DrainWatch};
use meshperf_proxy::telemetry::{AccessLogOptions, AccessLogSink, Telemetry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::ca::{RunningCa, TRUST_DOMAIN, id, start_ca};
use crate::support::{WAIT, eventually, tcp_echo};

const WEB: &str = "Kubernetes//Pod/shop/web-1";

/// One node proxy serving pod `web-1` (identity `shop/web`), a client pool
/// with identity `shop/cart` and an echo server the pod's inbound reaches.
struct Node {
    _ca: RunningCa,
    pods: Arc<Pods>,
    drain: Option<Drain>,
    drain_watch: DrainWatch,
    state: Arc<WorkloadState>,
    telemetry: Arc<Telemetry>,
    client: Pool,
    echo: std::net::SocketAddr,
}

fn own_netns() -> Netns {
    Netns::new(OwnedFd::from(std::fs::File::open("/proc/self/ns/net").unwrap()))
}

fn info(name: &str, sa: &str) -> zds::WorkloadInfo {
    zds::WorkloadInfo { name: name.into(), namespace: "shop".into(), service_account: sa.into() }
}

/// None (and a line saying why) when not root.
async fn node(name: &str, period: Duration) -> Option<Node> {
    if std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) != 0 {
        eprintln!("skipped: entering a network namespace and marking sockets need root");
        return None;
    }
    let ca = start_ca(name, identity::DEFAULT_CERTIFICATE_TTL, &[]).await;
    let secrets: Arc<SecretManager> = ca.secrets();
    let telemetry = Arc::new(
        Telemetry::new(AccessLogOptions { enabled: false, sink: AccessLogSink::Stdout, capacity: 16 }).unwrap(),
    );
    let state = Arc::new(WorkloadState::new());
    let ctx = Arc::new(NodeContext {
        state: state.clone(),
        pool: Pool::new(secrets.clone(), HboneConfig::default()),
        secrets,
        hbone: HboneConfig::default(),
        telemetry: telemetry.clone(),
        trust_domain: TRUST_DOMAIN.into(),
    });
    let (drain, drain_watch) = drain::channel();
    let ports = InPodPorts { outbound: 0, inbound_plaintext: 0, hbone: 0 };
    let (pods, _synced) = Pods::new(ctx, ports, PodDraining { node: drain_watch.clone(), period });
    pods.add(WEB, Some(info("web-1", "web")), own_netns()).expect("web-1's listeners open");
    Some(Node {
        client: Pool::new(ca.secrets(), HboneConfig::default()),
        _ca: ca,
        pods,
        drain: Some(drain),
        drain_watch,
        state,
        telemetry,
        echo: tcp_echo().await,
    })
}

impl Node {
    fn web(&self) -> Arc<Pod> {
        self.pods.get(WEB).expect("web-1 is served")
    }

    /// The pod's HBONE listener on loopback.
    fn hbone(&self) -> std::net::SocketAddr {
        (std::net::Ipv4Addr::LOCALHOST, self.web().hbone.port()).into()
    }

    /// A CONNECT stream from `cart` to the echo server through web-1's 15008.
    async fn connect(&self) -> Result<HboneStream, meshperf_proxy::hbone::Error> {
        self.connect_from("127.0.0.1:40000".parse().unwrap()).await
    }

    /// The same, saying the connection comes from `source` (`forwarded`).
    async fn connect_from(&self, source: std::net::SocketAddr) -> Result<HboneStream, meshperf_proxy::hbone::Error> {
        self.client
            .connect(ConnectRequest {
                source: id("cart"),
                destination_identity: id("web").into(),
                peer: self.hbone(),
                authority: self.echo,
                source_address: source,
                socket: Arc::new(PlainSockets),
                source_pod: Arc::from("Kubernetes//Pod/shop/cart-1"),
            })
            .await
    }
}

async fn echoes<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(s: &mut S, msg: &[u8]) -> bool {
    let mut got = vec![0u8; msg.len()];
    s.write_all(msg).await.is_ok() && s.read_exact(&mut got).await.is_ok() && got == msg
}

/// True once the peer has closed `s` (EOF or an error).
async fn closed<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(WAIT, s.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_every_listener_and_the_open_stream_finishes() {
    let Some(mut n) = node("node-drain-sigterm", Duration::from_secs(3600)).await else { return };
    let mut stream = n.connect().await.expect("a stream through web-1");
    assert!(echoes(&mut stream, b"before").await);
    let web = n.web();

    let drained = tokio::spawn(n.drain.take().unwrap().drain(Duration::from_secs(3600)));
    tokio::time::timeout(WAIT, n.drain_watch.listeners_closed()).await.expect("listeners closed");
    for port in [web.hbone.port(), web.outbound.port(), web.inbound_plaintext.port()] {
        assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err(), "port {port} refuses new connections");
    }
    // GOAWAY: no new stream on the open HBONE connection either.
    eventually("a new stream refused", WAIT, async || n.connect().await.err()).await;
    let err = n.pods.add("Kubernetes//Pod/shop/late-1", Some(info("late-1", "late")), own_netns()).unwrap_err();
    assert!(err.contains("draining"), "{err}");
    assert!(echoes(&mut stream, b"during").await, "the open stream carries bytes through the drain");
    assert!(!drained.is_finished(), "the open stream holds the drain");

    stream.shutdown().await.unwrap();
    assert!(closed(&mut stream).await, "the echo's FIN comes back");
    drop(stream);
    let report = tokio::time::timeout(WAIT, drained).await.expect("the drain ends with the last connection").unwrap();
    assert_eq!((report.open_at_start, report.closed_at_deadline), (1, 0), "{report:?}");
    assert_eq!(n.drain_watch.open_connections(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_pod_drains_its_connections_then_closes_them() {
    let period = Duration::from_millis(500);
    let Some(n) = node("node-drain-del", period).await else { return };
    let mut stream = n.connect().await.expect("a stream through web-1");
    assert!(echoes(&mut stream, b"before").await);
    let hbone = n.hbone();

    n.pods.remove(WEB);
    assert!(n.pods.get(WEB).is_none());
    eventually("web-1's listener closed", WAIT, async || TcpStream::connect(hbone).await.err()).await;
    assert!(echoes(&mut stream, b"during").await, "the open stream runs on through the pod's drain");
    assert!(closed(&mut stream).await, "closed when the pod's drain period ended");
    assert!(!n.drain_watch.is_draining(), "the node itself is not draining");
    eventually("no connection left", WAIT, async || (n.drain_watch.open_connections() == 0).then_some(())).await;
}

fn workload(name: &str, ip: [u8; 4], sa: &str, canonical: &str, services: &[(&str, u16)]) -> Workload {
    Workload {
        uid: format!("Kubernetes//Pod/shop/{name}"),
        name: name.into(),
        namespace: "shop".into(),
        addresses: vec![ip.into()],
        trust_domain: TRUST_DOMAIN.into(),
        service_account: sa.into(),
        tunnel: Tunnel::Hbone,
        waypoint: None,
        node: "node-a".into(),
        canonical_name: canonical.into(),
        canonical_revision: "v2".into(),
        workload_name: canonical.into(),
        cluster_id: "Kubernetes".into(),
        services: services
            .iter()
            .map(|(key, port)| (key.to_string(), vec![Port { service_port: 80, target_port: *port }]))
            .collect(),
        authorization_policies: vec![],
        healthy: true,
    }
}

/// The two workloads the tests' streams run between: web-1 (the pod the
/// node serves, its app the echo server) and cart-1 (the client).
fn web_and_cart(n: &Node) -> WorkloadSnapshot {
    let mut snap = WorkloadSnapshot::default();
    snap.insert_workload(workload(
        "web-1",
        [127, 0, 0, 1],
        "web",
        "web",
        &[("shop/web.shop.svc.cluster.local", n.echo.port())],
    ));
    snap.insert_workload(workload("cart-1", [127, 0, 0, 2], "cart", "cart", &[]));
    snap
}

/// The lines of the exposition that start with `metric{` and hold `needle`.
fn series(t: &Telemetry, metric: &str, needle: &str) -> Vec<String> {
    let mut out = String::new();
    t.encode(&mut out);
    out.lines().filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(needle)).map(String::from).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_metrics_carry_ztunnel_labels_from_workload_discovery() {
    let Some(n) = node("node-metrics", Duration::from_secs(1)).await else { return };
    let mut snap = web_and_cart(&n);
    snap.insert_service(Service {
        name: "web".into(),
        namespace: "shop".into(),
        hostname: "web.shop.svc.cluster.local".into(),
        vips: vec![[10, 96, 0, 1].into()],
        ports: vec![Port { service_port: 80, target_port: n.echo.port() }],
        waypoint: None,
    });
    snap.reindex();
    n.state.publish(snap);

    let mut stream = n.connect_from("127.0.0.2:40000".parse().unwrap()).await.expect("a stream through web-1");
    assert!(echoes(&mut stream, b"hello").await);
    stream.shutdown().await.unwrap();
    assert!(closed(&mut stream).await);
    drop(stream);

    let labels = "reporter=\"destination\",source_workload=\"cart\",source_canonical_service=\"cart\",\
source_canonical_revision=\"v2\",source_workload_namespace=\"shop\",\
source_principal=\"spiffe://cluster.local/ns/shop/sa/cart\",source_app=\"cart\",source_version=\"v2\",\
source_cluster=\"Kubernetes\",destination_service=\"web.shop.svc.cluster.local\",\
destination_service_namespace=\"shop\",destination_service_name=\"web\",destination_workload=\"web\",\
destination_canonical_service=\"web\",destination_canonical_revision=\"v2\",destination_workload_namespace=\"shop\",\
destination_principal=\"spiffe://cluster.local/ns/shop/sa/web\",destination_app=\"web\",destination_version=\"v2\",\
destination_cluster=\"Kubernetes\",request_protocol=\"tcp\",response_flags=\"-\",\
connection_security_policy=\"mutual_tls\",source_region=\"unknown\",source_zone=\"unknown\",\
destination_region=\"unknown\",destination_zone=\"unknown\"";
    let closed_line = format!("istio_tcp_connections_closed_total{{{labels}}} 1");
    eventually("the connection counted as closed", WAIT, async || {
        series(&n.telemetry, "istio_tcp_connections_closed_total", "").contains(&closed_line).then_some(())
    })
    .await;
    assert_eq!(
        series(&n.telemetry, "istio_tcp_connections_opened_total", ""),
        [format!("istio_tcp_connections_opened_total{{{labels}}} 1")]
    );
    assert_eq!(
        series(&n.telemetry, "istio_tcp_received_bytes_total", ""),
        [format!("istio_tcp_received_bytes_total{{{labels}}} 5")]
    );
    assert_eq!(
        series(&n.telemetry, "istio_tcp_sent_bytes_total", ""),
        [format!("istio_tcp_sent_bytes_total{{{labels}}} 5")]
    );
    assert!(series(&n.telemetry, "istio_tcp_connections_failed_total", "").is_empty());

    // An app that does not answer: 503 to the client; opened, then closed
    // and failed with ztunnel's CONNECT flag.
    let (gone, socket) = crate::support::closed_port();
    let mut web = (*n.state.snapshot()).clone();
    let uid = "Kubernetes//Pod/shop/web-1";
    let mut w = (*web.workloads[uid]).clone();
    w.services.clear();
    web.insert_workload(w);
    web.reindex();
    n.state.publish(web);
    let err = n
        .client
        .connect(ConnectRequest {
            source: id("cart"),
            destination_identity: id("web").into(),
            peer: n.hbone(),
            authority: gone,
            source_address: "127.0.0.2:40001".parse().unwrap(),
            socket: Arc::new(PlainSockets),
            source_pod: Arc::from("Kubernetes//Pod/shop/cart-1"),
        })
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("503"), "{err}");
    drop(socket);
    let failed = series(&n.telemetry, "istio_tcp_connections_failed_total", "response_flags=\"CONNECT\"");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].contains("destination_service=\"unknown\"") && failed[0].ends_with(" 1"), "{failed:?}");
    let closed_connect = series(&n.telemetry, "istio_tcp_connections_closed_total", "response_flags=\"CONNECT\"");
    assert_eq!(closed_connect.len(), 1, "{closed_connect:?}");
}

/// A namespace-wide policy in `shop` of one rule matching these principals.
fn principals_policy(name: &str, action: authz::Action, principals: &[&str]) -> Policy {
    let exact =
        |p: &&str| authz::StringMatch { match_type: Some(authz::string_match::MatchType::Exact(p.to_string())) };
    Policy::from_proto(authz::Authorization {
        name: name.into(),
        namespace: "shop".into(),
        scope: authz::Scope::Namespace as i32,
        action: action as i32,
        groups: vec![authz::Group {
            rules: vec![authz::Rules {
                matches: vec![authz::Match {
                    principals: principals.iter().map(exact).collect(),
                    ..Default::default()
                }],
            }],
        }],
        ..Default::default()
    })
    .expect("a valid policy")
}

/// L4 authorization on the wire: with no policy cart's stream reaches the
/// app; a DENY naming cart's principal answers 401 and the app is never
/// dialled; an ALLOW naming another principal denies cart too (some ALLOW
/// exists, none matches); an ALLOW naming cart lets it through again. Each
/// decision is the destination pod's policies at the time of the CONNECT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_is_decided_on_each_hbone_stream() {
    let Some(n) = node("node-authz", Duration::from_secs(1)).await else { return };
    let publish = |policies: Vec<Policy>| {
        let mut snap = web_and_cart(&n);
        for p in policies {
            snap.insert_policy(p);
        }
        snap.reindex();
        n.state.publish(snap);
    };
    // Principals as Istio writes them in policies: the SPIFFE id without
    // its scheme.
    let cart = "cluster.local/ns/shop/sa/cart";

    for (what, policies, allowed) in [
        ("no policy", vec![], true),
        ("DENY cart", vec![principals_policy("deny-cart", authz::Action::Deny, &[cart])], false),
        (
            "ALLOW only batch",
            vec![principals_policy("allow-batch", authz::Action::Allow, &["cluster.local/ns/shop/sa/batch"])],
            false,
        ),
        ("ALLOW cart", vec![principals_policy("allow-cart", authz::Action::Allow, &[cart])], true),
    ] {
        publish(policies);
        match n.connect_from("127.0.0.2:40000".parse().unwrap()).await {
            Ok(mut stream) => {
                assert!(allowed, "{what}: the stream was let through");
                assert!(echoes(&mut stream, b"hello").await, "{what}: no echo");
            }
            Err(e) => {
                assert!(!allowed, "{what}: refused: {e}");
                assert!(e.to_string().contains("401"), "{what}: {e}");
            }
        }
    }
    let denied = series(&n.telemetry, "istio_tcp_connections_failed_total", "response_flags=\"DENY\"");
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert!(denied[0].ends_with(" 2"), "two denied streams counted: {denied:?}");
}
