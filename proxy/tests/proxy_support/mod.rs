//! Shared pieces of the proxy module's tests: a mesh snapshot built by hand,
//! real upstream servers on 127.0.0.1:0, and the proxy in explicit mode.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use meshperf_proxy::config::Cli;
use meshperf_proxy::proxy::{BoundListener, ListenerTarget, Proxy, RequestInfo, RequestObserver, TcpInfo};
use meshperf_proxy::state::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub const WAIT: Duration = Duration::from_secs(10);

/// An HTTP/1.1 + h2c upstream that says who it is and what it saw:
/// `/status/NNN` answers NNN, `/slow...` waits 2 s first; the one named
/// `failing` always answers 503.
pub async fn upstream(name: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    counter.fetch_add(1, Ordering::Relaxed);
                    async move { Ok::<_, Infallible>(answer(name, req).await) }
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
        tokio::time::sleep(Duration::from_secs(2)).await;
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
pub fn closed_port() -> (SocketAddr, tokio::net::TcpSocket) {
    let s = tokio::net::TcpSocket::new_v4().unwrap();
    s.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    (s.local_addr().unwrap(), s)
}

pub fn endpoint(addr: SocketAddr) -> Endpoint {
    Endpoint {
        address: EndpointAddress::Socket(addr),
        tls_mode: TlsMode::Disabled,
        weight: 1,
        healthy: true,
        priority: 0,
    }
}

pub fn cluster(name: &str, endpoints: &[SocketAddr]) -> Arc<Cluster> {
    Arc::new(Cluster {
        name: name.into(),
        discovery: DiscoveryType::Static,
        eds_service_name: None,
        lb_policy: LbPolicy::RoundRobin,
        connect_timeout: Duration::from_secs(1),
        circuit_breakers: CircuitBreakers::default(),
        outlier_detection: None,
        transport: UpstreamTransport::Plain,
        protocol: UpstreamProtocol::Http1,
        load_assignment: Some(ClusterEndpoints {
            cluster_name: name.into(),
            endpoints: endpoints.iter().copied().map(endpoint).collect(),
        }),
    })
}

pub fn passthrough_cluster() -> Arc<Cluster> {
    let mut c = Arc::try_unwrap(cluster("PassthroughCluster", &[])).unwrap();
    c.discovery = DiscoveryType::OriginalDst;
    c.lb_policy = LbPolicy::ClusterProvided;
    c.load_assignment = None;
    Arc::new(c)
}

pub fn tcp_chain(name: &str, port: Option<u16>, cluster: &str) -> FilterChain {
    FilterChain {
        name: name.into(),
        matcher: ChainMatch { destination_port: port, ..Default::default() },
        tls: None,
        handler: Handler::Tcp(TcpHandler {
            stat_prefix: cluster.into(),
            target: ClusterTarget::Cluster(cluster.into()),
            idle_timeout: None,
        }),
    }
}

pub fn http_chain(name: &str, port: Option<u16>, routes: RouteSource) -> FilterChain {
    FilterChain {
        name: name.into(),
        matcher: ChainMatch { destination_port: port, ..Default::default() },
        tls: None,
        handler: Handler::Http(HttpHandler {
            stat_prefix: name.into(),
            routes,
            fault_filter: true,
            idle_timeout: None,
        }),
    }
}

pub fn listener(
    name: &str,
    kind: ListenerKind,
    port: u16,
    chains: Vec<FilterChain>,
    default: Option<FilterChain>,
) -> Arc<Listener> {
    Arc::new(Listener {
        name: name.into(),
        address: SocketAddr::from(([0, 0, 0, 0], port)),
        bind_to_port: kind != ListenerKind::Outbound,
        use_original_dst: matches!(kind, ListenerKind::VirtualInbound | ListenerKind::VirtualOutbound),
        direction: if kind == ListenerKind::VirtualInbound {
            TrafficDirection::Inbound
        } else {
            TrafficDirection::Outbound
        },
        kind,
        tls_inspector: kind == ListenerKind::VirtualInbound,
        filter_chains: chains,
        default_filter_chain: default,
    })
}

pub fn route(name: &str, path: PathMatch, action: RouteAction) -> Route {
    Route {
        name: name.into(),
        matcher: RouteMatch { path, case_sensitive: true, headers: vec![] },
        action,
        fault: None,
    }
}

pub fn forward(target: ClusterTarget) -> Forward {
    Forward { target, timeout: Some(Duration::from_secs(5)), retry: None, prefix_rewrite: None, host_rewrite: None }
}

pub fn to(cluster: &str) -> RouteAction {
    RouteAction::Forward(forward(ClusterTarget::Cluster(cluster.into())))
}

/// Records what the proxy reports.
#[derive(Default)]
pub struct Recorder {
    pub requests: Mutex<Vec<RequestInfo>>,
    pub tcp: Mutex<Vec<TcpInfo>>,
}

impl RequestObserver for Recorder {
    fn on_request(&self, info: RequestInfo) {
        self.requests.lock().unwrap().push(info);
    }
    fn on_tcp_close(&self, info: TcpInfo) {
        self.tcp.lock().unwrap().push(info);
    }
}

impl Recorder {
    /// The report of the request with this authority and method, waiting for it.
    pub async fn request_with(&self, pred: impl Fn(&RequestInfo) -> bool) -> RequestInfo {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some(r) = self.requests.lock().unwrap().iter().rev().find(|r| pred(r)).cloned() {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("no such request reported")
    }
}

pub struct Running {
    pub addrs: Vec<SocketAddr>,
    pub recorder: Arc<Recorder>,
    pub state: Arc<State>,
    _stop: watch::Sender<bool>,
}

/// Runs the proxy with `snapshot`, one explicit binding per target, on 127.0.0.1:0.
pub async fn start(snapshot: Snapshot, targets: Vec<ListenerTarget>) -> Running {
    let config = Cli::try_parse_from(["meshperf-proxy", "--capture-mode=none"]).unwrap().into_config().unwrap();
    let state = Arc::new(State::new());
    state.publish(snapshot);
    let recorder = Arc::new(Recorder::default());
    let proxy = Proxy::new(Arc::new(config), state.clone(), Some(recorder.clone()));
    let mut bound = Vec::new();
    for t in targets {
        bound.push(BoundListener::new(TcpListener::bind("127.0.0.1:0").await.unwrap(), t));
    }
    let addrs = bound.iter().map(|b| b.local_addr().unwrap()).collect();
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move { proxy.serve(bound, stopped).await });
    Running { addrs, recorder, state, _stop: stop }
}

pub fn named(name: &str, port: u16) -> ListenerTarget {
    ListenerTarget::Named { name: name.into(), dest_port: Some(port) }
}

pub type TestClient = Client<HttpConnector, Full<Bytes>>;

pub fn client(h2: bool) -> TestClient {
    Client::builder(TokioExecutor::new()).http2_only(h2).build_http()
}

pub struct Reply {
    pub status: u16,
    pub upstream: String,
    pub seen_path: String,
    pub seen_host: String,
    pub seen_proto: String,
    pub seen_request_id: String,
    pub body: String,
}

impl Reply {
    /// What the upstream said it saw, from its headers, and the body.
    async fn read(resp: Response<hyper::body::Incoming>) -> Reply {
        let h = |n: &str| resp.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let (status, upstream, seen_path, seen_host) =
            (resp.status().as_u16(), h("x-upstream"), h("x-seen-path"), h("x-seen-host"));
        let (seen_proto, seen_request_id) = (h("x-seen-proto"), h("x-seen-request-id"));
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            upstream,
            seen_path,
            seen_host,
            seen_proto,
            seen_request_id,
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

pub fn empty_body() -> Empty<Bytes> {
    Empty::new()
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
    let stream = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut b = Request::builder().method(method).uri(format!("http://{authority}{path}"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp =
        tokio::time::timeout(WAIT, sender.send_request(b.body(Full::new(body)).unwrap())).await.unwrap().unwrap();
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    Reply::read(resp).await
}

/// A GET on one client connection of the test's own: waits for the
/// connection to be ready, sends, and reads the whole response.
pub async fn get_on(sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>, host: &str) -> StatusCode {
    tokio::time::timeout(WAIT, async {
        sender.ready().await.expect("the client connection closed");
        let req = Request::get("/").header("host", host).body(Empty::new()).unwrap();
        let resp = sender.send_request(req).await.expect("no response");
        let status = resp.status();
        resp.into_body().collect().await.expect("response body");
        status
    })
    .await
    .expect("no response in time")
}

/// An HTTP chain on port 80 whose inline routes send every request to `cluster`.
pub fn http_chain_to(cluster: &str) -> FilterChain {
    let routes = RouteConfig {
        name: "80".into(),
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes: vec![route("default", PathMatch::Prefix("/".into()), to(cluster))],
        }],
    };
    http_chain("80", Some(80), RouteSource::Inline(Arc::new(routes)))
}

/// Listener `0.0.0.0_80` sending every request to `cluster`, whose one endpoint is `endpoint`.
pub fn http_to(cluster_name: &str, endpoint: SocketAddr) -> Snapshot {
    let mut snap = Snapshot::default();
    let c = cluster(cluster_name, &[endpoint]);
    snap.clusters.insert(c.name.clone(), c);
    let l = listener("0.0.0.0_80", ListenerKind::Outbound, 80, vec![http_chain_to(cluster_name)], None);
    snap.listeners.insert(l.name.clone(), l);
    snap
}
