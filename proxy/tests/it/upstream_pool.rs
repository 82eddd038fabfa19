//! The HTTP/1.1 upstream pool, seen from a plain-socket upstream that counts
//! its connections: connections are reused across requests and downstream
//! connections, whether the body had a length or was chunked; one the
//! upstream closed while idle is replaced without the client noticing; and
//! one whose response was abandoned half-read is never reused. On a paused
//! clock: the upstream's pauses and the pool's idle time are tokio timers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::*;

/// An upstream written on plain sockets, so that what each connection sees is
/// exact: `/` answers "ok" with a length, `/chunked` chunked, `/close` closes
/// the connection 50 ms after answering (no `Connection: close`), `/stall`
/// promises a megabyte and sends ten bytes.
async fn counting_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 4096];
                    let n = match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    buf.drain(..end + 4);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let reply: &[u8] = match path.as_str() {
                        "/chunked" => b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                        "/stall" => b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n0123456789",
                        _ => b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
                    };
                    if s.write_all(reply).await.is_err() {
                        return;
                    }
                    match path.as_str() {
                        "/close" => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            return;
                        }
                        "/stall" => {
                            tokio::time::sleep(Duration::from_secs(5)).await;
                            return;
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    (addr, connections)
}

async fn proxy_to(upstream: SocketAddr) -> Running {
    start(http_to("outbound|80||up", upstream), vec![named("0.0.0.0_80", 80)]).await
}

/// A GET on a new client connection; the status and the whole body.
async fn get_body(proxy: SocketAddr, path: &str) -> (u16, String) {
    let r = get(&client(false), proxy, "up", path, &[]).await;
    (r.status, r.body)
}

#[tokio::test(start_paused = true)]
async fn connections_are_reused_with_lengths_and_chunks() {
    let (up, connections) = counting_upstream().await;
    let p = proxy_to(up).await;
    // One client connection, several requests; then new client connections.
    let (mut sender, _conn) = h1_connect(p.addrs[0]).await;
    for _ in 0..5 {
        assert_eq!(get_on(&mut sender, "up", "/").await.status, 200);
    }
    for path in ["/", "/chunked", "/", "/chunked"] {
        assert_eq!(get_body(p.addrs[0], path).await, (200, "ok".to_string()), "{path}");
    }
    assert_eq!(connections.load(Ordering::SeqCst), 1, "every request on one upstream connection");
}

#[tokio::test(start_paused = true)]
async fn a_connection_the_upstream_closed_while_idle_is_replaced() {
    let (up, connections) = counting_upstream().await;
    let p = proxy_to(up).await;
    for _ in 0..3 {
        assert_eq!(get_body(p.addrs[0], "/close").await, (200, "ok".to_string()));
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(connections.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_half_read_response_does_not_leave_its_connection_in_the_pool() {
    let (up, connections) = counting_upstream().await;
    let p = proxy_to(up).await;
    let c = client(false);
    let req = hyper::Request::get(format!("http://{}/stall", p.addrs[0]))
        .header("host", "up")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = tokio::time::timeout(WAIT, c.request(req)).await.unwrap().unwrap();
    let mut body = resp.into_body();
    let first = tokio::time::timeout(WAIT, body.frame()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.into_data().unwrap().as_ref(), b"0123456789");
    drop(body); // abandoned, 999,990 bytes short
    drop(c);
    // The next request gets a whole answer, on a new upstream connection.
    assert_eq!(get_body(p.addrs[0], "/").await, (200, "ok".to_string()));
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}
