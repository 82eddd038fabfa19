//! Connections to upstream endpoints, per worker: per cluster, an HTTP/1.1
//! pool of our own (see `pool`) and, when used, hyper-util's pooled HTTP/2
//! client, both keyed by endpoint address and connecting through the
//! cluster's connector, which adds mesh mTLS where the cluster wants it (see
//! `connector`); and TCP connects with the cluster's connect timeout.

use foldhash::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpStream;

use super::ProxyError;
use super::connector::MeshConnector;
use super::lb::UpstreamAddr;
use super::pool::{Http1Pool, SendError, not_http};
use super::waypoint::Waypoint;
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
    http1: Option<Arc<Http1Pool>>,
    http2: Option<Arc<HttpClient>>,
}

/// Where a cluster's requests go: its HTTP/1.1 pool or its HTTP/2 client.
#[derive(Clone)]
pub(crate) enum UpstreamClient {
    Http1(Arc<Http1Pool>),
    Http2(Arc<HttpClient>),
}

impl UpstreamClient {
    /// Sends an absolute-form request to the endpoint its URI names.
    pub(crate) async fn send(&self, req: Request<ProxyBody>) -> Result<Response<ProxyBody>, SendError> {
        match self {
            UpstreamClient::Http1(pool) => pool.send(req).await,
            UpstreamClient::Http2(client) => match client.request(req).await {
                Ok(resp) => Ok(resp.map(|b| b.boxed())),
                Err(e) if e.is_connect() => Err(SendError::Connect(e.into())),
                Err(e) if spoke_garbage(&e) => Err(SendError::Protocol(e.into())),
                Err(e) => Err(SendError::Reset(e.into())),
            },
        }
    }
}

/// Whether hyper's own error, under the pooled client's, says the upstream's
/// response was not HTTP (rather than that the upstream went away).
fn spoke_garbage(e: &hyper_util::client::legacy::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            return not_http(h);
        }
        source = s.source();
    }
    false
}

/// The clients of every cluster used so far. A cluster that disappears from
/// the config keeps its (idle, soon empty) pool until the process ends.
pub struct Pools {
    clusters: RwLock<HashMap<String, ClusterClients>>,
    state: Arc<State>,
    tls: Arc<TlsConfigStore>,
    /// Opens the HBONE streams of internal endpoints.
    waypoint: Arc<Waypoint>,
}

impl Pools {
    pub(crate) fn new(state: Arc<State>, tls: Arc<TlsConfigStore>, waypoint: Arc<Waypoint>) -> Pools {
        Pools { clusters: RwLock::default(), state, tls, waypoint }
    }

    /// The cluster's client for HTTP/2 or HTTP/1.1, made on first use (and
    /// again when the cluster's connect timeout changes).
    pub(crate) fn client(&self, cluster: &Cluster, h2: bool) -> UpstreamClient {
        let pick = |c: &ClusterClients| match h2 {
            true => c.http2.clone().map(UpstreamClient::Http2),
            false => c.http1.clone().map(UpstreamClient::Http1),
        };
        let found =
            self.clusters.read().ok().and_then(|m| {
                m.get(&cluster.name).filter(|c| c.connect_timeout == cluster.connect_timeout).and_then(pick)
            });
        if let Some(c) = found {
            return c;
        }
        let client = self.build_client(cluster, h2);
        let Ok(mut m) = self.clusters.write() else { return client };
        let fresh = || ClusterClients { connect_timeout: cluster.connect_timeout, http1: None, http2: None };
        let entry = m.entry(cluster.name.clone()).or_insert_with(fresh);
        if entry.connect_timeout != cluster.connect_timeout {
            *entry = fresh();
        }
        // Requests that raced here on first use all get the client stored
        // first: each returning its own would open its own connections (two
        // HTTP/2 connections where one carries every stream).
        match client {
            UpstreamClient::Http1(p) => UpstreamClient::Http1(entry.http1.get_or_insert(p).clone()),
            UpstreamClient::Http2(c) => UpstreamClient::Http2(entry.http2.get_or_insert(c).clone()),
        }
    }

    fn build_client(&self, cluster: &Cluster, h2: bool) -> UpstreamClient {
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(cluster.connect_timeout));
        tcp.set_nodelay(true);
        let app = if h2 { AppProtocol::Http2 } else { AppProtocol::Http1 };
        let connector =
            MeshConnector::new(tcp, &cluster.name, app, self.state.clone(), self.tls.clone(), self.waypoint.clone());
        if !h2 {
            return UpstreamClient::Http1(Arc::new(Http1Pool::new(connector)));
        }
        UpstreamClient::Http2(Arc::new(
            Client::builder(TokioExecutor::new())
                .pool_idle_timeout(POOL_IDLE)
                .pool_timer(TokioTimer::new())
                .timer(TokioTimer::new())
                // The Host header is the client's (or the route's rewrite), never the endpoint's address.
                .set_host(false)
                .http2_only(true)
                .build(connector),
        ))
    }
}

/// A TCP connection to an endpoint within the cluster's connect timeout.
pub async fn connect_tcp(cluster: &str, addr: &UpstreamAddr, timeout: Duration) -> Result<TcpStream, ProxyError> {
    let connect = async {
        match addr {
            UpstreamAddr::Socket(a) => TcpStream::connect(a).await,
            UpstreamAddr::Name(host, port) => TcpStream::connect((host.as_str(), *port)).await,
            UpstreamAddr::Internal { listener, .. } => {
                Err(std::io::Error::other(format!("internal listener {listener:?} is not reached over TCP")))
            }
        }
    };
    let stream = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| ProxyError::ConnectTimeout(addr.to_string()))?
        .map_err(|source| ProxyError::Connect { cluster: cluster.to_string(), address: addr.to_string(), source })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
