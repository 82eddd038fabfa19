//! PERMISSIVE detection on real loopback sockets: a TLS client and a
//! plain-text client are told apart without losing their first bytes.

use std::sync::Arc;
use std::time::Duration;

use meshperf_proxy::tls::{DETECT_TIMEOUT, Detected, detect};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::support::WAIT;
use crate::support::certs::validation;

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

async fn detect_bounded(s: &TcpStream, timeout: Duration) -> Detected {
    tokio::time::timeout(WAIT, detect(s, timeout)).await.expect("detect hung").expect("detect failed")
}

#[tokio::test]
async fn tls_client_hello_is_detected_and_left_in_the_socket() {
    let (client, mut server) = pair().await;
    let roots = Arc::unwrap_or_clone(validation("root").roots);
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The handshake never completes (no server answers); only its first
    // flight matters.
    let hello = tokio::spawn(async move {
        let name = ServerName::try_from("catalog.shop.svc.cluster.local").unwrap();
        let _ = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, client).await;
    });
    assert_eq!(detect_bounded(&server, DETECT_TIMEOUT).await, Detected::Tls);
    // Peeked, not consumed: the record header is still the first thing read.
    let mut head = [0u8; 3];
    server.read_exact(&mut head).await.unwrap();
    assert_eq!(head[..2], [0x16, 0x03]);
    hello.abort();
}

#[tokio::test]
async fn plaintext_request_is_detected_and_left_in_the_socket() {
    let (mut client, mut server) = pair().await;
    let request = b"GET / HTTP/1.1\r\nHost: catalog\r\n\r\n";
    client.write_all(request).await.unwrap();
    assert_eq!(detect_bounded(&server, DETECT_TIMEOUT).await, Detected::Plaintext);
    let mut got = vec![0u8; request.len()];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(got, request);
}

// On a paused clock, as the split record header below: the detector waits on tokio timers.
#[tokio::test(start_paused = true)]
async fn silent_client_is_plaintext_after_the_timeout() {
    let (_client, server) = pair().await;
    let start = tokio::time::Instant::now();
    assert_eq!(detect_bounded(&server, Duration::from_secs(3)).await, Detected::Plaintext);
    assert!(start.elapsed() >= Duration::from_secs(3), "gave up after {:?}", start.elapsed());
}

#[tokio::test]
async fn client_that_closes_first_is_reported() {
    let (client, server) = pair().await;
    drop(client);
    assert_eq!(detect_bounded(&server, DETECT_TIMEOUT).await, Detected::Closed);
}

#[tokio::test(start_paused = true)]
async fn record_header_split_after_one_byte_waits_for_the_second() {
    let (mut client, server) = pair().await;
    client.set_nodelay(true).unwrap();
    client.write_all(&[0x16]).await.unwrap();
    let second = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        client.write_all(&[0x03, 0x01]).await.unwrap();
        client
    });
    assert_eq!(detect_bounded(&server, DETECT_TIMEOUT).await, Detected::Tls);
    drop(second.await.unwrap());
}
