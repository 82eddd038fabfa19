//! Idle timeouts of downstream connections (the HTTP connection manager's and
//! tcp_proxy's `idle_timeout`): a stalled client is closed, a connection in
//! use is not, and a TCP connection closed for idleness is still reported
//! with its bytes.

mod proxy_support;

use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use meshperf_proxy::state::*;
use proxy_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IDLE: Duration = Duration::from_millis(300);

async fn proxy_with_idle_timeouts() -> Running {
    let (app, _) = upstream("a").await;
    let echo = tcp_echo().await;
    let mut http = http_chain_to("outbound|80||a");
    if let Handler::Http(h) = &mut http.handler {
        h.idle_timeout = Some(IDLE);
    }
    let mut tcp = tcp_chain("9000", Some(9000), "outbound|9000||echo");
    if let Handler::Tcp(t) = &mut tcp.handler {
        t.idle_timeout = Some(IDLE);
    }
    let mut snap = Snapshot::default();
    for c in [cluster("outbound|80||a", &[app]), cluster("outbound|9000||echo", &[echo])] {
        snap.clusters.insert(c.name.clone(), c);
    }
    for l in [
        listener("0.0.0.0_80", ListenerKind::Outbound, 80, vec![http], None),
        listener("0.0.0.0_9000", ListenerKind::Outbound, 9000, vec![tcp], None),
    ] {
        snap.listeners.insert(l.name.clone(), l);
    }
    start(snap, vec![named("0.0.0.0_80", 80), named("0.0.0.0_9000", 9000)]).await
}

/// How long until the proxy closes `stream` (reads end), failing after `WAIT`.
async fn closed_after(stream: &mut TcpStream) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(WAIT, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return start.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the proxy never closed the idle connection")
}

#[tokio::test]
async fn a_client_that_stalls_mid_head_is_closed() {
    let p = proxy_with_idle_timeouts().await;
    let mut stalled = TcpStream::connect(p.addrs[0]).await.unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\nhost: a\r\nx-half: ").await.unwrap();
    let after = closed_after(&mut stalled).await;
    assert!(after >= IDLE && after <= 2 * IDLE + Duration::from_millis(500), "closed after {after:?}");
}

#[tokio::test]
async fn a_connection_in_use_outlives_the_timeout_then_closes_when_idle() {
    let p = proxy_with_idle_timeouts().await;
    let stream = TcpStream::connect(p.addrs[0]).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    let conn = tokio::spawn(conn);
    // A request every half timeout for four timeouts: the connection stays open.
    let start = Instant::now();
    while start.elapsed() < 4 * IDLE {
        assert_eq!(get_on(&mut sender, "a").await, 200);
        tokio::time::sleep(IDLE / 2).await;
    }
    // Then left alone, it is closed: the client's connection task ends.
    tokio::time::timeout(WAIT, conn).await.expect("idle connection still open").unwrap().unwrap();
}

#[tokio::test]
async fn an_idle_tcp_connection_is_closed_and_reported_with_its_bytes() {
    let p = proxy_with_idle_timeouts().await;
    let mut s = TcpStream::connect(p.addrs[1]).await.unwrap();
    s.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    let after = closed_after(&mut s).await;
    assert!(after >= IDLE && after <= 2 * IDLE + Duration::from_millis(500), "closed after {after:?}");
    let report = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(r) = p.recorder.tcp.lock().unwrap().first().cloned() {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("no tcp report");
    assert_eq!((report.received_bytes, report.sent_bytes), (4, 4));
    assert_eq!(report.cluster, "outbound|9000||echo");
}
