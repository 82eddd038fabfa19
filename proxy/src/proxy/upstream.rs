//! Connections to upstream endpoints: a pooled hyper client per cluster and
//! upstream protocol (the pool inside is keyed by endpoint address; its
//! connector adds mesh mTLS where the cluster wants it, see `connector`), and
//! TCP connects with the cluster's connect timeout.

use foldhash::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpStream;

use super::ProxyError;
use super::connector::MeshConnector;
use super::lb::UpstreamAddr;
use crate::state::{Cluster, State};
use crate::tls::{AppProtocol, TlsConfigStore};

/// Every body the data path moves: the client's, the upstream's, or one it made.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;
pub type HttpClient = Client<MeshConnector, ProxyBody>;

/// Idle upstream connections are closed after this long (Envoy's default
/// idle timeout is 1 h; hyper's pool default is 90 s, which frees memory sooner).
const POOL_IDLE: Duration = Duration::from_secs(90);

struct ClusterClients {
    connect_timeout: Duration,
    /// [HTTP/1.1, HTTP/2]
    clients: [Option<HttpClient>; 2],
}

/// The clients of every cluster used so far. A cluster that disappears from
/// the config keeps its (idle, soon empty) pool until the process ends.
pub struct Pools {
    clusters: RwLock<HashMap<String, ClusterClients>>,
    state: Arc<State>,
    tls: Arc<TlsConfigStore>,
}

impl Pools {
    pub fn new(state: Arc<State>, tls: Arc<TlsConfigStore>) -> Pools {
        Pools { clusters: RwLock::default(), state, tls }
    }

    pub fn client(&self, cluster: &Cluster, h2: bool) -> HttpClient {
        let slot = usize::from(h2);
        let found = self.clusters.read().ok().and_then(|m| {
            m.get(&cluster.name)
                .filter(|c| c.connect_timeout == cluster.connect_timeout)
                .and_then(|c| c.clients[slot].clone())
        });
        if let Some(c) = found {
            return c;
        }
        let client = self.build_client(cluster, h2);
        if let Ok(mut m) = self.clusters.write() {
            let entry = m
                .entry(cluster.name.clone())
                .or_insert_with(|| ClusterClients { connect_timeout: cluster.connect_timeout, clients: [None, None] });
            if entry.connect_timeout != cluster.connect_timeout {
                *entry = ClusterClients { connect_timeout: cluster.connect_timeout, clients: [None, None] };
            }
            entry.clients[slot].get_or_insert_with(|| client.clone());
        }
        client
    }

    fn build_client(&self, cluster: &Cluster, h2: bool) -> HttpClient {
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(cluster.connect_timeout));
        tcp.set_nodelay(true);
        let app = if h2 { AppProtocol::Http2 } else { AppProtocol::Http1 };
        let connector = MeshConnector::new(tcp, &cluster.name, app, self.state.clone(), self.tls.clone());
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            // The Host header is the client's (or the route's rewrite), never the endpoint's address.
            .set_host(false)
            .http2_only(h2)
            .build(connector)
    }
}

/// A TCP connection to an endpoint within the cluster's connect timeout.
pub async fn connect_tcp(cluster: &str, addr: &UpstreamAddr, timeout: Duration) -> Result<TcpStream, ProxyError> {
    let connect = async {
        match addr {
            UpstreamAddr::Socket(a) => TcpStream::connect(a).await,
            UpstreamAddr::Name(host, port) => TcpStream::connect((host.as_str(), *port)).await,
        }
    };
    let stream = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| ProxyError::ConnectTimeout(addr.to_string()))?
        .map_err(|source| ProxyError::Connect { cluster: cluster.to_string(), address: addr.to_string(), source })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
