//! Clients of the proxy (HTTP/1.1, h2c, TCP) and of its admin endpoint.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::WAIT;

pub type TestClient = Client<HttpConnector, Full<Bytes>>;

/// A pooling client, HTTP/1.1 or (`h2`) h2c.
pub fn client(h2: bool) -> TestClient {
    Client::builder(TokioExecutor::new()).http2_only(h2).build_http()
}

/// A response, and what the upstream said it saw (see
/// [`upstream`](super::upstream)).
pub struct Reply {
    pub status: u16,
    pub upstream: String,
    pub seen_path: String,
    pub seen_host: String,
    pub seen_proto: String,
    pub seen_request_id: String,
    /// `x-envoy-overloaded: true`: a circuit breaker answered.
    pub overloaded: bool,
    /// The response's `Connection` header.
    pub connection: String,
    pub body: String,
}

impl Reply {
    pub async fn read(resp: Response<hyper::body::Incoming>) -> Reply {
        let h = |n: &str| resp.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let (status, upstream, seen_path, seen_host) =
            (resp.status().as_u16(), h("x-upstream"), h("x-seen-path"), h("x-seen-host"));
        let (seen_proto, seen_request_id) = (h("x-seen-proto"), h("x-seen-request-id"));
        let (overloaded, connection) = (h("x-envoy-overloaded") == "true", h("connection"));
        let body = tokio::time::timeout(WAIT, resp.into_body().collect())
            .await
            .expect("the whole body in time")
            .expect("the whole body")
            .to_bytes();
        Reply {
            status,
            upstream,
            seen_path,
            seen_host,
            seen_proto,
            seen_request_id,
            overloaded,
            connection,
            body: String::from_utf8_lossy(&body).into(),
        }
    }
}

pub async fn get(c: &TestClient, proxy: SocketAddr, host: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    send(c, proxy, "GET", host, path, headers, Bytes::new()).await
}

pub async fn send(
    c: &TestClient,
    proxy: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Reply {
    let mut b = Request::builder().method(method).uri(format!("http://{proxy}{path}")).header("host", host);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = tokio::time::timeout(WAIT, c.request(b.body(Full::new(body)).unwrap())).await.unwrap().unwrap();
    Reply::read(resp).await
}

/// Writes `data`, half-closes, and reads until the proxy closes.
pub async fn tcp_roundtrip(addr: SocketAddr, data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(data).await?;
    s.shutdown().await?;
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut out)).await.map_err(|_| std::io::ErrorKind::TimedOut)??;
    Ok(out)
}

/// One HTTP/1.1 client connection of the test's own; its task is returned,
/// and ends when the connection does.
pub async fn h1_connect(
    addr: SocketAddr,
) -> (hyper::client::conn::http1::SendRequest<Empty<Bytes>>, tokio::task::JoinHandle<hyper::Result<()>>) {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    (sender, tokio::spawn(conn))
}

/// A GET on one client connection of the test's own: waits for the
/// connection to be ready, sends, and reads the whole response.
pub async fn get_on(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    host: &str,
    path: &str,
) -> Reply {
    tokio::time::timeout(WAIT, async {
        sender.ready().await.expect("the client connection closed");
        let req = Request::get(path).header("host", host).body(Empty::new()).unwrap();
        Reply::read(sender.send_request(req).await.expect("no response")).await
    })
    .await
    .expect("no response in time")
}

/// One h2c client connection of the test's own.
pub async fn h2_connect(addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    sender
}

/// An h2c request over its own connection, the authority in the URI (as HTTP/2 clients send it).
pub async fn h2_send(
    proxy: SocketAddr,
    method: &str,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Reply {
    let mut sender = h2_connect(proxy).await;
    let mut b = Request::builder().method(method).uri(format!("http://{authority}{path}"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp =
        tokio::time::timeout(WAIT, sender.send_request(b.body(Full::new(body)).unwrap())).await.unwrap().unwrap();
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    Reply::read(resp).await
}

/// One request on a connection of its own, written and read by hand (as
/// the admin endpoint is usually asked), with Host the address, as curl
/// sends it: (status, body).
pub async fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    http_with(addr, method, path, &[]).await
}

/// The admin's POSTs as they must be sent: with `Content-Type:
/// application/json`, which a web page cannot send.
pub async fn admin_post(addr: SocketAddr, path: &str) -> (u16, String) {
    http_with(addr, "POST", path, &[("Content-Type", "application/json")]).await
}

/// As [`http`], with `headers` after Host; a `Host` among them replaces the
/// address.
pub async fn http_with(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut conn = tokio::time::timeout(WAIT, tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("Content-Length: 0\r\nConnection: close\r\n\r\n");
    conn.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, conn.read_to_end(&mut raw)).await.expect("response in time").expect("read");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}
