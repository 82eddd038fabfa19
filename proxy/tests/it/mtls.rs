//! Mesh mTLS in the data path, between two proxies on loopback: a client
//! sidecar (the cart workload's certificate) whose clusters use auto mTLS,
//! and a server sidecar (catalog's) whose inbound chains are STRICT or
//! PERMISSIVE. HTTP/1.1, HTTP/2 and TCP cross in mTLS; each side reports the
//! other's SPIFFE identity; plain text is refused by STRICT and accepted by
//! PERMISSIVE; new certificates apply without dropping open connections.

use std::net::SocketAddr;
use std::sync::Arc;

use meshperf_proxy::proxy::{RequestInfo, SecurityPolicy};
use meshperf_proxy::state::*;

use crate::support::certs::{CART, CATALOG, secrets};
use crate::support::*;

const HOST: &str = "catalog.shop.svc.cluster.local";
/// The destination ports the server sidecar's bindings stand for.
const HTTP_PORT: u16 = 8080;
const TCP_PORT: u16 = 9000;
const PERMISSIVE_PORT: u16 = 8081;

fn mesh_server_tls() -> DownstreamTls {
    DownstreamTls {
        certificate_secret: "default".into(),
        validation_secret: Some("ROOTCA".into()),
        require_client_certificate: true,
        alpn: vec!["h2".into(), "http/1.1".into()],
    }
}

fn on_tls(mut chain: FilterChain, transport: TransportProtocol) -> FilterChain {
    chain.matcher.transport_protocol = Some(transport);
    if transport == TransportProtocol::Tls {
        chain.tls = Some(mesh_server_tls());
    }
    chain
}

/// The catalog pod's sidecar: STRICT HTTP and TCP ports, a PERMISSIVE HTTP port.
fn server_snapshot(app: SocketAddr, echo: SocketAddr) -> Snapshot {
    let mut s = Snapshot { secrets: secrets("catalog"), ..Default::default() };
    let http = |port| http_chain(&format!("inbound|{port}||"), Some(port), routes_to("inbound", "inbound|app||"));
    let chains = vec![
        on_tls(http(HTTP_PORT), TransportProtocol::Tls),
        on_tls(tcp_chain("inbound|9000||", Some(TCP_PORT), "inbound|echo||"), TransportProtocol::Tls),
        on_tls(http(PERMISSIVE_PORT), TransportProtocol::Tls),
        on_tls(http(PERMISSIVE_PORT), TransportProtocol::RawBuffer),
    ];
    s.listeners
        .insert("virtualInbound".into(), listener("virtualInbound", ListenerKind::VirtualInbound, 15006, chains, None));
    s.clusters.insert("inbound|app||".into(), cluster("inbound|app||", &[app]));
    s.clusters.insert("inbound|echo||".into(), cluster("inbound|echo||", &[echo]));
    s
}

/// An auto-mTLS cluster whose one endpoint is a server sidecar binding with a sidecar (tlsMode istio).
fn mesh_cluster(name: &str, endpoint: SocketAddr, protocol: UpstreamProtocol) -> Arc<Cluster> {
    let mut c = Arc::try_unwrap(cluster(name, &[endpoint])).unwrap();
    c.transport = UpstreamTransport::Auto(UpstreamTls {
        sni: Some(format!("outbound_.80_._.{HOST}")),
        certificate_secret: Some("default".into()),
        validation_secret: Some("ROOTCA".into()),
        alpn: vec!["istio-peer-exchange".into(), "istio".into()],
        subject_alt_names: vec![CATALOG.into()],
    });
    c.protocol = protocol;
    if let Some(la) = c.load_assignment.as_mut() {
        la.endpoints[0].tls_mode = TlsMode::Istio;
    }
    Arc::new(c)
}

/// The cart pod's sidecar: port 80 (HTTP/1.1 upstream), 81 (HTTP/2 upstream),
/// 82 (PERMISSIVE port) and 9000 (TCP), each to the server sidecar.
fn client_snapshot(server: &[SocketAddr]) -> Snapshot {
    let mut s = Snapshot { secrets: secrets("cart"), ..Default::default() };
    let outbound = [
        (80, "outbound|80||catalog", server[0], UpstreamProtocol::Http1),
        (81, "outbound|81||catalog", server[0], UpstreamProtocol::Http2),
        (82, "outbound|82||catalog", server[2], UpstreamProtocol::Http1),
    ];
    for (port, name, endpoint, protocol) in outbound {
        let l = format!("0.0.0.0_{port}");
        let chain = http_chain(&l, None, routes_to(&l, name));
        s.listeners.insert(l.clone(), listener(&l, ListenerKind::Outbound, port, vec![chain], None));
        s.clusters.insert(name.into(), mesh_cluster(name, endpoint, protocol));
    }
    let chain = tcp_chain("tcp", None, "outbound|9000||catalog");
    s.listeners
        .insert("0.0.0.0_9000".into(), listener("0.0.0.0_9000", ListenerKind::Outbound, 9000, vec![chain], None));
    s.clusters.insert(
        "outbound|9000||catalog".into(),
        mesh_cluster("outbound|9000||catalog", server[1], UpstreamProtocol::Http1),
    );
    s
}

struct Mesh {
    server: Running,
    client: Running,
}

async fn mesh() -> Mesh {
    let (app, _) = upstream("catalog").await;
    let echo = tcp_echo().await;
    let server = start(
        server_snapshot(app, echo),
        vec![
            named("virtualInbound", HTTP_PORT),
            named("virtualInbound", TCP_PORT),
            named("virtualInbound", PERMISSIVE_PORT),
        ],
    )
    .await;
    let client = start(
        client_snapshot(&server.addrs),
        vec![named("0.0.0.0_80", 80), named("0.0.0.0_81", 81), named("0.0.0.0_82", 82), named("0.0.0.0_9000", 9000)],
    )
    .await;
    Mesh { server, client }
}

fn inbound(r: &Running, pred: impl Fn(&RequestInfo) -> bool + Send + 'static) -> impl Future<Output = RequestInfo> {
    r.recorder.request_with(move |i| i.reporter == meshperf_proxy::proxy::Reporter::Destination && pred(i))
}

#[tokio::test]
async fn http1_and_http2_cross_in_mtls_with_both_identities() {
    let m = mesh().await;
    for (addr, path) in [(m.client.addrs[0], "/h1"), (m.client.addrs[1], "/h2")] {
        let reply = get(&client(false), addr, HOST, path, &[]).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        assert_eq!(reply.upstream, "catalog");
        let seen = inbound(&m.server, move |i| i.method == "GET" && i.response_code == 200).await;
        assert_eq!(seen.security_policy, SecurityPolicy::MutualTls);
        assert_eq!(seen.peer_principal.as_deref(), Some(CART), "the server saw the client sidecar's identity");
        let sent = m.client.recorder.request_with(|i| i.response_code == 200).await;
        assert_eq!(sent.peer_principal.as_deref(), Some(CATALOG), "the client verified the server's identity");
    }
    let h2 = m.server.recorder.request_with(|i| i.protocol == meshperf_proxy::proxy::RequestProtocol::Http2).await;
    assert_eq!(h2.security_policy, SecurityPolicy::MutualTls, "HTTP/2 over mTLS (ALPN h2)");
}

#[tokio::test]
async fn tcp_crosses_in_mtls() {
    let m = mesh().await;
    let echoed = tcp_roundtrip(m.client.addrs[3], b"over mesh mtls").await.unwrap();
    assert_eq!(echoed, b"over mesh mtls");
    let seen = &m.server.recorder.tcp_reports(1).await[0];
    assert_eq!(seen.security_policy, SecurityPolicy::MutualTls);
    assert_eq!(seen.peer_principal.as_deref(), Some(CART));
    assert_eq!(seen.received_bytes, 14);
}

#[tokio::test]
async fn strict_refuses_plain_text_and_permissive_takes_both() {
    let m = mesh().await;
    // Straight to the STRICT port, in plain text: no chain matches, the connection is closed.
    let request = format!("GET / HTTP/1.1\r\nhost: {HOST}\r\n\r\n");
    let answer = tcp_roundtrip(m.server.addrs[0], request.as_bytes()).await.unwrap_or_default();
    assert!(answer.is_empty(), "STRICT answered plain text: {}", String::from_utf8_lossy(&answer));
    // PERMISSIVE: plain text is served (and reported as such)...
    let reply = get(&client(false), m.server.addrs[2], HOST, "/plain", &[]).await;
    assert_eq!(reply.status, 200);
    let seen = inbound(&m.server, |i| i.authority == HOST && i.security_policy == SecurityPolicy::None).await;
    assert!(seen.peer_principal.is_none());
    // ...and so is mTLS from a sidecar.
    assert_eq!(get(&client(false), m.client.addrs[2], HOST, "/mtls", &[]).await.status, 200);
    let seen = inbound(&m.server, |i| i.security_policy == SecurityPolicy::MutualTls).await;
    assert_eq!(seen.peer_principal.as_deref(), Some(CART));
}

#[tokio::test]
async fn new_certificates_apply_without_dropping_connections() {
    let m = mesh().await;
    let c = client(false);
    assert_eq!(get(&c, m.client.addrs[0], HOST, "/before", &[]).await.status, 200);
    let before = inbound(&m.server, |i| i.response_code == 200).await.downstream_peer;

    // SDS pushes new secrets to both sides (the cart workload gets its rotated certificate).
    let mut server = (*m.server.state.snapshot()).clone();
    server.secrets = secrets("catalog");
    m.server.state.publish(server);
    let mut client_snap = (*m.client.state.snapshot()).clone();
    client_snap.secrets = secrets("cart-rotated");
    m.client.state.publish(client_snap);

    // The pooled mTLS connection made with the old certificates carries on.
    assert_eq!(get(&c, m.client.addrs[0], HOST, "/after", &[]).await.status, 200);
    let after = m.server.recorder.request_with(|i| i.response_code == 200 && i.downstream_peer == before).await;
    assert_eq!(after.peer_principal.as_deref(), Some(CART));
    let count = m.server.recorder.requests.lock().unwrap().iter().filter(|i| i.downstream_peer == before).count();
    assert_eq!(count, 2, "both requests used the connection made before the rotation");

    // A new connection handshakes with the new certificate.
    assert_eq!(get(&c, m.client.addrs[1], HOST, "/new-connection", &[]).await.status, 200);
    let fresh = m.server.recorder.request_with(|i| i.downstream_peer != before).await;
    assert_eq!(fresh.peer_principal.as_deref(), Some(CART), "the rotated certificate has the same identity");
}
