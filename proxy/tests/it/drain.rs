//! Draining, as Envoy does when Istio stops a pod: the listeners close at
//! once (a new connection is refused), a request in flight finishes with its
//! real answer (HTTP/1.1 with `Connection: close`, HTTP/2 after GOAWAY), an
//! idle keep-alive connection closes at once, a TCP connection runs on until
//! the drain period ends; then the rest is closed. First through the library
//! (the proxy in process), then the real binary on a real SIGTERM.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use meshperf_proxy::state::*;
use meshperf_proxy::xds::ResourceType;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::ads::{self, AdsServer};
use crate::support::envoy::{self, any, static_cluster};
use crate::support::process::{Reaper, TestDir, free_loopback_port, start_proxy, wait_ready};
use crate::support::*;

const HOST: &str = "web.shop.svc.cluster.local";

/// The proxy in process: `0.0.0.0_80` (HTTP, `addrs[0]`) sends `/held` to an
/// upstream that holds requests until released and the rest to one that
/// answers at once; `0.0.0.0_9000` (TCP, `addrs[1]`) to an echo server.
async fn proxy() -> (Running, Arc<Hold>) {
    let (held, hold) = held_upstream("held").await;
    let (app, _) = upstream("app").await;
    let echo = tcp_echo().await;
    let routes = RouteSource::Inline(Arc::new(RouteConfig {
        name: "80".into(),
        virtual_hosts: vec![VirtualHost {
            name: "web".into(),
            domains: vec!["*".into()],
            routes: vec![
                route("held", PathMatch::Prefix("/held".into()), to("held")),
                route("default", PathMatch::Prefix("/".into()), to("app")),
            ],
        }],
    }));
    let snap = snapshot(
        [cluster("held", &[held]), cluster("app", &[app]), cluster("echo", &[echo])],
        [
            listener("0.0.0.0_80", ListenerKind::Outbound, 80, vec![http_chain("80", Some(80), routes)], None),
            listener("0.0.0.0_9000", ListenerKind::Outbound, 9000, vec![tcp_chain("9000", Some(9000), "echo")], None),
        ],
    );
    (start(snap, vec![named("0.0.0.0_80", 80), named("0.0.0.0_9000", 9000)]).await, hold)
}

async fn echoes(s: &mut TcpStream, msg: &[u8]) -> bool {
    let mut got = vec![0u8; msg.len()];
    s.write_all(msg).await.is_ok() && s.read_exact(&mut got).await.is_ok() && got == msg
}

/// True once the peer has closed `s` (EOF or reset).
async fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(WAIT, s.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

#[tokio::test]
async fn http1_in_flight_request_finishes_with_connection_close_and_idle_keep_alive_closes() {
    let (mut p, hold) = proxy().await;
    let addr = p.addrs[0];
    // A keep-alive connection that has served a request and sits idle...
    let (mut idle, idle_conn) = h1_connect(addr).await;
    assert_eq!(get_on(&mut idle, HOST, "/").await.status, 200);
    // ...and one with a request in flight.
    let (mut busy, busy_conn) = h1_connect(addr).await;
    let in_flight = tokio::spawn(async move { get_on(&mut busy, HOST, "/held").await });
    hold.arrived(1).await;

    let drained = p.start_drain(Duration::from_secs(3600));
    tokio::time::timeout(WAIT, p.drain_watch.listeners_closed()).await.expect("listeners closed");
    assert!(TcpStream::connect(addr).await.is_err(), "a new connection is refused");
    tokio::time::timeout(WAIT, idle_conn).await.expect("the idle connection is closed at once").unwrap().unwrap();
    assert!(!drained.is_finished(), "the request in flight holds the drain");

    hold.release();
    let reply = in_flight.await.unwrap();
    assert_eq!((reply.status, reply.upstream.as_str(), reply.body.as_str()), (200, "held", "held:0"));
    assert_eq!(reply.connection, "close", "answered with Connection: close");
    tokio::time::timeout(WAIT, busy_conn).await.expect("closed after its answer").unwrap().unwrap();
    let report = tokio::time::timeout(WAIT, drained).await.expect("the drain ends with the last connection").unwrap();
    assert_eq!(report.closed_at_deadline, 0);
    assert!(report.open_at_start >= 1, "{report:?}");
    assert_eq!(p.drain_watch.open_connections(), 0);
}

#[tokio::test]
async fn h2_client_gets_goaway_and_its_stream_in_flight_finishes() {
    let (mut p, hold) = proxy().await;
    let tcp = TcpStream::connect(p.addrs[0]).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    let conn = tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let request = hyper::Request::get(format!("http://{HOST}/held")).body(()).unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    hold.arrived(1).await;

    let drained = p.start_drain(Duration::from_secs(3600));
    let goaway = eventually("GOAWAY", WAIT, async || client.clone().ready().await.err()).await;
    assert!(goaway.is_go_away() && goaway.is_remote(), "{goaway:?}");
    assert_eq!(goaway.reason(), Some(h2::Reason::NO_ERROR));

    hold.release();
    let response = tokio::time::timeout(WAIT, response).await.expect("answer in time").expect("the stream finishes");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut got = Vec::new();
    while let Some(chunk) = body.data().await {
        got.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(got, b"held:0");
    tokio::time::timeout(WAIT, conn).await.expect("the connection closes").unwrap().unwrap();
    let report = tokio::time::timeout(WAIT, drained).await.expect("the drain ends with the last connection").unwrap();
    assert_eq!((report.open_at_start, report.closed_at_deadline), (1, 0));
}

// On a paused clock: the drain period is a tokio timer, so its end is exact.
#[tokio::test(start_paused = true)]
async fn tcp_runs_on_until_the_drain_period_ends() {
    let (mut p, _) = proxy().await;
    let mut tcp = TcpStream::connect(p.addrs[1]).await.unwrap();
    assert!(echoes(&mut tcp, b"before").await);

    let period = Duration::from_secs(20);
    let drained = p.start_drain(period);
    tokio::time::timeout(WAIT, p.drain_watch.listeners_closed()).await.expect("listeners closed");
    assert!(TcpStream::connect(p.addrs[1]).await.is_err(), "a new connection is refused");
    tokio::time::sleep(period / 2).await;
    assert!(echoes(&mut tcp, b"during").await, "the connection carries bytes through the drain");

    let report = tokio::time::timeout(2 * period, drained).await.expect("the drain ends").unwrap();
    assert_eq!((report.open_at_start, report.closed_at_deadline), (1, 1));
    assert!(report.elapsed >= period && report.elapsed < period + Duration::from_secs(1), "{report:?}");
    assert!(closed(&mut tcp).await, "closed when the period ended");
}

#[tokio::test(start_paused = true)]
async fn zero_drain_period_closes_everything_at_once() {
    let (mut p, hold) = proxy().await;
    let mut tcp = TcpStream::connect(p.addrs[1]).await.unwrap();
    assert!(echoes(&mut tcp, b"before").await);
    let (mut sender, _conn) = h1_connect(p.addrs[0]).await;
    sender.ready().await.unwrap();
    let request = hyper::Request::get("/held").header("host", HOST).body(Empty::<Bytes>::new()).unwrap();
    let in_flight = tokio::spawn(sender.send_request(request));
    hold.arrived(1).await;

    let report = p.start_drain(Duration::ZERO).await.unwrap();
    assert_eq!((report.open_at_start, report.closed_at_deadline), (2, 2));
    assert_eq!(report.elapsed, Duration::ZERO);
    assert!(closed(&mut tcp).await);
    // Cut short, the request gets no answer at all: never one the proxy made up.
    let answer = tokio::time::timeout(WAIT, in_flight).await.expect("the request ends").unwrap();
    assert!(answer.is_err(), "{answer:?}");
}

/// The proxy binary with its config from a scripted control plane: the same
/// two listeners as [`proxy`], bound by `--listen` on free loopback ports.
struct Binary {
    process: Reaper,
    http: SocketAddr,
    tcp: SocketAddr,
    admin: SocketAddr,
    hold: Arc<Hold>,
    log: std::path::PathBuf,
    _dir: TestDir,
    _control_plane: tokio::task::JoinHandle<()>,
}

impl Binary {
    async fn start(name: &str, drain_duration: &str) -> Binary {
        let (held, hold) = held_upstream("held").await;
        let echo = tcp_echo().await;
        let server = AdsServer::start().await;
        let (http, tcp, admin) = (free_loopback_port(), free_loopback_port(), free_loopback_port());
        let listen = format!("{http}=0.0.0.0_80:80,{tcp}=0.0.0.0_9000:9000");
        let dir = TestDir::new(name);
        let log = dir.join("proxy.log");
        let flags = ["--capture-mode", "none", "--listen", &listen, "--drain-duration", drain_duration];
        let process = start_proxy(server.addr, admin, "web-1", &flags, &log);
        let resources = ads::Resources::from([
            (
                ResourceType::Cluster,
                vec![
                    ("held".to_string(), any(&static_cluster("held", &[held]))),
                    ("echo".to_string(), any(&static_cluster("echo", &[echo]))),
                ],
            ),
            (
                ResourceType::Listener,
                vec![
                    ("0.0.0.0_80".to_string(), envoy::listener()),
                    ("0.0.0.0_9000".to_string(), envoy::tcp_listener(9000, "echo")),
                ],
            ),
            (ResourceType::Route, vec![("80".to_string(), envoy::route_config(vec![envoy::route("/", "held", None)]))]),
        ]);
        let control_plane = ads::serve(server, resources).await;
        wait_ready(admin, "the proxy binary", WAIT).await;
        Binary { process, http, tcp, admin, hold, log, _dir: dir, _control_plane: control_plane }
    }

    fn sigterm(&self) {
        kill(Pid::from_raw(self.process.0.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }
}

#[tokio::test]
async fn the_binary_drains_on_sigterm_and_exits_0() {
    let drain_duration = Duration::from_secs(2);
    let mut b = Binary::start("drain-sigterm", "2s").await;
    let mut tcp = TcpStream::connect(b.tcp).await.unwrap();
    assert!(echoes(&mut tcp, b"before").await);
    let (mut sender, _conn) = h1_connect(b.http).await;
    let in_flight = tokio::spawn(async move { get_on(&mut sender, HOST, "/").await });
    b.hold.arrived(1).await;

    b.sigterm();
    let signalled = std::time::Instant::now();
    // The admin endpoint answers through the drain, and says not ready.
    let admin = b.admin;
    eventually("readiness says DRAINING", WAIT, async || {
        (http(admin, "GET", "/ready").await == (503, "DRAINING\n".to_string())).then_some(())
    })
    .await;
    assert_eq!(http(admin, "GET", "/healthz").await.0, 200);
    let addr = b.http;
    eventually("new connections are refused", WAIT, async || TcpStream::connect(addr).await.is_err().then_some(()))
        .await;
    assert!(echoes(&mut tcp, b"during").await, "TCP runs on through the drain");

    b.hold.release();
    let reply = in_flight.await.unwrap();
    assert_eq!((reply.status, reply.upstream.as_str(), reply.connection.as_str()), (200, "held", "close"));

    // The TCP connection holds the drain to its end; then the proxy exits 0.
    let status = b.process.exited(drain_duration + WAIT).await;
    assert!(status.success(), "{status}: {}", b.log());
    assert!(signalled.elapsed() >= drain_duration, "exited {:?} after SIGTERM", signalled.elapsed());
    assert!(closed(&mut tcp).await);
    let log = b.log();
    assert!(log.contains("SIGTERM: draining") && log.contains("draining: listeners closed"), "{log}");
    assert!(log.lines().any(|l| l.contains("drained") && l.contains("closed_at_deadline=1")), "{log}");
}

#[tokio::test]
async fn the_binary_with_drain_duration_0_exits_at_once() {
    let mut b = Binary::start("drain-zero", "0").await;
    let mut tcp = TcpStream::connect(b.tcp).await.unwrap();
    assert!(echoes(&mut tcp, b"before").await);

    b.sigterm();
    let signalled = std::time::Instant::now();
    let status = b.process.exited(WAIT).await;
    assert!(status.success(), "{status}: {}", b.log());
    // Well before the 5 s default: no drain period was waited for.
    assert!(signalled.elapsed() < Duration::from_secs(5), "exited {:?} after SIGTERM", signalled.elapsed());
    assert!(closed(&mut tcp).await);
    let log = b.log();
    assert!(log.lines().any(|l| l.contains("drained") && l.contains("closed_at_deadline=1")), "{log}");
}

/// A request that arrives before the first config waits for it, as a
/// restarted sidecar's first requests do, instead of meeting a proxy with no
/// routes yet (a 404 the proxy made up).
#[tokio::test]
async fn the_binary_serves_no_request_before_its_first_config() {
    let (app, hits) = upstream("app").await;
    let server = AdsServer::start().await;
    let (http_addr, admin) = (free_loopback_port(), free_loopback_port());
    let listen = format!("{http_addr}=0.0.0.0_80:80");
    let dir = TestDir::new("first-config");
    let log = dir.join("proxy.log");
    let _process = start_proxy(server.addr, admin, "web-1", &["--capture-mode", "none", "--listen", &listen], &log);
    // The listener is bound (and the kernel queues connections) before the
    // proxy has any config.
    let stream = eventually("the listener is bound", WAIT, async || TcpStream::connect(http_addr).await.ok()).await;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut early = tokio::spawn(async move { get_on(&mut sender, HOST, "/").await });
    // Nothing answers while there is no config: not a 404, not a reset.
    assert!(tokio::time::timeout(Duration::from_millis(300), &mut early).await.is_err(), "answered before any config");

    let resources = ads::Resources::from([
        (ResourceType::Cluster, vec![("app".to_string(), any(&static_cluster("app", &[app])))]),
        (ResourceType::Listener, vec![("0.0.0.0_80".to_string(), envoy::listener())]),
        (ResourceType::Route, vec![("80".to_string(), envoy::route_config(vec![envoy::route("/", "app", None)]))]),
    ]);
    let _control_plane = ads::serve(server, resources).await;
    let reply = early.await.unwrap();
    assert_eq!((reply.status, reply.upstream.as_str()), (200, "app"), "{}", std::fs::read_to_string(&log).unwrap());
    assert_eq!(hits.load(std::sync::atomic::Ordering::Relaxed), 1);
}
