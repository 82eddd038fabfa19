//! HBONE and workload certificates on loopback: the node proxy's
//! `SecretManager` against a CA served in process over TLS (the generated
//! tonic server, signing with rcgen), and `hbone::Pool` -> `hbone::Server`
//! -> a TCP echo upstream. The last test asks the real `meshperf pilot`
//! (`MESHPERF_BIN`) for certificates.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use meshperf_proxy::hbone::{
    self, ConnectRequest, ExpectedPeer, HboneConfig, InboundDecision, InboundHandler, InboundRequest, PlainSockets,
    Pool, Refusal, Server, StreamOutcome,
};
use meshperf_proxy::identity::{self, CaClientConfig, Identity, SecretManager};
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::ca::{CA_HOSTNAME, RunningCa, id, start_ca};
use crate::support::process::TestDir;
use crate::support::{WAIT, closed_port, eventually, tcp_echo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_fetches_share_one_csr_and_the_chain_is_leaf_and_root() {
    let ca = start_ca("ca-concurrent", identity::DEFAULT_CERTIFICATE_TTL, &[]).await;
    let secrets = ca.secrets();
    let fetches: Vec<_> = (0..20)
        .map(|_| {
            let secrets = Arc::clone(&secrets);
            tokio::spawn(async move { secrets.fetch(&id("cart")).await })
        })
        .collect();
    let mut certs = Vec::new();
    for f in fetches {
        certs.push(f.await.unwrap().expect("a certificate for cart"));
    }
    assert!(certs.iter().all(|c| Arc::ptr_eq(c, &certs[0])), "every caller gets the one certificate");
    let requests = ca.requests();
    assert_eq!(requests.len(), 1, "one CSR for 20 concurrent first fetches: {requests:?}");
    assert_eq!(requests[0].impersonated.as_deref(), Some("spiffe://cluster.local/ns/shop/sa/cart"));
    assert_eq!(requests[0].csr_sans, ["spiffe://cluster.local/ns/shop/sa/cart"]);
    assert_eq!(requests[0].ttl, 24 * 60 * 60);

    let cert = &certs[0];
    assert_eq!(cert.identity(), &id("cart"));
    assert_eq!(cert.chain().len(), 1, "the leaf; the last certificate is the root");
    let root_der = rustls::pki_types::CertificateDer::from_pem_slice(ca.root_pem().as_bytes()).unwrap();
    assert_eq!(cert.root(), &root_der);
    assert_eq!(
        meshperf_proxy::tls::spiffe_id(&cert.chain()[0]).as_deref(),
        Some("spiffe://cluster.local/ns/shop/sa/cart")
    );

    // Another identity is another request; a cached one is not.
    secrets.fetch(&id("catalog")).await.unwrap();
    secrets.fetch(&id("cart")).await.unwrap();
    assert_eq!(ca.requests().len(), 2);
    assert_eq!(secrets.identities(), [id("cart"), id("catalog")]);
    // Forgotten: the next fetch asks again.
    secrets.forget(&id("cart"));
    assert_eq!(secrets.identities(), [id("catalog")]);
    let again = secrets.fetch(&id("cart")).await.unwrap();
    assert!(!Arc::ptr_eq(&again, cert));
    assert_eq!(ca.requests().len(), 3);
}

#[tokio::test]
async fn certificates_are_renewed_at_half_life() {
    let ca = start_ca("ca-renewal", Duration::from_secs(4), &[]).await;
    let secrets = ca.secrets();
    let first = secrets.fetch(&id("cart")).await.unwrap();
    // 4 s of life: renewed after about 2 s, in the background.
    let renewed = eventually("the certificate is renewed", WAIT, async || {
        let now = secrets.fetch(&id("cart")).await.unwrap();
        (!Arc::ptr_eq(&now, &first)).then_some(now)
    })
    .await;
    assert!(renewed.not_after() > first.not_after());
    assert_eq!(ca.requests().len(), 2);
}

#[tokio::test]
async fn a_refused_certificate_is_an_error_and_the_next_fetch_asks_again() {
    let ca =
        start_ca("ca-refused", identity::DEFAULT_CERTIFICATE_TTL, &["spiffe://cluster.local/ns/shop/sa/evil"]).await;
    let secrets = ca.secrets();
    let err = secrets.fetch(&id("evil")).await.unwrap_err();
    assert!(
        matches!(&err, identity::Error::CaRequest { status, .. } if status.code() == tonic::Code::PermissionDenied),
        "{err}"
    );
    assert!(secrets.fetch(&id("evil")).await.is_err());
    assert_eq!(ca.requests().len(), 2, "a failure is not cached");
}

/// A sidecar's own certificate: its token from the file (re-read for each
/// request), no impersonation, renewals followed, and a refusal retried.
#[tokio::test]
async fn a_sidecar_follows_its_own_certificate_with_its_token() {
    let ca = start_ca("ca-sidecar", Duration::from_secs(4), &["spiffe://cluster.local/ns/shop/sa/evil"]).await;
    let dir = TestDir::new("sidecar-token");
    let token = dir.join("istio-token");
    std::fs::write(&token, "first.token.jwt\n").unwrap();
    let config = CaClientConfig { token: Some(token.clone()), impersonate: false, ..ca.config.clone() };
    let secrets = Arc::new(SecretManager::new(config).unwrap());

    let issued: Arc<Mutex<Vec<Arc<identity::WorkloadCertificate>>>> = Arc::default();
    let follower = {
        let (secrets, issued) = (Arc::clone(&secrets), Arc::clone(&issued));
        tokio::spawn(async move { secrets.follow(&id("cart"), |c| issued.lock().unwrap().push(c)).await })
    };
    eventually("the first certificate", WAIT, async || (!issued.lock().unwrap().is_empty()).then_some(())).await;
    // The kubelet rotates the token: the renewal (at 2 s of 4) sends the new one.
    std::fs::write(&token, "second.token.jwt").unwrap();
    eventually("the renewal is followed", WAIT, async || (issued.lock().unwrap().len() >= 2).then_some(())).await;
    follower.abort();
    let requests = ca.requests();
    assert_eq!(requests[0].authorization.as_deref(), Some("Bearer first.token.jwt"));
    assert_eq!(requests[1].authorization.as_deref(), Some("Bearer second.token.jwt"));
    for r in &requests {
        assert_eq!(r.impersonated, None, "a sidecar asks for its own identity");
        assert_eq!(r.csr_sans, ["spiffe://cluster.local/ns/shop/sa/cart"]);
    }
    let issued = issued.lock().unwrap().clone();
    assert!(issued.iter().all(|c| c.identity() == &id("cart")));
    assert!(!Arc::ptr_eq(&issued[0], &issued[1]), "the renewal is a new certificate");

    // Refused: asked again (with backoff) rather than given up on.
    let evil_requests =
        || ca.requests().iter().filter(|r| r.csr_sans == ["spiffe://cluster.local/ns/shop/sa/evil"]).count();
    let refused = {
        let secrets = Arc::clone(&secrets);
        tokio::spawn(async move { secrets.follow(&id("evil"), |_| panic!("evil was refused")).await })
    };
    eventually("the refusal is retried", WAIT, async || (evil_requests() >= 2).then_some(())).await;
    refused.abort();

    // An unreadable token is a failed request, not a panic.
    std::fs::remove_file(&token).unwrap();
    secrets.forget(&id("cart"));
    let err = secrets.fetch(&id("cart")).await.unwrap_err();
    assert!(matches!(err, identity::Error::Token { .. }), "{err}");
}

#[test]
fn a_bad_ca_configuration_is_refused_up_front() {
    let config = CaClientConfig {
        address: "http://127.0.0.1:15012".into(),
        root_ca: "/nonexistent/root-cert.pem".into(),
        alt_hostname: None,
        ttl: identity::DEFAULT_CERTIFICATE_TTL,
        token: None,
        impersonate: true,
    };
    let err = SecretManager::new(config.clone()).err().expect("plain-text address");
    assert!(matches!(err, identity::Error::CaAddress { .. }), "{err}");
    let err = SecretManager::new(CaClientConfig { address: "https://127.0.0.1:15012".into(), ..config })
        .err()
        .expect("missing root");
    assert!(matches!(err, identity::Error::RootCa { .. }), "{err}");
}

/// What the test handler saw and decides: denies authorities on `denied`
/// ports, else connects to the authority (503 when that fails).
#[derive(Default)]
struct TestHandler {
    denied_port: Option<u16>,
    seen: Mutex<Vec<InboundRequest>>,
    finished: Mutex<Vec<(u64, u64)>>,
}

impl InboundHandler for TestHandler {
    fn handle(&self, request: &InboundRequest) -> std::pin::Pin<Box<dyn Future<Output = InboundDecision> + Send + '_>> {
        self.seen.lock().unwrap().push(request.clone());
        let authority = request.authority;
        Box::pin(async move {
            if Some(authority.port()) == self.denied_port {
                return InboundDecision::Refuse(Refusal::Denied);
            }
            match TcpStream::connect(authority).await {
                Ok(upstream) => InboundDecision::Forward(Box::new(upstream)),
                Err(_) => InboundDecision::Refuse(Refusal::UpstreamUnavailable),
            }
        })
    }

    fn finished(&self, _request: &InboundRequest, outcome: StreamOutcome) {
        self.finished.lock().unwrap().push((outcome.received, outcome.sent));
    }
}

/// An HBONE listener on 127.0.0.1:0 for `identity`, serving every accepted
/// connection; counts them.
struct RunningServer {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    /// Connections whose `serve` ended without error.
    ended: Arc<AtomicUsize>,
    handler: Arc<TestHandler>,
    errors: Arc<Mutex<Vec<String>>>,
}

async fn start_server(secrets: Arc<SecretManager>, identity: Identity, handler: TestHandler) -> RunningServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Arc::new(Server::new(secrets, identity, HboneConfig::default()));
    let handler = Arc::new(handler);
    let accepted = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let ended = Arc::new(AtomicUsize::new(0));
    let (h, a, e, o) = (Arc::clone(&handler), Arc::clone(&accepted), Arc::clone(&errors), Arc::clone(&ended));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            let (server, handler, errors, ended) =
                (Arc::clone(&server), Arc::clone(&h), Arc::clone(&e), Arc::clone(&o));
            tokio::spawn(async move {
                match server.serve(tcp, handler, std::future::pending()).await {
                    Ok(()) => ended.fetch_add(1, Ordering::SeqCst),
                    Err(err) => {
                        errors.lock().unwrap().push(err.to_string());
                        0
                    }
                };
            });
        }
    });
    RunningServer { addr, accepted, ended, handler, errors }
}

/// A CA, a listener of `listener`'s identity with `handler`, a pool for
/// clients (sharing the listener's certificate manager, as one node proxy
/// would) and an echo upstream.
struct Mesh {
    _ca: RunningCa,
    secrets: Arc<SecretManager>,
    server: RunningServer,
    pool: Pool,
    echo: SocketAddr,
}

async fn mesh(name: &str, listener: &str, handler: TestHandler) -> Mesh {
    mesh_with(name, listener, handler, HboneConfig::default()).await
}

async fn mesh_with(name: &str, listener: &str, handler: TestHandler, config: HboneConfig) -> Mesh {
    let ca = start_ca(name, identity::DEFAULT_CERTIFICATE_TTL, &[]).await;
    let secrets = ca.secrets();
    let server = start_server(Arc::clone(&secrets), id(listener), handler).await;
    let pool = Pool::new(secrets.clone(), config);
    Mesh { _ca: ca, secrets, server, pool, echo: tcp_echo().await }
}

fn connect_request(source: &str, destination: &str, peer: SocketAddr, authority: SocketAddr) -> ConnectRequest {
    ConnectRequest {
        source: id(source),
        destination_identity: id(destination).into(),
        peer,
        authority,
        source_address: "10.0.0.3:41234".parse().unwrap(),
        socket: Arc::new(PlainSockets),
        source_pod: Arc::from("Kubernetes//Pod/shop/cart-1"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_carries_bytes_both_ways_and_half_closes() {
    let Mesh { _ca, server, pool, echo, .. } = mesh("hbone-e2e", "catalog", TestHandler::default()).await;

    let mut stream = pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap();
    // More than a stream's window (4 MiB), so flow control has to turn.
    let payload: Vec<u8> = (0..6 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let (mut reader, mut writer) = tokio::io::split(&mut stream);
    let expected = payload.clone();
    let (written, echoed) = tokio::join!(
        async {
            writer.write_all(&payload).await.unwrap();
            // END_STREAM: the echo sees EOF, and only then closes its side.
            writer.shutdown().await.unwrap();
        },
        async {
            let mut got = Vec::new();
            reader.read_to_end(&mut got).await.unwrap();
            got
        }
    );
    let () = written;
    assert!(echoed == expected, "echoed {} bytes, sent {}", echoed.len(), expected.len());

    let seen = server.handler.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].peer_identity, id("cart"));
    assert_eq!(seen[0].authority, echo);
    assert_eq!(seen[0].forwarded_for, Some("10.0.0.3:41234".parse().unwrap()));
    assert_eq!(seen[0].local_address, server.addr);
    let finished = eventually("the server reports the stream", WAIT, async || {
        server.handler.finished.lock().unwrap().first().copied()
    })
    .await;
    assert_eq!(finished, (expected.len() as u64, expected.len() as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_streams_share_a_connection_and_the_101st_opens_another() {
    let Mesh { _ca, server, pool, echo, .. } = mesh("hbone-pool", "catalog", TestHandler::default()).await;

    let opens: Vec<_> = (0..100)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { pool.connect(connect_request("cart", "catalog", server.addr, echo)).await })
        })
        .collect();
    let mut streams = Vec::new();
    for open in opens {
        streams.push(open.await.unwrap().expect("a stream"));
    }
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1, "100 concurrent streams, one connection");
    assert_eq!(pool.connection_count(), 1);
    streams.push(pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap());
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2, "the 101st stream needs a second connection");
    assert_eq!(pool.connection_count(), 2);

    // Each stream is its own connection to the echo.
    for (i, s) in streams.iter_mut().enumerate().step_by(25) {
        let msg = format!("stream {i}");
        s.write_all(msg.as_bytes()).await.unwrap();
        let mut buf = vec![0; msg.len()];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, msg.as_bytes());
    }
    // A freed slot is reused: no third connection.
    streams.truncate(50);
    pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap();
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

/// On the wall clock (TLS and HTTP/2 over real sockets do not run on a
/// paused one), with a short idle time; the waits are for events, the one
/// sleep only gives a wrong close the time to happen.
#[tokio::test]
async fn connections_close_only_once_unused_for_the_idle_time() {
    let idle = Duration::from_millis(300);
    let config = HboneConfig { pool_idle_timeout: idle, ..HboneConfig::default() };
    let Mesh { _ca, server, pool, echo, .. } = mesh_with("hbone-idle", "catalog", TestHandler::default(), config).await;
    let mut stream = pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap();
    tokio::time::sleep(idle * 3).await;
    assert_eq!(pool.connection_count(), 1, "a connection with an open stream is not idle");
    stream.write_all(b"still here").await.unwrap();
    let mut buf = [0; 10];
    stream.read_exact(&mut buf).await.unwrap();

    drop(stream);
    eventually("the unused connection is closed", WAIT, async || (pool.connection_count() == 0).then_some(())).await;
    // Closed with GOAWAY: the server's side ends cleanly.
    eventually("the server's side ends", WAIT, async || (server.ended.load(Ordering::SeqCst) == 1).then_some(())).await;
    assert!(server.errors.lock().unwrap().is_empty(), "{:?}", server.errors.lock().unwrap());
    pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap();
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2, "a closed connection is not reused");
}

#[tokio::test]
async fn sources_and_pods_never_share_a_connection() {
    let Mesh { _ca, server, pool, echo, .. } = mesh("hbone-keys", "catalog", TestHandler::default()).await;

    let _cart = pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap();
    let _reviews = pool.connect(connect_request("reviews", "catalog", server.addr, echo)).await.unwrap();
    let other_pod = ConnectRequest {
        source_pod: Arc::from("Kubernetes//Pod/shop/cart-2"),
        ..connect_request("cart", "catalog", server.addr, echo)
    };
    let _cart2 = pool.connect(other_pod).await.unwrap();
    assert_eq!(server.accepted.load(Ordering::SeqCst), 3);
    let identities: Vec<Identity> =
        server.handler.seen.lock().unwrap().iter().map(|r| r.peer_identity.clone()).collect();
    assert_eq!(identities, [id("cart"), id("reviews"), id("cart")]);
    // The same key again: the first connection.
    let _again = pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap();
    assert_eq!(server.accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_peer_with_another_identity_is_refused() {
    // The listener is reviews', the client expects catalog.
    let Mesh { _ca, server, pool, echo, .. } = mesh("hbone-identity", "reviews", TestHandler::default()).await;
    let err = pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.err().unwrap();
    match &err {
        hbone::Error::PeerIdentity { expected, presented, .. } => {
            assert_eq!(expected, &ExpectedPeer::from(id("catalog")));
            assert_eq!(presented.as_deref(), Some("spiffe://cluster.local/ns/shop/sa/reviews"));
        }
        other => panic!("want a peer identity error, got {other}"),
    }
    assert!(server.handler.seen.lock().unwrap().is_empty(), "no stream was sent");
}

#[tokio::test]
async fn a_client_of_a_foreign_trust_domain_is_refused() {
    let Mesh { _ca, server, pool, echo, .. } = mesh("hbone-foreign", "catalog", TestHandler::default()).await;
    // Same root, another trust domain: signed, but not ours.
    let foreign = ConnectRequest {
        source: Identity::new("other.domain", "shop", "cart"),
        ..connect_request("cart", "catalog", server.addr, echo)
    };
    assert!(pool.connect(foreign).await.is_err());
    let errors = eventually("the server refuses the client", WAIT, async || {
        let e = server.errors.lock().unwrap().clone();
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(errors[0].contains("not a workload identity of trust domain cluster.local"), "{errors:?}");
    assert!(errors[0].contains("spiffe://other.domain/ns/shop/sa/cart"), "{errors:?}");
    assert!(server.handler.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn denial_and_an_unreachable_upstream_have_their_status() {
    let (unreachable, _hold) = closed_port();
    let handler = TestHandler { denied_port: Some(9), ..Default::default() };
    let Mesh { _ca, server, pool, echo, .. } = mesh("hbone-status", "catalog", handler).await;

    let denied = "127.0.0.1:9".parse().unwrap();
    let err = pool.connect(connect_request("cart", "catalog", server.addr, denied)).await.err().unwrap();
    assert!(matches!(err, hbone::Error::Status { status: 401, .. }), "{err}");
    let err = pool.connect(connect_request("cart", "catalog", server.addr, unreachable)).await.err().unwrap();
    assert!(matches!(err, hbone::Error::Status { status: 503, .. }), "{err}");
    // The connection survives refused streams.
    pool.connect(connect_request("cart", "catalog", server.addr, echo)).await.unwrap();
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

/// Requests the pool never sends (a host name as authority, GET), made by
/// hand over HBONE's TLS: 400, and the handler never asked.
#[tokio::test]
async fn a_malformed_request_is_400() {
    let Mesh { _ca, server, secrets, .. } = mesh("hbone-400", "catalog", TestHandler::default()).await;
    let cert = secrets.fetch(&id("cart")).await.unwrap();
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(cert.client_config())
        .connect(ServerName::IpAddress(server.addr.ip().into()), tcp)
        .await
        .unwrap();
    let (sender, connection) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(connection);

    let requests = [
        hyper::Request::builder().method("CONNECT").uri("catalog.shop.svc.cluster.local:80"),
        hyper::Request::builder().method("GET").uri("https://127.0.0.1:80/"),
    ];
    for request in requests {
        let request = request.body(()).unwrap();
        let what = format!("{} {}", request.method(), request.uri());
        let mut sender = sender.clone().ready().await.unwrap();
        let (response, _send) = sender.send_request(request, false).unwrap();
        assert_eq!(response.await.unwrap().status(), 400, "{what}");
    }
    assert!(server.handler.seen.lock().unwrap().is_empty());
}

/// `meshperf pilot`'s CA (CreateCertificate on --secureGRPCAddr): asks it
/// for certificates as a node proxy would, and carries HBONE with them.
#[tokio::test]
#[ignore = "needs MESHPERF_BIN (go build -o /tmp/meshperf ./cmd/meshperf) with the CA API"]
async fn meshperf_pilot_signs_workload_certificates() {
    let dir = TestDir::new("pilot-ca");
    let (_pilot, addrs) = crate::support::process::spawn_pilot(&dir, true).await;
    let secure = addrs.secure_grpc.expect("pilot's TLS listener");
    let root = dir.join("pilot/ca/root-cert.pem");
    eventually("pilot's CA writes its root", WAIT, async || root.exists().then_some(())).await;
    let secrets = SecretManager::new(CaClientConfig {
        address: format!("https://{secure}"),
        root_ca: root,
        alt_hostname: Some(CA_HOSTNAME.to_string()),
        ttl: Duration::from_secs(3600),
        token: None,
        impersonate: true,
    })
    .unwrap();
    let cert = secrets.fetch(&id("cart")).await.unwrap();
    assert_eq!(cert.identity(), &id("cart"));
    assert!(cert.not_after() > std::time::SystemTime::now() + Duration::from_secs(1800));

    // Its certificates carry HBONE both ways.
    let secrets = Arc::new(secrets);
    let server = start_server(Arc::clone(&secrets), id("catalog"), TestHandler::default()).await;
    let pool = Pool::new(secrets, HboneConfig::default());
    let mut stream = pool.connect(connect_request("cart", "catalog", server.addr, tcp_echo().await)).await.unwrap();
    stream.write_all(b"signed by pilot").await.unwrap();
    stream.shutdown().await.unwrap();
    let mut echoed = Vec::new();
    stream.read_to_end(&mut echoed).await.unwrap();
    assert_eq!(echoed, b"signed by pilot");
    assert_eq!(server.handler.seen.lock().unwrap()[0].peer_identity, id("cart"));
}
