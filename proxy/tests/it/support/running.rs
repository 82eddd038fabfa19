//! The proxy in process, on the test's runtime: serving a snapshot the test
//! publishes ([`start`]), or the config a scripted control plane sends over a
//! real ADS stream, with its admin endpoint ([`start_with_xds`]). Its
//! listeners are explicit bindings on 127.0.0.1:0.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use clap::Parser;
use meshperf_proxy::admin::{Admin, AdminServer};
use meshperf_proxy::config::{Cli, Config, NodeIdentity};
use meshperf_proxy::proxy::{
    BoundListener, Drain, DrainReport, DrainWatch, ListenerTarget, Proxy, RequestInfo, RequestObserver, TcpInfo, drain,
};
use meshperf_proxy::state::{Snapshot, State};
use meshperf_proxy::xds::{Readiness, XdsClient, XdsConfig, XdsMetrics};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::ads::{AdsServer, DeltaStream, Resources, sync};
use super::{WAIT, eventually};

/// The proxy's config in explicit mode (capture mode none), bindings aside.
pub fn config() -> Config {
    Cli::try_parse_from(["meshperf-proxy", "--capture-mode=none"]).unwrap().into_config().unwrap()
}

/// A sidecar's identity: pod `POD-1` of `namespace`, on 127.0.0.1.
pub fn node(workload: &str, namespace: &str, service_account: &str, labels: &[(&str, &str)]) -> NodeIdentity {
    NodeIdentity {
        id: format!("sidecar~127.0.0.1~{workload}-1.{namespace}~{namespace}.svc.cluster.local"),
        namespace: namespace.into(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        service_account: service_account.into(),
        instance_ips: vec!["127.0.0.1".parse().unwrap()],
        workload_name: workload.into(),
        metadata: Default::default(),
    }
}

/// An explicit binding: listener `name`, as if redirected from destination `port`.
pub fn named(name: &str, port: u16) -> ListenerTarget {
    ListenerTarget::Named { name: name.into(), dest_port: Some(port) }
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
    /// The latest report of a request that `pred` accepts, waiting for it.
    pub async fn request_with(&self, pred: impl Fn(&RequestInfo) -> bool) -> RequestInfo {
        eventually("a matching request report", WAIT, async || {
            self.requests.lock().unwrap().iter().rev().find(|r| pred(r)).cloned()
        })
        .await
    }

    /// The first `n` reports of TCP connections, waiting for them.
    pub async fn tcp_reports(&self, n: usize) -> Vec<TcpInfo> {
        eventually(&format!("{n} TCP connection reports"), WAIT, async || {
            let tcp = self.tcp.lock().unwrap();
            (tcp.len() >= n).then(|| tcp[..n].to_vec())
        })
        .await
    }
}

pub struct Running {
    pub addrs: Vec<SocketAddr>,
    pub recorder: Arc<Recorder>,
    pub state: Arc<State>,
    pub drain_watch: DrainWatch,
    /// Taken by [`Running::start_drain`]; dropped with the test, it stops the proxy.
    drain: Option<Drain>,
}

impl Running {
    /// Starts draining the proxy for up to `period`, on a task of its own.
    pub fn start_drain(&mut self, period: std::time::Duration) -> tokio::task::JoinHandle<DrainReport> {
        let drain = self.drain.take().expect("the proxy drains once");
        tokio::spawn(drain.drain(period))
    }
}

/// Runs the proxy with `snapshot`, one explicit binding per target, on 127.0.0.1:0.
pub async fn start(snapshot: Snapshot, targets: Vec<ListenerTarget>) -> Running {
    let state = Arc::new(State::new());
    state.publish(snapshot);
    serve(state, targets, None).await
}

/// Reports to the recorder and, when given, to another observer.
struct Both(Arc<Recorder>, Option<Arc<dyn RequestObserver>>);

impl RequestObserver for Both {
    fn on_request(&self, info: RequestInfo) {
        if let Some(o) = &self.1 {
            o.on_request(info.clone());
        }
        self.0.on_request(info);
    }
    fn on_tcp_close(&self, info: TcpInfo) {
        if let Some(o) = &self.1 {
            o.on_tcp_close(info.clone());
        }
        self.0.on_tcp_close(info);
    }
}

async fn serve(state: Arc<State>, targets: Vec<ListenerTarget>, observer: Option<Arc<dyn RequestObserver>>) -> Running {
    let recorder = Arc::new(Recorder::default());
    let both = Arc::new(Both(recorder.clone(), observer));
    let proxy = Proxy::new(Arc::new(config()), state.clone(), Some(both));
    let mut bound = Vec::new();
    for t in targets {
        bound.push(BoundListener::new(TcpListener::bind("127.0.0.1:0").await.unwrap(), t));
    }
    let addrs = bound.iter().map(|b| b.local_addr().unwrap()).collect();
    let (drain, drain_watch) = drain::channel();
    tokio::spawn(proxy.serve(bound, &drain_watch));
    Running { addrs, recorder, state, drain_watch, drain: Some(drain) }
}

/// An xDS client on a task of the test's runtime, filling a state of its own.
pub struct RunningClient {
    pub state: Arc<State>,
    pub ready: Readiness,
    pub metrics: Arc<XdsMetrics>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningClient {
    pub fn start(address: SocketAddr, node: NodeIdentity, delta: bool) -> RunningClient {
        RunningClient::start_bound(address, node, delta, &[])
    }

    /// A client for a proxy whose explicit bindings serve `bound_listeners`.
    pub fn start_bound(
        address: SocketAddr,
        node: NodeIdentity,
        delta: bool,
        bound_listeners: &[&str],
    ) -> RunningClient {
        let config = XdsConfig { address: address.to_string(), node, delta, tls: None, auth_token: None };
        RunningClient::start_config(config, bound_listeners)
    }

    /// A client that sends the token in `token` on every stream.
    pub fn start_with_token(address: SocketAddr, node: NodeIdentity, delta: bool, token: &Path) -> RunningClient {
        let config =
            XdsConfig { address: address.to_string(), node, delta, tls: None, auth_token: Some(token.to_path_buf()) };
        RunningClient::start_config(config, &[])
    }

    fn start_config(config: XdsConfig, bound_listeners: &[&str]) -> RunningClient {
        let state = Arc::new(State::new());
        let bound = bound_listeners.iter().map(|l| l.to_string()).collect();
        let (client, ready) = XdsClient::new(config, state.clone(), bound);
        let metrics = client.metrics();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(client.run(stopped));
        RunningClient { state, ready, metrics, stop, task }
    }

    /// Waits for the first complete config.
    pub async fn ready(&mut self) {
        assert!(tokio::time::timeout(WAIT, self.ready.wait()).await.expect("xDS ready in time"), "xDS client gone");
    }

    /// Stops the client and waits for it to end.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        tokio::time::timeout(WAIT, self.task).await.expect("the client stops on shutdown").unwrap();
    }
}

/// The proxy fed by a scripted control plane, with its admin endpoint.
pub struct XdsProxy {
    /// Serving its targets (`0.0.0.0_80`, destination port 80, for
    /// [`start_with_xds`]) on `addrs`, in order.
    pub proxy: Running,
    /// The ADS stream after the first sync: the test sends what comes next.
    pub stream: DeltaStream,
    pub admin: SocketAddr,
    _server: AdsServer,
    /// Its stop also stops the admin endpoint; both stop when dropped.
    _client: RunningClient,
}

/// Starts the scripted control plane, an xDS client that applies what it
/// sends (`resources` first), the admin endpoint, and, once the client is
/// ready, the proxy serving listener `0.0.0.0_80`.
pub async fn start_with_xds(resources: Resources) -> XdsProxy {
    start_with_xds_as(resources, node("web", "shop", "web", &[]), vec![named("0.0.0.0_80", 80)], None).await
}

/// As [`start_with_xds`], for the proxy `node`, serving `targets`, reporting
/// to `observer` too.
pub async fn start_with_xds_as(
    resources: Resources,
    node: NodeIdentity,
    targets: Vec<ListenerTarget>,
    observer: Option<Arc<dyn RequestObserver>>,
) -> XdsProxy {
    let mut server = AdsServer::start().await;
    let mut client = RunningClient::start(server.addr, node, true);
    let mut stream = server.next_delta().await;
    sync(&mut stream, resources).await;
    client.ready().await;

    let proxy = serve(client.state.clone(), targets, observer).await;
    let (quit, _) = watch::channel(false);
    let admin = Admin {
        config: Arc::new(config()),
        state: client.state.clone(),
        ready: client.ready.clone(),
        xds_metrics: client.metrics.clone(),
        telemetry: None,
        log: None,
        cluster_stats: None,
        quit,
        drain: proxy.drain_watch.clone(),
        workloads: None,
    };
    let admin_server = AdminServer::bind("127.0.0.1:0".parse().unwrap(), admin).await.unwrap();
    let admin = admin_server.local_addr().unwrap();
    tokio::spawn(admin_server.run(client.stop.subscribe()));
    XdsProxy { proxy, stream, admin, _server: server, _client: client }
}
