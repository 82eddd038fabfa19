//! Real upstream servers on 127.0.0.1:0.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::WAIT;

/// An HTTP/1.1 + h2c upstream that says who it is and what it saw (see
/// [`Reply`](super::Reply)): `/status/NNN` answers NNN, `/slow...` never
/// answers; the one named `failing` always answers 503. Returns its address
/// and its count of requests.
pub async fn upstream(name: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    serve_http(name, None).await
}

/// An upstream like [`upstream`] that holds every request until the test
/// calls [`Hold::release`].
pub async fn held_upstream(name: &'static str) -> (SocketAddr, Arc<Hold>) {
    let hold = Arc::new(Hold { arrived: watch::channel(0).0, released: watch::channel(false).0 });
    let (addr, _) = serve_http(name, Some(hold.clone())).await;
    (addr, hold)
}

/// The requests a [`held_upstream`] holds.
pub struct Hold {
    arrived: watch::Sender<usize>,
    released: watch::Sender<bool>,
}

impl Hold {
    /// Waits until `n` requests have arrived.
    pub async fn arrived(&self, n: usize) {
        let mut arrived = self.arrived.subscribe();
        tokio::time::timeout(WAIT, arrived.wait_for(|a| *a >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} requests did not reach the upstream"))
            .unwrap();
    }

    /// Lets every request held, and every later one, through.
    pub fn release(&self) {
        self.released.send_replace(true);
    }
}

async fn serve_http(name: &'static str, hold: Option<Arc<Hold>>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (counter, hold) = (counter.clone(), hold.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    let hold = hold.clone();
                    async move {
                        if let Some(hold) = hold {
                            hold.arrived.send_modify(|n| *n += 1);
                            let _ = hold.released.subscribe().wait_for(|r| *r).await;
                        }
                        Ok::<_, Infallible>(answer(name, req).await)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, hits)
}

async fn answer(name: &str, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let (host, proto, id) = (header("host"), header("x-forwarded-proto"), header("x-request-id"));
    let status = path.strip_prefix("/status/").and_then(|c| c.parse().ok()).unwrap_or(200);
    let status = if name == "failing" { 503 } else { status };
    if path.starts_with("/slow") {
        std::future::pending::<()>().await;
    }
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("x-upstream", name)
        .header("x-seen-path", path)
        .header("x-seen-host", host)
        .header("x-seen-proto", proto)
        .header("x-seen-request-id", id)
        .body(Full::new(Bytes::from(format!("{name}:{}", body.len()))))
        .unwrap()
}

/// A TCP echo server.
pub async fn tcp_echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    addr
}

/// An address where nothing listens: a socket bound but not listening keeps
/// the port from being reused by a parallel test while connects are refused.
/// `listen` on the socket starts a server there later.
pub fn closed_port() -> (SocketAddr, tokio::net::TcpSocket) {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    (s.local_addr().unwrap(), s)
}
