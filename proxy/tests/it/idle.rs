//! Idle timeouts of downstream connections (the HTTP connection manager's and
//! tcp_proxy's `idle_timeout`): a stalled client is closed, a connection in
//! use is not, and a TCP connection closed for idleness is still reported
//! with its bytes. On a paused clock: the timeouts are tokio timers, so the
//! closing times are exact and nothing waits on the wall clock.

use std::time::Duration;

use meshperf_proxy::state::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::support::*;

const IDLE: Duration = Duration::from_secs(30);

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
    let snap = snapshot(
        [cluster("outbound|80||a", &[app]), cluster("outbound|9000||echo", &[echo])],
        [
            listener("0.0.0.0_80", ListenerKind::Outbound, 80, vec![http], None),
            listener("0.0.0.0_9000", ListenerKind::Outbound, 9000, vec![tcp], None),
        ],
    );
    start(snap, vec![named("0.0.0.0_80", 80), named("0.0.0.0_9000", 9000)]).await
}

/// How long after `since` the proxy closes `stream` (reads end).
async fn closed_after(stream: &mut TcpStream, since: Instant) -> Duration {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(10 * IDLE, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return since.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the proxy never closed the idle connection")
}

/// Closed between one and two timeouts after the last byte (see `proxy::idle`).
fn within_idle_window(after: Duration) -> bool {
    (IDLE..=2 * IDLE).contains(&after)
}

#[tokio::test(start_paused = true)]
async fn a_client_that_stalls_mid_head_is_closed() {
    let p = proxy_with_idle_timeouts().await;
    let mut stalled = TcpStream::connect(p.addrs[0]).await.unwrap();
    stalled.write_all(b"GET / HTTP/1.1\r\nhost: a\r\nx-half: ").await.unwrap();
    let after = closed_after(&mut stalled, Instant::now()).await;
    assert!(within_idle_window(after), "closed after {after:?}");
}

#[tokio::test(start_paused = true)]
async fn a_connection_in_use_outlives_the_timeout_then_closes_when_idle() {
    let p = proxy_with_idle_timeouts().await;
    let (mut sender, conn) = h1_connect(p.addrs[0]).await;
    // A request every half timeout for four timeouts: the connection stays open.
    let start = Instant::now();
    let mut last = start;
    while start.elapsed() < 4 * IDLE {
        assert_eq!(get_on(&mut sender, "a", "/").await.status, 200);
        last = Instant::now();
        tokio::time::sleep(IDLE / 2).await;
    }
    // Then left alone, it is closed: the client's connection task ends.
    tokio::time::timeout(10 * IDLE, conn).await.expect("idle connection still open").unwrap().unwrap();
    assert!(within_idle_window(last.elapsed()), "closed {:?} after the last request", last.elapsed());
}

#[tokio::test(start_paused = true)]
async fn an_idle_tcp_connection_is_closed_and_reported_with_its_bytes() {
    let p = proxy_with_idle_timeouts().await;
    let mut s = TcpStream::connect(p.addrs[1]).await.unwrap();
    s.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    let after = closed_after(&mut s, Instant::now()).await;
    assert!(within_idle_window(after), "closed after {after:?}");
    let report = &p.recorder.tcp_reports(1).await[0];
    assert_eq!((report.received_bytes, report.sent_bytes), (4, 4));
    assert_eq!(report.cluster, "outbound|9000||echo");
}
