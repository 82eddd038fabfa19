//! Mesh mTLS over loopback with the committed test certificates
//! (testdata/tls, see its README): who is accepted, who is refused, what
//! identities and ALPN come out, and rotation without dropping connections.

use std::sync::Arc;

use meshperf_proxy::state::{Secret, Snapshot};
use meshperf_proxy::tls::{
    AppProtocol, MESH_ALPN, PeerIdentities, SpiffeServerVerifier, TlsConfigStore, client_config, peer_identity,
    server_config, server_identity,
};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::support::WAIT;
use crate::support::certs::{CART, CATALOG, certificate as cert, secrets, validation as roots};

fn mesh() -> PeerIdentities {
    PeerIdentities::TrustDomain("cluster.local".into())
}

fn mesh_alpn() -> Vec<String> {
    MESH_ALPN.map(String::from).to_vec()
}

fn server(name: &str) -> Arc<ServerConfig> {
    let alpn = ["h2".to_string(), "http/1.1".to_string()];
    Arc::new(server_config(&cert(name), Some(&roots("root")), true, &alpn).unwrap())
}

fn client(name: &str, accept: PeerIdentities, app: AppProtocol) -> Arc<ClientConfig> {
    Arc::new(client_config(&cert(name), &roots("root"), accept, &mesh_alpn(), app).unwrap())
}

/// What the server side saw of one accepted connection.
#[derive(Debug)]
struct Accepted {
    identity: Option<String>,
    alpn: Option<Vec<u8>>,
}

/// Serves TLS connections with whatever config `config` returns at accept
/// time, echoing bytes; each handshake's outcome goes to the channel.
async fn serve(
    config: impl Fn() -> Arc<ServerConfig> + Send + 'static,
) -> (std::net::SocketAddr, tokio::sync::mpsc::UnboundedReceiver<Result<Accepted, String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = TlsAcceptor::from(config());
            let tx = tx.clone();
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(mut tls) => {
                        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                        let _ = tx.send(Ok(Accepted { identity: peer_identity(&tls), alpn }));
                        let mut buf = [0u8; 64];
                        while let Ok(n @ 1..) = tls.read(&mut buf).await {
                            if tls.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                    Err(e) => drop(tx.send(Err(e.to_string()))),
                }
            });
        }
    });
    (addr, rx)
}

type ClientStream = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(addr: std::net::SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<ClientStream> {
    let tcp = TcpStream::connect(addr).await?;
    // Istio's SNI; the verifier must not treat it as the identity.
    let sni = ServerName::try_from("outbound_.8080_._.catalog.shop.svc.cluster.local").unwrap();
    TlsConnector::from(config).connect(sni, tcp).await
}

async fn echo(tls: &mut ClientStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
    tls.write_all(msg).await?;
    let mut buf = vec![0u8; msg.len()];
    tls.read_exact(&mut buf).await?;
    Ok(buf)
}

async fn next<T>(rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(WAIT, rx.recv()).await.expect("server side timed out").expect("server gone")
}

#[tokio::test]
async fn mutual_handshake_carries_identities_and_alpn() {
    let (addr, mut accepted) = serve(|| server("catalog")).await;

    let mut tls = connect(addr, client("cart", mesh(), AppProtocol::Http2)).await.expect("handshake");
    assert_eq!(server_identity(&tls).as_deref(), Some(CATALOG));
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let seen = next(&mut accepted).await.expect("server handshake");
    assert_eq!(seen.identity.as_deref(), Some(CART));
    assert_eq!(seen.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(echo(&mut tls, b"ping").await.unwrap(), b"ping");

    // A TCP client offers only Istio's names; the server still completes the
    // handshake (rustls would refuse one without a common protocol).
    let mut tls = connect(addr, client("cart", mesh(), AppProtocol::Tcp)).await.expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"istio-peer-exchange"[..]));
    assert_eq!(next(&mut accepted).await.expect("server handshake").identity.as_deref(), Some(CART));
    assert_eq!(echo(&mut tls, b"tcp").await.unwrap(), b"tcp");

    let tls = connect(addr, client("cart", mesh(), AppProtocol::Http1)).await.expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn exact_identity_is_accepted_and_another_is_refused() {
    let (addr, _accepted) = serve(|| server("catalog")).await;
    let ok = PeerIdentities::AnyOf(vec!["spiffe://cluster.local/ns/shop/sa/reviews".into(), CATALOG.into()]);
    connect(addr, client("cart", ok, AppProtocol::Tcp)).await.expect("catalog is allowed");

    let wrong = PeerIdentities::AnyOf(vec!["spiffe://cluster.local/ns/shop/sa/reviews".into()]);
    let err = connect(addr, client("cart", wrong, AppProtocol::Tcp)).await.expect_err("catalog is not reviews");
    assert!(err.to_string().contains("is none of"), "{err}");
}

#[tokio::test]
async fn another_trust_domain_is_refused() {
    // Signed by the mesh root, but of trust domain other.example.
    let (addr, _accepted) = serve(|| server("foreign-domain")).await;
    let err = connect(addr, client("cart", mesh(), AppProtocol::Tcp)).await.expect_err("foreign trust domain");
    assert!(err.to_string().contains("not in trust domain"), "{err}");
}

#[tokio::test]
async fn server_from_another_root_is_refused() {
    let (addr, _accepted) = serve(|| server("rogue")).await;
    let err = connect(addr, client("cart", mesh(), AppProtocol::Tcp)).await.expect_err("rogue root");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
}

#[tokio::test]
async fn client_from_another_root_is_refused() {
    let (addr, mut accepted) = serve(|| server("catalog")).await;
    let rogue =
        Arc::new(client_config(&cert("rogue"), &roots("root"), mesh(), &mesh_alpn(), AppProtocol::Tcp).unwrap());
    // TLS 1.3: the client may finish before the server refuses; the server's
    // verdict is what counts, and the client's connection must not work.
    if let Ok(mut tls) = connect(addr, rogue).await {
        assert!(echo(&mut tls, b"x").await.is_err());
    }
    let err = next(&mut accepted).await.expect_err("the server must refuse a rogue client");
    assert!(err.contains("UnknownIssuer"), "{err}");
}

#[tokio::test]
async fn client_without_certificate_is_refused() {
    let (addr, mut accepted) = serve(|| server("catalog")).await;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = SpiffeServerVerifier::new(roots("root").roots, provider.signature_verification_algorithms, mesh());
    let no_cert = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    if let Ok(mut tls) = connect(addr, Arc::new(no_cert)).await {
        assert!(echo(&mut tls, b"x").await.is_err());
    }
    let err = next(&mut accepted).await.expect_err("the server must require a client certificate");
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

fn snapshot(workload: &str) -> Snapshot {
    Snapshot { secrets: secrets(workload), ..Default::default() }
}

#[tokio::test]
async fn rotation_keeps_old_connections_and_serves_the_new_certificate() {
    let store = Arc::new(TlsConfigStore::new());
    let current = Arc::new(std::sync::Mutex::new(Arc::new(snapshot("cart"))));
    let (s, c) = (Arc::clone(&store), Arc::clone(&current));
    let (addr, mut accepted) = serve(move || {
        let snap = Arc::clone(&c.lock().unwrap());
        s.for_snapshot(&snap).mesh_server().unwrap()
    })
    .await;
    let presented = |tls: &ClientStream| tls.get_ref().1.peer_certificates().unwrap()[0].clone();

    let catalog = client("catalog", mesh(), AppProtocol::Tcp);
    let mut old = connect(addr, Arc::clone(&catalog)).await.expect("handshake before rotation");
    next(&mut accepted).await.unwrap();
    assert_eq!(presented(&old), cert("cart").chain[0]);

    // Unchanged secrets: the same configs, not a rebuild.
    let snap = Arc::clone(&current.lock().unwrap());
    let (a, b) = (store.for_snapshot(&snap), store.for_snapshot(&snap));
    assert!(Arc::ptr_eq(&a, &b));
    assert!(Arc::ptr_eq(&a.mesh_server().unwrap(), &b.mesh_server().unwrap()));

    // SDS delivers a new workload certificate (same root, same identity).
    let mut rotated = (*snap).clone();
    rotated.secrets.insert("default".into(), Arc::new(Secret::Certificate(cert("cart-rotated"))));
    *current.lock().unwrap() = Arc::new(rotated);
    assert!(!Arc::ptr_eq(&a, &store.for_snapshot(&current.lock().unwrap())));

    let mut new = connect(addr, catalog).await.expect("handshake after rotation");
    assert_eq!(next(&mut accepted).await.unwrap().identity.as_deref(), Some(CATALOG));
    assert_eq!(presented(&new), cert("cart-rotated").chain[0]);
    assert_eq!(server_identity(&new).as_deref(), Some(CART));
    assert_eq!(echo(&mut new, b"new").await.unwrap(), b"new");
    // The connection made before the rotation still carries traffic.
    assert_eq!(echo(&mut old, b"old").await.unwrap(), b"old");
}
